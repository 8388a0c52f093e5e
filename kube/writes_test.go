package kube_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fenced-project/fenced/kube"
	"github.com/fenced-project/fenced/tests/testbed"
)

// TestWriterAgainstAPIServer exercises every write against a real
// kube-apiserver: each one twice, to show that repeating it is harmless.
func TestWriterAgainstAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	cp := testbed.Start(t, testbed.Options{})
	// No array takes part: volumes are attached without a driver.
	cp.AttachWithoutController(true)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	nodes, err := cp.AddNodes(ctx, testbed.NodeSpec{Name: "wr-1"})
	require.NoError(t, err)
	node := nodes[0].Name()
	w := kube.NewWriter(cp.Client, "fenced", "test-replica", nil)
	require.NoError(t, w.CheckAPIServer(ctx))

	t.Run("taints", func(t *testing.T) {
		fenced := corev1.Taint{Key: "fenced.io/fenced", Value: "fence-1", Effect: corev1.TaintEffectNoSchedule}
		oos := corev1.Taint{Key: "node.kubernetes.io/out-of-service", Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute}
		changed, err := w.AddTaints(ctx, node, fenced, oos)
		require.NoError(t, err)
		assert.True(t, changed)
		changed, err = w.AddTaints(ctx, node, fenced, oos)
		require.NoError(t, err)
		assert.False(t, changed, "adding present taints again must not change the node")

		n, err := w.GetNode(ctx, node)
		require.NoError(t, err)
		require.Len(t, taintsWithKeys(n, fenced.Key, oos.Key), 2)
		for _, tt := range n.Spec.Taints {
			if tt.Key == oos.Key {
				require.NotNil(t, tt.TimeAdded, "a NoExecute taint carries the time it was added")
			}
		}

		newer := fenced
		newer.Value = "fence-2"
		changed, err = w.AddTaints(ctx, node, newer)
		require.NoError(t, err)
		assert.True(t, changed, "a new value replaces the old one")
		n, err = w.GetNode(ctx, node)
		require.NoError(t, err)
		got := taintsWithKeys(n, fenced.Key)
		require.Len(t, got, 1)
		assert.Equal(t, "fence-2", got[0].Value)

		changed, err = w.RemoveTaints(ctx, node, fenced, oos)
		require.NoError(t, err)
		assert.True(t, changed)
		changed, err = w.RemoveTaints(ctx, node, fenced, oos)
		require.NoError(t, err)
		assert.False(t, changed)
		n, err = w.GetNode(ctx, node)
		require.NoError(t, err)
		assert.Empty(t, taintsWithKeys(n, fenced.Key, oos.Key))

		_, err = w.AddTaints(ctx, "no-such-node", fenced)
		require.Error(t, err)
		assert.True(t, apierrors.IsNotFound(err))
	})

	t.Run("pods", func(t *testing.T) {
		require.NoError(t, cp.EnsureNamespace(ctx, "wr"))
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p1", Namespace: "wr"},
			Spec: corev1.PodSpec{
				NodeName:   node,
				Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/c:1"}},
			},
		}
		created, err := cp.Client.CoreV1().Pods("wr").Create(ctx, pod, metav1.CreateOptions{})
		require.NoError(t, err)

		pods, err := w.PodsOnNode(ctx, node)
		require.NoError(t, err)
		require.Contains(t, podUIDs(pods), created.UID)

		deleted, err := w.ForceDeletePod(ctx, "wr", "p1", types.UID("not-its-uid"))
		require.NoError(t, err, "a UID mismatch means our pod is gone")
		assert.False(t, deleted)
		_, err = cp.Client.CoreV1().Pods("wr").Get(ctx, "p1", metav1.GetOptions{})
		require.NoError(t, err, "a delete with another UID must leave the pod alone")

		_, err = w.ForceDeletePod(ctx, "wr", "p1", "")
		require.Error(t, err, "a delete without a UID is refused")

		deleted, err = w.ForceDeletePod(ctx, "wr", "p1", created.UID)
		require.NoError(t, err)
		assert.True(t, deleted)
		_, err = cp.Client.CoreV1().Pods("wr").Get(ctx, "p1", metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "grace 0 removes the pod at once: %v", err)

		deleted, err = w.ForceDeletePod(ctx, "wr", "p1", created.UID)
		require.NoError(t, err, "NotFound is done")
		assert.False(t, deleted)
	})

	t.Run("pending detaches", func(t *testing.T) {
		// A StatefulSet pod on the node: the attach/detach controller
		// attaches its volume, which the pod needs.
		_, err := cp.CreateStatefulSet(ctx, testbed.StatefulSetSpec{Namespace: "wr", Name: "db",
			NodeSelector: map[string]string{"kubernetes.io/hostname": node}})
		require.NoError(t, err)
		inUse := testbed.PVName("wr", "db", 0)
		require.Eventually(t, func() bool {
			vas, err := cp.VolumeAttachmentsOfNode(ctx, node)
			return err == nil && len(vas) == 1 && *vas[0].Spec.Source.PersistentVolumeName == inUse
		}, 2*time.Minute, 200*time.Millisecond, "the attach/detach controller never attached %s", inUse)
		pending, err := w.PendingDetaches(ctx, node)
		require.NoError(t, err)
		assert.Empty(t, pending, "the running pod needs its volume")

		// An attachment no pod on the node needs (an evicted pod's), and
		// one being deleted (a detach in progress): both pending.
		orphan, detaching := "pv-orphan", "pv-detaching"
		for _, pv := range []string{orphan, detaching} {
			va := &storagev1.VolumeAttachment{
				ObjectMeta: metav1.ObjectMeta{Name: "va-" + pv, Finalizers: []string{"test.fenced.io/hold"}},
				Spec: storagev1.VolumeAttachmentSpec{Attacher: testbed.DriverPowerFlex, NodeName: node,
					Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: &pv}},
			}
			_, err := cp.Client.StorageV1().VolumeAttachments().Create(ctx, va, metav1.CreateOptions{})
			require.NoError(t, err)
		}
		require.NoError(t, cp.Client.StorageV1().VolumeAttachments().Delete(ctx, "va-"+detaching, metav1.DeleteOptions{}))
		pending, err = w.PendingDetaches(ctx, node)
		require.NoError(t, err)
		assert.ElementsMatch(t, []string{"va-pv-orphan (pv-orphan)", "va-pv-detaching (pv-detaching)"}, pending)
		other, err := w.PendingDetaches(ctx, "no-such-node")
		require.NoError(t, err)
		assert.Empty(t, other)

		for _, pv := range []string{orphan, detaching} {
			_, err := cp.Client.StorageV1().VolumeAttachments().Patch(ctx, "va-"+pv, types.MergePatchType,
				[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
			require.NoError(t, err)
			err = cp.Client.StorageV1().VolumeAttachments().Delete(ctx, "va-"+pv, metav1.DeleteOptions{})
			require.True(t, err == nil || apierrors.IsNotFound(err), "delete va-%s: %v", pv, err)
		}
		pending, err = w.PendingDetaches(ctx, node)
		require.NoError(t, err)
		assert.Empty(t, pending)
	})

	t.Run("events", func(t *testing.T) {
		n, err := w.GetNode(ctx, node)
		require.NoError(t, err)
		target := kube.NodeTarget(node, n.UID)
		for range 2 {
			require.NoError(t, w.Event(ctx, target, corev1.EventTypeWarning, "NodeFenced", "fence-7", "fenced by fence-7"))
		}
		list, err := cp.Client.CoreV1().Events(kube.EventNamespace).List(ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.name=" + node + ",reason=NodeFenced",
		})
		require.NoError(t, err)
		require.Len(t, list.Items, 1, "a repeated event is recorded once")
		ev := list.Items[0]
		assert.Equal(t, "Node", ev.InvolvedObject.Kind)
		assert.Equal(t, "fenced", ev.Source.Component)
		assert.Equal(t, "fenced by fence-7", ev.Message)

		require.Error(t, w.Event(ctx, kube.EventTarget{}, corev1.EventTypeNormal, "X", "k", "m"))
	})
}

func taintsWithKeys(n *corev1.Node, keys ...string) []corev1.Taint {
	var out []corev1.Taint
	for _, t := range n.Spec.Taints {
		for _, k := range keys {
			if t.Key == k {
				out = append(out, t)
			}
		}
	}
	return out
}

func podUIDs(pods []corev1.Pod) []types.UID {
	var out []types.UID
	for _, p := range pods {
		out = append(out, p.UID)
	}
	return out
}
