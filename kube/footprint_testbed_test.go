package kube_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fenced-project/fenced/kube"
	"github.com/fenced-project/fenced/tests/testbed"
)

// Attachment changes name the volume by PersistentVolume, CSI driver and
// handle, read from a real API server's objects: a second
// PersistentVolume of the same array volume, or an inline volume, is
// known by its handle.
func TestAttachmentChangesNameTheVolumeHandle(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a real control plane: skipped under -short")
	}
	cp := testbed.Start(t, testbed.Options{})
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()

	fp, err := kube.NewFootprints(cp.Client)
	require.NoError(t, err)
	var mu sync.Mutex
	var got []kube.AttachmentChange
	fp.OnAttachmentChange(func(ch kube.AttachmentChange) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, ch)
	})
	fp.Start(ctx)
	require.True(t, fp.WaitForSync(ctx))

	const driver, handle = "csi-vxflexos.dellemc.com", "7e1c2a5f00000003/6b7c8d9e00000001"
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-static-copy"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: handle}},
		}}
	_, err = cp.Client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		vols, err := fp.PersistentVolumes()
		return err == nil && len(vols) > 0
	}, time.Minute, 50*time.Millisecond, "the PersistentVolume reaches the cache")

	pvName := pv.Name
	for _, va := range []*storagev1.VolumeAttachment{
		{ObjectMeta: metav1.ObjectMeta{Name: "va-by-pv"}, Spec: storagev1.VolumeAttachmentSpec{Attacher: driver, NodeName: "worker-9",
			Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: &pvName}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "va-inline"}, Spec: storagev1.VolumeAttachmentSpec{Attacher: driver, NodeName: "worker-9",
			Source: storagev1.VolumeAttachmentSource{InlineVolumeSpec: &corev1.PersistentVolumeSpec{
				AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: handle}},
			}}}},
	} {
		_, err = cp.Client.StorageV1().VolumeAttachments().Create(ctx, va, metav1.CreateOptions{})
		require.NoError(t, err, va.Name)
	}
	want := []kube.AttachmentChange{{PV: pvName, Driver: driver, Handle: handle, Node: "worker-9"}, {Driver: driver, Handle: handle, Node: "worker-9"}}
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, w := range want {
			if !slices.Contains(got, w) {
				return false
			}
		}
		return true
	}, time.Minute, 50*time.Millisecond, "changes seen: %v", func() []kube.AttachmentChange { mu.Lock(); defer mu.Unlock(); return got }())

	// Its deletion (the attach-detach controller's detach) is a change
	// of the node's own attachment going away.
	require.NoError(t, cp.Client.StorageV1().VolumeAttachments().Delete(ctx, "va-by-pv", metav1.DeleteOptions{}))
	gone := kube.AttachmentChange{PV: pvName, Driver: driver, Handle: handle, Node: "worker-9", Detaching: true}
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.Contains(got, gone)
	}, time.Minute, 50*time.Millisecond, "the deletion is seen as a detach")
}
