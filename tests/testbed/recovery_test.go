package testbed_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fenced-project/fenced/tests/testbed"
)

// TestKilledNodeStatefulSetRecovery is the manual recovery a fencer
// automates: a node dies, it is marked out of service, its StatefulSet pod
// is force-deleted and comes back on a healthy node.
func TestKilledNodeStatefulSetRecovery(t *testing.T) {
	t.Parallel() // mostly waiting on state: overlaps with the other small control planes
	cp := testbed.Start(t, testbed.Options{NodeLeaseDurationSeconds: leaseDuration})
	ctx := ctxFor(t, 5*time.Minute)

	workers, err := cp.AddNodes(ctx, testbed.NodeSpecs("worker", 3)...)
	require.NoError(t, err)
	require.NoError(t, cp.WaitNodesReady(ctx, "worker-1", "worker-2", "worker-3"))

	// What the API shows about each node is what it was created with.
	for _, w := range workers {
		n, err := cp.Client.CoreV1().Nodes().Get(ctx, w.Name(), metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, w.IP(), internalIP(n))
		assert.Equal(t, w.BootID(), n.Status.NodeInfo.BootID)
		assert.Equal(t, w.Spec.MachineID, n.Status.NodeInfo.MachineID)
		assert.Equal(t, "true", n.Annotations["volumes.kubernetes.io/controller-managed-attach-detach"])
		assert.Equal(t, "kwok", n.Labels["type"])
		csi, err := cp.Client.StorageV1().CSINodes().Get(ctx, w.Name(), metav1.GetOptions{})
		require.NoError(t, err)
		got := map[string]string{}
		for _, d := range csi.Spec.Drivers {
			got[d.Name] = d.NodeID
		}
		assert.Equal(t, w.Spec.CSINodeIDs(), got)
		var ann map[string]string
		require.NoError(t, json.Unmarshal([]byte(n.Annotations["csi.volume.kubernetes.io/nodeid"]), &ann))
		assert.Equal(t, w.Spec.CSINodeIDs(), ann)
		require.NoError(t, testbed.ProbeKubelet(ctx, w.KubeletAddr()))
	}

	// The spare node the pod moves to exists on the array from the start
	// (the driver's node plugin registers its host when it starts), but
	// takes no pod until the victim is dead.
	spare, err := cp.AddNodes(ctx, testbed.NodeSpec{Name: "worker-4"})
	require.NoError(t, err)
	require.NoError(t, cp.WaitNodesReady(ctx, "worker-4"))
	setUnschedulable(t, ctx, cp, "worker-4", true)
	startArray(t, cp, append(slices.Clone(workers), spare...), "powerstore", "{perNode: {protocol: iSCSI, volumes: 0}}")
	_, err = cp.CreateStatefulSet(ctx, testbed.StatefulSetSpec{
		Namespace: "app", Name: "db", Replicas: 3, Driver: testbed.DriverPowerStore, AntiAffinity: true,
	})
	require.NoError(t, err)
	var pods map[string]corev1.Pod
	require.Eventually(t, func() bool {
		pods, err = runningPods(ctx, cp, "app", "db")
		return err == nil && len(pods) == 3
	}, time.Minute, 200*time.Millisecond, "statefulset db not running")
	onNode := map[string]bool{}
	for _, p := range pods {
		onNode[p.Spec.NodeName] = true
	}
	require.Len(t, onNode, 3, "anti-affinity puts each pod on its own node")

	// Every pod's volume gets a VolumeAttachment on its node, which the
	// test bed's attacher publishes through the emulated driver.
	require.Eventually(t, func() bool {
		vas, err := cp.Client.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
		if err != nil || len(vas.Items) != 3 {
			return false
		}
		for _, va := range vas.Items {
			if !va.Status.Attached {
				return false
			}
		}
		return true
	}, time.Minute, 200*time.Millisecond, "volume attachments missing or not attached")

	setUnschedulable(t, ctx, cp, "worker-4", false)

	victimPod := pods["db-0"]
	victim := cp.Node(victimPod.Spec.NodeName)
	require.NotNil(t, victim)
	pvName := testbed.PVName("app", "db", 0)
	require.Eventually(t, func() bool {
		vas, err := cp.VolumeAttachmentsOfNode(ctx, victim.Name())
		return err == nil && len(vas) == 1 && *vas[0].Spec.Source.PersistentVolumeName == pvName
	}, time.Minute, 200*time.Millisecond)

	require.NoError(t, victim.Kill(ctx))
	assert.Equal(t, testbed.NodeKilled, victim.State())
	require.Error(t, testbed.ProbeKubelet(ctx, victim.KubeletAddr()), "kubelet port of a killed node must refuse")
	requireLeaseStops(t, ctx, cp, victim.Name())
	require.Error(t, testbed.ProbeKubelet(ctx, victim.KubeletAddr()))
	for _, w := range append(workers, spare...) {
		if w != victim {
			require.NoError(t, testbed.ProbeKubelet(ctx, w.KubeletAddr()), w.Name())
		}
	}

	// Taint first, then force-delete: otherwise the scheduler may put the
	// new pod straight back on the dead node.
	before := time.Now()
	taint, err := json.Marshal(map[string]any{"spec": map[string]any{"taints": []corev1.Taint{{
		Key: "node.kubernetes.io/out-of-service", Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute,
	}}}})
	require.NoError(t, err)
	_, err = cp.Client.CoreV1().Nodes().Patch(ctx, victim.Name(), types.StrategicMergePatchType, taint, metav1.PatchOptions{})
	require.NoError(t, err)
	zero := int64(0)
	uid := victimPod.UID
	err = cp.Client.CoreV1().Pods("app").Delete(ctx, "db-0", metav1.DeleteOptions{
		GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &uid},
	})
	adminDeleted := err == nil
	if err != nil {
		// The taint's NoExecute eviction and the pod GC race the test's own
		// delete; losing that race is fine, anything else is not.
		require.True(t, apierrors.IsNotFound(err) || apierrors.IsConflict(err), "force delete: %v", err)
	}

	var moved corev1.Pod
	require.Eventually(t, func() bool {
		p, err := cp.Client.CoreV1().Pods("app").Get(ctx, "db-0", metav1.GetOptions{})
		if err != nil || p.UID == uid {
			return false
		}
		moved = *p
		return p.Spec.NodeName != "" && p.Status.Phase == corev1.PodRunning
	}, time.Minute, 100*time.Millisecond, "db-0 not recreated and running")
	assert.Equal(t, "worker-4", moved.Spec.NodeName)
	t.Logf("db-0 running on %s %s after the taint", moved.Spec.NodeName, time.Since(before).Round(time.Millisecond))

	// Its volume follows it: detached from the dead node (the
	// out-of-service taint lets the attach/detach controller detach at
	// once) and attached to the new one.
	require.Eventually(t, func() bool {
		vas, err := cp.VolumeAttachmentsOfNode(ctx, "worker-4")
		old, oerr := cp.VolumeAttachmentsOfNode(ctx, victim.Name())
		return err == nil && oerr == nil && len(old) == 0 && len(vas) == 1 &&
			*vas[0].Spec.Source.PersistentVolumeName == pvName && vas[0].Status.Attached
	}, 2*time.Minute, 200*time.Millisecond, "volume not moved from %s to worker-4", victim.Name())

	// The audit log witnesses the delete and the taint.
	var deletes []testbed.AuditEvent
	require.Eventually(t, func() bool {
		deletes, err = cp.AuditEvents(testbed.AuditFilter{
			Verb: "delete", Resource: "pods", Namespace: "app", Name: "db-0", Since: before, Succeeded: true,
		})
		return err == nil && len(deletes) > 0
	}, 10*time.Second, 100*time.Millisecond, "no delete of db-0 in the audit log")
	for _, e := range deletes {
		t.Logf("audit: %s", e)
	}
	if adminDeleted {
		admin, err := cp.AuditEvents(testbed.AuditFilter{Verb: "delete", Resource: "pods", Name: "db-0", User: "admin", Succeeded: true})
		require.NoError(t, err)
		assert.Len(t, admin, 1)
	}
	patches, err := cp.AuditEvents(testbed.AuditFilter{
		Verb: "patch", Resource: "nodes", Subresource: "-", Name: victim.Name(), User: "admin", Since: before,
	})
	require.NoError(t, err)
	assert.Len(t, patches, 1, "the taint patch")
}

func setUnschedulable(t *testing.T, ctx context.Context, cp *testbed.ControlPlane, node string, on bool) {
	t.Helper()
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"unschedulable": on}})
	require.NoError(t, err)
	_, err = cp.Client.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err)
}
