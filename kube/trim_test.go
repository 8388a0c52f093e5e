package kube

import (
	"testing"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

func TestTrimCachedDropsWhatFencedNeverReads(t *testing.T) {
	mf := []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate}}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", ManagedFields: mf, Labels: map[string]string{"a": "b"},
			Annotations: map[string]string{"csi.volume.kubernetes.io/nodeid": "{}"}},
		Status: corev1.NodeStatus{
			Images:     []corev1.ContainerImage{{Names: []string{"busybox"}}},
			Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			NodeInfo:   corev1.NodeSystemInfo{BootID: "boot"},
		},
	}
	out, err := trimCached(node)
	require.NoError(t, err)
	n := out.(*corev1.Node)
	require.Nil(t, n.ManagedFields)
	require.Nil(t, n.Status.Images)
	require.Equal(t, "10.0.0.1", n.Status.Addresses[0].Address, "what fenced reads is kept")
	require.Equal(t, corev1.ConditionTrue, n.Status.Conditions[0].Status)
	require.Equal(t, "boot", n.Status.NodeInfo.BootID)
	require.Equal(t, map[string]string{"a": "b"}, n.Labels)
	require.Len(t, n.Annotations, 1)

	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "n1", ManagedFields: mf}}
	tomb := cache.DeletedFinalStateUnknown{Key: "kube-node-lease/n1", Obj: lease}
	out, err = trimCached(tomb)
	require.NoError(t, err)
	require.Nil(t, out.(cache.DeletedFinalStateUnknown).Obj.(*coordinationv1.Lease).ManagedFields)

	out, err = trimCached("not an object")
	require.NoError(t, err, "what is not an object passes through")
	require.Equal(t, "not an object", out)
}
