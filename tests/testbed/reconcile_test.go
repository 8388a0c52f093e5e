package testbed_test

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/fenced-project/fenced/tests/arraysim/powerstore"
	"github.com/fenced-project/fenced/tests/csidriver"
	"github.com/fenced-project/fenced/tests/testbed"
)

// The attacher's reconcile (the external-attacher's ReconcileVA) publishes
// an attached NFS volume of csi-powerstore again once its node's IP is
// cut from the export, because the driver's ListVolumes reports NFS
// volumes with no published nodes: every pass re-publishes every attached
// NFS attachment, whatever the node's taints. Without the health monitor
// the driver does not advertise LIST_VOLUMES_PUBLISHED_NODES and nothing
// is re-published.
func TestAttacherReconcileRepublishes(t *testing.T) {
	t.Parallel()
	cp := testbed.Start(t, testbed.Options{NodeLeaseDurationSeconds: leaseDuration})
	ctx := ctxFor(t, 4*time.Minute)
	workers, err := cp.AddNodes(ctx, testbed.NodeSpecs("worker", 2)...)
	require.NoError(t, err)
	require.NoError(t, cp.WaitNodesReady(ctx, "worker-1", "worker-2"))
	srv := startArray(t, cp, workers, "powerstore", "{perNode: {protocol: iSCSI, volumes: 0}}")
	sim := srv.Family().(*powerstore.Sim)
	c, ok := cp.CSIControllers().Lookup(testbed.DriverPowerStore)
	require.True(t, ok)
	ps := c.(*csidriver.Emulated).Controller.(*csidriver.PowerStore)
	ip := workers[0].Spec.IP + "/255.255.255.255"
	fsName := testbed.VolumeName("app", "db", 0)
	rwRoot := func() []string {
		st := sim.State()
		for _, fs := range st.FileSystems {
			if fs.Name != fsName {
				continue
			}
			for _, x := range st.NFSExports {
				if x.FileSystemID == fs.ID {
					return x.ReadWriteRootHosts
				}
			}
		}
		return nil
	}

	cp.SetAttacherReconcileSync(200 * time.Millisecond)
	_, err = cp.CreateStatefulSet(ctx, testbed.StatefulSetSpec{Namespace: "app", Name: "db", NFS: true,
		Driver: testbed.DriverPowerStore, NodeSelector: map[string]string{"kubernetes.io/hostname": "worker-1"},
		// The pod stays through the out-of-service taint below: evicted, the
		// attach-detach controller would force-detach the volume (taking
		// the re-published IP away again) before the test could look.
		Tolerations: []corev1.Toleration{{Key: "node.kubernetes.io/out-of-service", Operator: corev1.TolerationOpExists,
			Effect: corev1.TaintEffectNoExecute}}})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		vas, err := cp.VolumeAttachmentsOfNode(ctx, "worker-1")
		return err == nil && len(vas) == 1 && vas[0].Status.Attached
	}, time.Minute, 200*time.Millisecond, "the volume never attached to worker-1")
	require.Equal(t, []string{ip}, rwRoot())

	// Health monitor off: the cut stays, however many passes run.
	require.NoError(t, sim.SetExportHosts(fsName, "read_write_root_hosts", nil))
	writes := srv.AuditWrites()
	after := cp.AttacherReconcilePasses() + 3
	require.Eventually(t, func() bool { return cp.AttacherReconcilePasses() >= after }, time.Minute, 50*time.Millisecond)
	assert.Empty(t, rwRoot())
	assert.Zero(t, cp.AttacherRepublished())

	// Health monitor on, the node tainted out-of-service: the next pass
	// re-publishes, the node's IP is back.
	// The kubelet emulation patches the Node's status meanwhile: retry the
	// update on a conflict, as any controller writing a Node does.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := cp.Client.CoreV1().Nodes().Get(ctx, "worker-1", metav1.GetOptions{})
		if err != nil {
			return err
		}
		node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: "node.kubernetes.io/out-of-service",
			Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute})
		_, err = cp.Client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
		return err
	})
	require.NoError(t, err)
	ps.SetHealthMonitor(true)
	cp.SetAttacherReconcileSync(200 * time.Millisecond)
	require.Eventually(t, func() bool { return slices.Contains(rwRoot(), ip) }, time.Minute, 100*time.Millisecond,
		"the reconcile never re-published the cut NFS volume")
	assert.Positive(t, cp.AttacherRepublished())
	var regrants int
	for _, e := range srv.AuditWrites()[len(writes):] {
		require.True(t, csidriver.IsDriverRequest(e.Remote), "%s %s", e.Method, e.Path)
		regrants++
	}
	assert.Positive(t, regrants, "the re-publish is the driver's write")
}
