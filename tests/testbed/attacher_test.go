package testbed_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/tests/arraysim/families"
	"github.com/fenced-project/fenced/tests/arraysim/fixture"
	"github.com/fenced-project/fenced/tests/arraysim/powerflex"
	"github.com/fenced-project/fenced/tests/arraysim/simcore"
	"github.com/fenced-project/fenced/tests/csidriver"
	"github.com/fenced-project/fenced/tests/testbed"
)

// startArray starts a simulator of the family for the nodes and registers
// its emulated driver with the control plane.
func startArray(t *testing.T, cp *testbed.ControlPlane, nodes []*testbed.Node, family, specYAML string) *simcore.Server {
	t.Helper()
	var b strings.Builder
	b.WriteString("nodes:\n")
	for _, n := range nodes {
		s := n.Spec
		fmt.Fprintf(&b, "  - {name: %s, ip: %s, fqdn: %s, machineID: %s, sdcGUID: %s, iqn: %q}\n",
			s.Name, s.IP, s.FQDN, s.MachineID, s.SDCGUID, s.IQN)
	}
	fmt.Fprintf(&b, "arrays:\n  - name: %s-1\n    family: %s\n    spec: %s\n", family, family, specYAML)
	fx, err := fixture.Parse([]byte(b.String()))
	require.NoError(t, err)
	fam, err := families.New(fx.Arrays[0], fx.Nodes)
	require.NoError(t, err)
	srv := simcore.New(fx.Arrays[0].Name, fam, nil)
	e, err := csidriver.ForSim(t.Context(), srv, "", "", t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Close() })
	cp.RegisterCSIController(e)
	return srv
}

// The attacher publishes through the emulated driver under the sidecar's
// finalizer, records the driver's RWO refusal as attachError, and
// unpublishes before the attachment goes away.
func TestAttacherPublishesThroughTheDriver(t *testing.T) {
	t.Parallel()
	cp := testbed.Start(t, testbed.Options{NodeLeaseDurationSeconds: leaseDuration})
	ctx := ctxFor(t, 4*time.Minute)
	workers, err := cp.AddNodes(ctx, testbed.NodeSpecs("worker", 2)...)
	require.NoError(t, err)
	require.NoError(t, cp.WaitNodesReady(ctx, "worker-1", "worker-2"))
	srv := startArray(t, cp, workers, "powerflex", "{perNode: {volumes: 0}}")
	sim := srv.Family().(*powerflex.Sim)
	mappedTo := func(handle string) []string {
		loc, err := arrayclients.ParseVolumeHandle(arrayclients.PowerFlex, handle, "ext4")
		require.NoError(t, err)
		var out []string
		for _, w := range workers {
			if slices.Contains(sim.MappedVolumes(w.Spec.SDCGUID), loc.Object) {
				out = append(out, w.Name())
			}
		}
		return out
	}

	_, err = cp.CreateStatefulSet(ctx, testbed.StatefulSetSpec{Namespace: "app", Name: "db",
		Driver: testbed.DriverPowerFlex, NodeSelector: map[string]string{"kubernetes.io/hostname": "worker-1"}})
	require.NoError(t, err)
	pv, err := cp.Client.CoreV1().PersistentVolumes().Get(ctx, testbed.PVName("app", "db", 0), metav1.GetOptions{})
	require.NoError(t, err)
	handle := pv.Spec.CSI.VolumeHandle
	assert.Empty(t, mappedTo(handle), "a new volume is given to no node")

	fin := testbed.AttacherFinalizer(testbed.DriverPowerFlex)
	assert.Equal(t, "external-attacher/csi-vxflexos-dellemc-com", fin)
	var va storagev1.VolumeAttachment
	require.Eventually(t, func() bool {
		vas, err := cp.VolumeAttachmentsOfNode(ctx, "worker-1")
		if err != nil || len(vas) != 1 {
			return false
		}
		va = vas[0]
		return va.Status.Attached
	}, time.Minute, 200*time.Millisecond, "the volume never attached to worker-1")
	assert.Contains(t, va.Finalizers, fin)
	assert.Equal(t, []string{"worker-1"}, mappedTo(handle), "attached means published on the array")

	// A second attachment of the single-node volume to worker-2 is refused
	// by the driver; the refusal is the attachment's attachError.
	other := &storagev1.VolumeAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: "csi-manual-worker-2"},
		Spec: storagev1.VolumeAttachmentSpec{Attacher: testbed.DriverPowerFlex, NodeName: "worker-2",
			Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr.To(pv.Name)}},
	}
	_, err = cp.Client.StorageV1().VolumeAttachments().Create(ctx, other, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		got, err := cp.Client.StorageV1().VolumeAttachments().Get(ctx, other.Name, metav1.GetOptions{})
		return err == nil && got.Status.AttachError != nil && !got.Status.Attached &&
			strings.Contains(got.Status.AttachError.Message, "already published")
	}, time.Minute, 200*time.Millisecond, "no attachError for the refused publish")
	assert.Equal(t, []string{"worker-1"}, mappedTo(handle))
	require.NoError(t, cp.Client.StorageV1().VolumeAttachments().Delete(ctx, other.Name, metav1.DeleteOptions{}))
	requireGone(t, ctx, cp, other.Name)
	assert.Equal(t, []string{"worker-1"}, mappedTo(handle), "unpublishing worker-2 leaves worker-1's mapping")

	// The pod goes: the attach/detach controller deletes the attachment,
	// the driver unpublishes, the finalizer goes, the attachment is gone.
	require.NoError(t, cp.Client.AppsV1().StatefulSets("app").Delete(ctx, "db", metav1.DeleteOptions{}))
	requireGone(t, ctx, cp, va.Name)
	assert.Empty(t, mappedTo(handle), "detached means unpublished on the array")

	var driverWrites int
	for _, e := range srv.AuditWrites() {
		require.True(t, csidriver.IsDriverRequest(e.Remote), "%s %s", e.Method, e.Path)
		driverWrites++
	}
	assert.Positive(t, driverWrites)
}

func requireGone(t *testing.T, ctx context.Context, cp *testbed.ControlPlane, va string) {
	t.Helper()
	require.Eventually(t, func() bool {
		_, err := cp.Client.StorageV1().VolumeAttachments().Get(ctx, va, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, 2*time.Minute, 200*time.Millisecond, "volume attachment %s not gone", va)
}
