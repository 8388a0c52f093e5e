package kube

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/fenced-project/fenced/arrayclients"
)

// nodeIndex indexes VolumeAttachments by spec.nodeName.
const nodeIndex = "node"

// Footprints keeps, from informers, the volumes Kubernetes has attached or
// is attaching to each node: its VolumeAttachments (detaching ones too)
// followed to their PersistentVolumes (PRODUCT.md: the storage footprint).
// It is one cluster's; objects it hands out are copies.
type Footprints struct {
	factory informers.SharedInformerFactory
	vaInf   cache.SharedIndexInformer
	pvInf   cache.SharedIndexInformer
	pvs     corelisters.PersistentVolumeLister

	mu       sync.Mutex
	onChange []func(node string)
	onPV     []func()
	onVolume []func(AttachmentChange)
}

// AttachmentChange is a VolumeAttachment added, changed or deleted: the
// PersistentVolume it attaches and that volume's CSI driver and handle
// (empty when the PersistentVolume is not in the cache, or for an inline
// volume: PV empty, driver and handle from the attachment's inline spec).
// Two PersistentVolumes can name one array volume: the handle says which.
// Node is the node the attachment is for; Detaching says the attachment is
// going away (deleted, or marked for deletion: the attach-detach
// controller's detach, which unpublishes the volume from Node).
type AttachmentChange struct {
	PV        string
	Driver    string
	Handle    string
	Node      string
	Detaching bool
}

// NewFootprints prepares the VolumeAttachment and PersistentVolume
// informers (no resync); Start runs them.
func NewFootprints(cs kubernetes.Interface) (*Footprints, error) {
	if cs == nil {
		return nil, fmt.Errorf("footprints: clientset is nil")
	}
	f := &Footprints{factory: informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTransform(trimCached))}
	f.vaInf = f.factory.Storage().V1().VolumeAttachments().Informer()
	if err := f.vaInf.AddIndexers(cache.Indexers{nodeIndex: func(obj any) ([]string, error) {
		if va, ok := obj.(*storagev1.VolumeAttachment); ok {
			return []string{va.Spec.NodeName}, nil
		}
		return nil, nil
	}}); err != nil {
		return nil, fmt.Errorf("footprints: index volume attachments by node: %w", err)
	}
	f.pvInf = f.factory.Core().V1().PersistentVolumes().Informer()
	f.pvs = f.factory.Core().V1().PersistentVolumes().Lister()
	notify := func(obj any, deleted bool) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if va, ok := obj.(*storagev1.VolumeAttachment); ok {
			f.changed(va.Spec.NodeName)
			if ch, ok := f.attachmentChange(va); ok {
				ch.Node = va.Spec.NodeName
				ch.Detaching = deleted || va.DeletionTimestamp != nil
				f.volumeChanged(ch)
			}
		}
	}
	if _, err := f.vaInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { notify(obj, false) },
		UpdateFunc: func(_, obj any) { notify(obj, false) },
		DeleteFunc: func(obj any) { notify(obj, true) },
	}); err != nil {
		return nil, fmt.Errorf("footprints: volume attachment handler: %w", err)
	}
	pvChanged := func(any) { f.pvChanged() }
	if _, err := f.pvInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    pvChanged,
		UpdateFunc: func(_, obj any) { pvChanged(obj) },
		DeleteFunc: pvChanged,
	}); err != nil {
		return nil, fmt.Errorf("footprints: persistent volume handler: %w", err)
	}
	return f, nil
}

// OnChange registers fn, called with a node's name whenever one of its
// VolumeAttachments is added, changed or deleted. fn must only enqueue.
func (f *Footprints) OnChange(fn func(node string)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.onChange = append(f.onChange, fn)
}

func (f *Footprints) changed(node string) {
	f.mu.Lock()
	fns := slices.Clone(f.onChange)
	f.mu.Unlock()
	for _, fn := range fns {
		fn(node)
	}
}

// OnAttachmentChange registers fn, called whenever a VolumeAttachment is
// added, changed or deleted, on any node, with the volume it attaches: a
// publish of a volume to one node can give another node access to it
// (fenced's held fences re-read the arrays then). fn must only enqueue.
func (f *Footprints) OnAttachmentChange(fn func(AttachmentChange)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.onVolume = append(f.onVolume, fn)
}

func (f *Footprints) volumeChanged(ch AttachmentChange) {
	f.mu.Lock()
	fns := slices.Clone(f.onVolume)
	f.mu.Unlock()
	for _, fn := range fns {
		fn(ch)
	}
}

// attachmentChange is the volume a VolumeAttachment attaches, with its CSI
// driver and handle from the PersistentVolume cache or the inline spec.
func (f *Footprints) attachmentChange(va *storagev1.VolumeAttachment) (AttachmentChange, bool) {
	src := va.Spec.Source
	if src.PersistentVolumeName != nil && *src.PersistentVolumeName != "" {
		ch := AttachmentChange{PV: *src.PersistentVolumeName}
		if pv, err := f.pvs.Get(ch.PV); err == nil && pv.Spec.CSI != nil {
			ch.Driver, ch.Handle = pv.Spec.CSI.Driver, pv.Spec.CSI.VolumeHandle
		}
		return ch, true
	}
	if in := src.InlineVolumeSpec; in != nil && in.CSI != nil && in.CSI.VolumeHandle != "" {
		return AttachmentChange{Driver: in.CSI.Driver, Handle: in.CSI.VolumeHandle}, true
	}
	return AttachmentChange{}, false
}

// OnPVChange registers fn, called whenever a PersistentVolume is added,
// changed or deleted. fn must only enqueue.
func (f *Footprints) OnPVChange(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.onPV = append(f.onPV, fn)
}

