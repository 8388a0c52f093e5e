package kube

import (
	"context"
	"fmt"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// CSIVolume is a CSI persistent volume used by a pod.
type CSIVolume struct {
	// Pod is namespace/name of the pod using it.
	Pod string
	// PV is the PersistentVolume's name.
	PV string
	// Driver and Handle are spec.csi.driver and spec.csi.volumeHandle.
	Driver string
	Handle string
}

// Protected reports whether a pod is protected: owned by a StatefulSet (as
// its controller) or matching the selector (nil: none).
func Protected(p *corev1.Pod, sel labels.Selector) bool {
	for _, o := range p.OwnerReferences {
		if o.Kind == "StatefulSet" && o.Controller != nil && *o.Controller {
			return true
		}
	}
	return sel != nil && !sel.Empty() && sel.Matches(labels.Set(p.Labels))
}

// ProtectedVolumes reads, from the API server, the CSI volumes of the
// protected pods running on the node (not terminated), following each
// pod's PersistentVolumeClaims to their bound PersistentVolumes. A claim
// that is gone or not bound yet is skipped. It is called only for nodes an
// array reports disconnected, so it lists instead of watching every pod.
func (w *Writer) ProtectedVolumes(ctx context.Context, node string, sel labels.Selector) ([]CSIVolume, error) {
	pods, err := w.PodsOnNode(ctx, node)
	if err != nil {
		return nil, err
	}
	var out []CSIVolume
	for i := range pods {
		p := &pods[i]
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || !Protected(p, sel) {
			continue
		}
		names, err := w.boundVolumes(ctx, p)
		if err != nil {
			return nil, err
		}
		for _, name := range names {
			pv, err := w.cs.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("get volume %s of pod %s/%s: %w", name, p.Namespace, p.Name, err)
			}
			if pv.Spec.CSI == nil {
				continue
			}
			out = append(out, CSIVolume{Pod: p.Namespace + "/" + p.Name, PV: pv.Name, Driver: pv.Spec.CSI.Driver, Handle: pv.Spec.CSI.VolumeHandle})
		}
	}
	return out, nil
}

// PendingDetaches names the VolumeAttachments of the node that no pod now
// on it needs: attachments the attach/detach controller is still to
// detach (or is detaching), such as those of pods force-deleted from a
// fenced node. An attachment counts as needed when a pod on the node that
// has not terminated mounts a claim bound to its PersistentVolume. Each
// name is followed by its volume, for messages ("va (pv)").
//
// Recovery waits for this list to be empty before it gives a fenced node
// its array access back, so that every detach of the fence's volumes
// happens while the node is still fenced.
func (w *Writer) PendingDetaches(ctx context.Context, node string) ([]string, error) {
	vas, err := w.cs.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list volume attachments of %s: %w", node, err)
	}
	var mine []storagev1.VolumeAttachment
	for _, va := range vas.Items {
		if va.Spec.NodeName == node {
			mine = append(mine, va)
		}
	}
	if len(mine) == 0 {
		return nil, nil
	}
	used, err := w.volumesInUse(ctx, node)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, va := range mine {
		pv := ""
		if va.Spec.Source.PersistentVolumeName != nil {
			pv = *va.Spec.Source.PersistentVolumeName
		}
		if va.DeletionTimestamp == nil && pv != "" && used[pv] {
			continue
		}
		if pv == "" {
			pv = "inline volume"
		}
		out = append(out, fmt.Sprintf("%s (%s)", va.Name, pv))
	}
	return out, nil
}

// volumesInUse returns the PersistentVolumes mounted by the pods on the
// node that have not terminated.
func (w *Writer) volumesInUse(ctx context.Context, node string) (map[string]bool, error) {
	pods, err := w.PodsOnNode(ctx, node)
	if err != nil {
		return nil, err
	}
	used := map[string]bool{}
	for i := range pods {
		p := &pods[i]
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		names, err := w.boundVolumes(ctx, p)
		if err != nil {
			return nil, err
		}
		for _, name := range names {
			used[name] = true
		}
	}
	return used, nil
}

// boundVolumes returns the PersistentVolumes bound to the pod's claims; a
// claim that is gone or not bound yet is skipped.
func (w *Writer) boundVolumes(ctx context.Context, p *corev1.Pod) ([]string, error) {
	var out []string
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim == nil {
			continue
		}
		pvc, err := w.cs.CoreV1().PersistentVolumeClaims(p.Namespace).Get(ctx, v.PersistentVolumeClaim.ClaimName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("get claim %s/%s of pod %s: %w", p.Namespace, v.PersistentVolumeClaim.ClaimName, p.Name, err)
		}
		if pvc.Spec.VolumeName != "" {
			out = append(out, pvc.Spec.VolumeName)
		}
	}
	return out, nil
}

// VolumeArrays finds the arrays holding a node's protected volumes: a
// volume is on every array listed for the CSI driver that provisioned it
// (with one array per family, exactly that array). It implements the
// detector's ProtectedArrays for storage path loss.
type VolumeArrays struct {
	// Writer reads the node's protected volumes (ProtectedVolumes).
	Writer *Writer
	// Selector marks protected pods besides StatefulSets' (nil: none).
	Selector labels.Selector
	// ByDriver maps a CSI driver name to the arrays of the cluster whose
	// family that driver provisions on.
	ByDriver map[string][]string
}

// ProtectedArrays returns the sorted names of the arrays holding the
// node's protected volumes.
func (p *VolumeArrays) ProtectedArrays(ctx context.Context, node string) ([]string, error) {
	vols, err := p.Writer.ProtectedVolumes(ctx, node, p.Selector)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, v := range vols {
		for _, a := range p.ByDriver[v.Driver] {
			if !slices.Contains(out, a) {
				out = append(out, a)
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// AttachedPVs names, as the API server has them now (a list, not a
// cache), the PersistentVolumes of the VolumeAttachments to the node that
// are not being deleted, attached or still attaching. The pipeline reads
// it just before it taints a fenced node, to catch an attachment its
// informers have not delivered yet.
func (w *Writer) AttachedPVs(ctx context.Context, node string) ([]string, error) {
	vas, err := w.cs.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list volume attachments of %s: %w", node, err)
	}
	var out []string
	for _, va := range vas.Items {
		if va.Spec.NodeName == node && va.DeletionTimestamp == nil && va.Spec.Source.PersistentVolumeName != nil {
			out = append(out, *va.Spec.Source.PersistentVolumeName)
		}
	}
	sort.Strings(out)
	return out, nil
}
