package e2e

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/fenced-project/fenced/tests/invariants"
)

// Timeline records the faults the harness injects, for the invariant
// checker and for reports.
type Timeline struct {
	mu     sync.Mutex
	events []invariants.Event
}

// Record appends an event at the current time.
func (tl *Timeline) Record(kind, detail string) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.events = append(tl.events, invariants.Event{Time: time.Now().UTC(), Kind: kind, Detail: detail})
}

// Events returns a copy of the timeline.
func (tl *Timeline) Events() []invariants.Event {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return append([]invariants.Event(nil), tl.events...)
}

// placementRecorder watches pods and VolumeAttachments and records on
// which node each one is, every time that changes.
type placementRecorder struct {
	mu   sync.Mutex
	list []invariants.Placement
	last map[string]string // resource/namespace/name -> node
}

func (p *placementRecorder) observe(resource, namespace, name, node string) {
	if node == "" {
		return
	}
	key := resource + "/" + namespace + "/" + name
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.last[key] == node {
		return
	}
	p.last[key] = node
	p.list = append(p.list, invariants.Placement{Time: time.Now().UTC(), Resource: resource, Namespace: namespace, Name: name, Node: node})
}

// gone records that an object was deleted (so one recreated under the same
// name is recorded again).
func (p *placementRecorder) gone(resource, namespace, name, node string) {
	key := resource + "/" + namespace + "/" + name
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.last[key]; !ok {
		return
	}
	delete(p.last, key)
	p.list = append(p.list, invariants.Placement{Time: time.Now().UTC(), Resource: resource, Namespace: namespace, Name: name,
		Node: node, Deleted: true})
}

// Placements returns a copy of what was recorded.
func (p *placementRecorder) Placements() []invariants.Placement {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]invariants.Placement(nil), p.list...)
}

// watchPlacements runs informers until ctx ends and returns once their
// caches have synced.
func watchPlacements(ctx context.Context, cs kubernetes.Interface) *placementRecorder {
	p := &placementRecorder{last: map[string]string{}}
	f := informers.NewSharedInformerFactory(cs, 0)
	pod := func(obj any) {
		if o, ok := obj.(*corev1.Pod); ok {
			p.observe("pods", o.Namespace, o.Name, o.Spec.NodeName)
		}
	}
	va := func(obj any) {
		if o, ok := obj.(*storagev1.VolumeAttachment); ok {
			p.observe("volumeattachments", "", o.Name, o.Spec.NodeName)
		}
	}
	_, _ = f.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: pod, UpdateFunc: func(_, n any) { pod(n) }})
	_, _ = f.Storage().V1().VolumeAttachments().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: va, UpdateFunc: func(_, n any) { va(n) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if o, ok := obj.(*storagev1.VolumeAttachment); ok {
				p.gone("volumeattachments", "", o.Name, o.Spec.NodeName)
			}
		}})
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	return p
}