func (f *Footprints) pvChanged() {
	f.mu.Lock()
	fns := slices.Clone(f.onPV)
	f.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
}

// PersistentVolumes returns every CSI PersistentVolume, attached or not,
// sorted by name, with its driver, handle, file-system type and access
// modes (Attachment empty, Attached false). It fails until the informers
// have synced.
func (f *Footprints) PersistentVolumes() ([]arrayclients.KubeVolume, error) {
	if !f.Synced() {
		return nil, fmt.Errorf("persistent volumes: %w", ErrNotSynced)
	}
	pvs, err := f.pvs.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("persistent volumes: %w", err)
	}
	out := make([]arrayclients.KubeVolume, 0, len(pvs))
	for _, pv := range pvs {
		if pv.Spec.CSI == nil {
			continue
		}
		kv := arrayclients.KubeVolume{PV: pv.Name}
		fillFromSpec(&kv, &pv.Spec)
		out = append(out, kv)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PV < out[j].PV })
	return out, nil
}

// Start runs the informers until ctx ends; client-go logs through the
// logger of ctx (ContextWithLogger).
func (f *Footprints) Start(ctx context.Context) { runInformers(ctx, f.vaInf, f.pvInf) }

// WaitForSync blocks until both informers have synced or ctx ends.
func (f *Footprints) WaitForSync(ctx context.Context) bool {
	return cache.WaitForCacheSync(ctx.Done(), f.vaInf.HasSynced, f.pvInf.HasSynced)
}

// Synced reports whether both informers have completed their first list.
func (f *Footprints) Synced() bool { return f.vaInf.HasSynced() && f.pvInf.HasSynced() }

// Volumes returns the node's footprint as Kubernetes shows it, sorted by
// PersistentVolume name: every VolumeAttachment to the node (attached,
// attaching or detaching) with its PersistentVolume's CSI driver, handle,
// file-system type and access modes. An attachment whose PersistentVolume
// is not in the cache (deleted, or not seen yet) keeps the attacher as
// driver and an empty handle, so placing it reports a gap rather than
// dropping it. It fails until the informers have synced.
func (f *Footprints) Volumes(node string) ([]arrayclients.KubeVolume, error) {
	if !f.Synced() {
		return nil, fmt.Errorf("footprint of %s: %w", node, ErrNotSynced)
	}
	objs, err := f.vaInf.GetIndexer().ByIndex(nodeIndex, node)
	if err != nil {
		return nil, fmt.Errorf("footprint of %s: %w", node, err)
	}
	byPV := map[string]arrayclients.KubeVolume{}
	for _, o := range objs {
		va, ok := o.(*storagev1.VolumeAttachment)
		if !ok {
			continue
		}
		kv := f.fromAttachment(va)
		// Two attachments of one volume (an old one still detaching):
		// keep it attached if either is.
		if prev, dup := byPV[kv.PV]; dup {
			kv.Attached = kv.Attached || prev.Attached
		}
		byPV[kv.PV] = kv
	}
	out := make([]arrayclients.KubeVolume, 0, len(byPV))
	for _, kv := range byPV {
		out = append(out, kv)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PV < out[j].PV })
	return out, nil
}

// Wanted names the PersistentVolumes Kubernetes still wants on the node:
// those of its VolumeAttachments that are not being deleted.
func (f *Footprints) Wanted(node string) ([]string, error) {
	if !f.Synced() {
		return nil, fmt.Errorf("volumes wanted on %s: %w", node, ErrNotSynced)
	}
	objs, err := f.vaInf.GetIndexer().ByIndex(nodeIndex, node)
	if err != nil {
		return nil, fmt.Errorf("volumes wanted on %s: %w", node, err)
	}
	var out []string
	for _, o := range objs {
		if va, ok := o.(*storagev1.VolumeAttachment); ok && va.DeletionTimestamp == nil {
			out = append(out, f.fromAttachment(va).PV)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// Nodes names every node with at least one VolumeAttachment.
func (f *Footprints) Nodes() []string {
	return slices.Sorted(slices.Values(f.vaInf.GetIndexer().ListIndexFuncValues(nodeIndex)))
}

// fromAttachment builds the KubeVolume of one attachment.
func (f *Footprints) fromAttachment(va *storagev1.VolumeAttachment) arrayclients.KubeVolume {
	kv := arrayclients.KubeVolume{Attachment: va.Name, Driver: va.Spec.Attacher, Attached: va.Status.Attached}
	src := va.Spec.Source
	var spec *corev1.PersistentVolumeSpec
	switch {
	case src.PersistentVolumeName != nil:
		kv.PV = *src.PersistentVolumeName
		if pv, err := f.pvs.Get(kv.PV); err == nil {
			spec = &pv.Spec
		}
	case src.InlineVolumeSpec != nil:
		kv.PV = "inline:" + va.Name
		spec = src.InlineVolumeSpec
	default:
		kv.PV = "attachment:" + va.Name
	}
	if spec != nil {
		fillFromSpec(&kv, spec)
	}
	kv.Driver = strings.TrimSpace(kv.Driver)
	return kv
}

// fillFromSpec sets a KubeVolume's CSI driver, handle, file-system type
// and multi-node flag from a PersistentVolume spec.
func fillFromSpec(kv *arrayclients.KubeVolume, spec *corev1.PersistentVolumeSpec) {
	if spec.CSI != nil {
		kv.Driver, kv.Handle, kv.FSType = strings.TrimSpace(spec.CSI.Driver), spec.CSI.VolumeHandle, spec.CSI.FSType
	}
	kv.MultiNode = slices.ContainsFunc(spec.AccessModes, func(m corev1.PersistentVolumeAccessMode) bool {
		return m == corev1.ReadWriteMany || m == corev1.ReadOnlyMany
	})
}
