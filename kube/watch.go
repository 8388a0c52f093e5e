package kube

import (
	"context"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	coordlisters "k8s.io/client-go/listers/coordination/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

// Kind names the kind of object an Event is about.
type Kind string

// Event kinds.
const (
	KindNode    Kind = "Node"
	KindLease   Kind = "Lease"
	KindCSINode Kind = "CSINode"
)

// Event is one informer notification, stamped with this process's clock at
// the moment the informer delivered it. Exactly one of Node, Lease, CSINode
// is set unless Deleted, when only Name is reliable.
type Event struct {
	Kind    Kind
	Name    string
	Deleted bool
	At      time.Time
	Node    *corev1.Node
	Lease   *coordinationv1.Lease
	CSINode *storagev1.CSINode
}

// Handler receives events. It runs on an informer's delivery goroutine and
// must only record or enqueue.
type Handler func(Event)

// WatchState is the health of the watches.
type WatchState struct {
	// Synced is set once every informer has completed its initial list.
	Synced bool
	// Error is the last watch error of the Lease informer that no later
	// Lease event or list has cleared; ErrorAt is when it happened.
	Error   string
	ErrorAt time.Time
	// LastLeaseEvent is when the Lease informer last delivered an event.
	LastLeaseEvent time.Time
	// LastLeaseProgress is the last time the Lease watch showed progress:
	// an event, or (noticed when State is called) a new resource version
	// from a relist or a bookmark.
	LastLeaseProgress time.Time
}

// Watcher runs shared informers for Nodes and CSINodes of one cluster, and
// a plain informer for the node Leases in kube-node-lease. Objects handed
// out by its getters are shared with the cache: never modify them.
//
// The Lease informer is not a shared one: every kubelet renews its Lease
// every 10 s, so at 2,000 nodes 200 events a second arrive, and a shared
// informer hands each one through two more goroutines (its listener's
// buffer and its delivery) than a plain controller, whose processing
// goroutine calls the handler itself. On an idle leader those hand-offs,
// each waking a thread, were a measurable part of its CPU.
type Watcher struct {
	clk      clock.PassiveClock
	handler  Handler
	nodeInf  cache.SharedIndexInformer
	csiInf   cache.SharedIndexInformer
	leaseCtl cache.Controller
	nodes    corelisters.NodeLister
	leases   coordlisters.LeaseNamespaceLister
	csi      storagelisters.CSINodeLister
	factory  informers.SharedInformerFactory

	mu        sync.Mutex
	errMsg    string
	errAt     time.Time
	errRV     string
	lastLease time.Time
	progress  time.Time
	lastRV    string
}

// NewWatcher prepares the informers (resync disabled: a resync is not an
// observation). h may be nil. Start runs them.
func NewWatcher(cs kubernetes.Interface, clk clock.PassiveClock, h Handler) (*Watcher, error) {
	if cs == nil {
		return nil, fmt.Errorf("watcher: clientset is nil")
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	if h == nil {
		h = func(Event) {}
	}
	w := &Watcher{clk: clk, handler: h}
	w.factory = informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTransform(trimCached))
	w.nodeInf = w.factory.Core().V1().Nodes().Informer()
	w.nodes = w.factory.Core().V1().Nodes().Lister()
	w.csiInf = w.factory.Storage().V1().CSINodes().Informer()
	w.csi = w.factory.Storage().V1().CSINodes().Lister()
	w.leaseCtl, w.leases = w.leaseController(cs)
	for _, reg := range []struct {
		inf  cache.SharedIndexInformer
		kind Kind
	}{{w.nodeInf, KindNode}, {w.csiInf, KindCSINode}} {
		kind := reg.kind
		_, err := reg.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { w.deliver(kind, obj, false) },
			UpdateFunc: func(_, obj any) { w.deliver(kind, obj, false) },
			DeleteFunc: func(obj any) { w.deliver(kind, obj, true) },
		})
		if err != nil {
			return nil, fmt.Errorf("watcher: %s handler: %w", kind, err)
		}
	}
	return w, nil
}

// leaseController is the Lease informer: client-go's controller (its
// reflector lists and watches, relists after an error and keeps the
// resource version; its in-order queue carries the changes) whose
// processing goroutine updates the cache and calls the handler, as a
// shared informer's delivery would, with the same events: an object listed
// or changed is an update when it was cached (a relist delivers every Lease
// again), else an add; one gone, or missing from a relist, a delete.
func (w *Watcher) leaseController(cs kubernetes.Interface) (cache.Controller, coordlisters.LeaseNamespaceLister) {
	leases := cs.CoordinationV1().Leases(LeaseNamespace)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return leases.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return leases.Watch(ctx, o)
		},
	}
	store := cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc, cache.Indexers{})
	ctl := cache.New(&cache.Config{
		Queue:                        cache.NewRealFIFO(cache.MetaNamespaceKeyFunc, store, trimCached),
		ListerWatcher:                lw,
		ObjectType:                   &coordinationv1.Lease{},
		ObjectDescription:            "leases in " + LeaseNamespace,
		WatchErrorHandlerWithContext: w.leaseWatchError,
		Process: func(obj any, _ bool) error {
			deltas, ok := obj.(cache.Deltas)
			if !ok {
				return fmt.Errorf("lease watch: got %T to process, not deltas", obj)
			}
			return w.processLeases(store, deltas)
		},
	})
	return ctl, coordlisters.NewLeaseLister(store).Leases(LeaseNamespace)
}

// processLeases applies one Lease's changes, oldest first, to the cache
// and delivers each.
func (w *Watcher) processLeases(store cache.Store, deltas cache.Deltas) error {
	for _, d := range deltas {
		switch d.Type {
		case cache.Sync, cache.Replaced, cache.Added, cache.Updated:
			_, exists, err := store.Get(d.Object)
			if err == nil && exists {
				err = store.Update(d.Object)
			} else {
				err = store.Add(d.Object)
			}
			if err != nil {
				return fmt.Errorf("lease watch: cache: %w", err)
			}
			w.deliver(KindLease, d.Object, false)
		case cache.Deleted:
			if err := store.Delete(d.Object); err != nil {
				return fmt.Errorf("lease watch: cache: %w", err)
			}
			w.deliver(KindLease, d.Object, true)
		}
	}
	return nil
}

func (w *Watcher) leaseWatchError(ctx context.Context, r *cache.Reflector, err error) {
	cache.DefaultWatchErrorHandler(ctx, r, err)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.errMsg = err.Error()
	w.errAt = w.clk.Now()
	w.errRV = r.LastSyncResourceVersion()
}

func (w *Watcher) deliver(kind Kind, obj any, deleted bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	ev := Event{Kind: kind, Deleted: deleted, At: w.clk.Now()}
	switch o := obj.(type) {
	case *corev1.Node:
		ev.Name, ev.Node = o.Name, o
	case *coordinationv1.Lease:
		ev.Name, ev.Lease = o.Name, o
		w.mu.Lock()
		w.lastLease = ev.At
		w.progress = ev.At
		w.errMsg = ""
		w.mu.Unlock()
	case *storagev1.CSINode:
		ev.Name, ev.CSINode = o.Name, o
	default:
		return
	}
	w.handler(ev)
}

// Start runs the informers until ctx ends. It does not wait for them to
// sync. client-go logs what its watches meet through the logger of ctx
// (ContextWithLogger).
func (w *Watcher) Start(ctx context.Context) {
	runInformers(ctx, w.nodeInf, w.csiInf)
	go w.leaseCtl.RunWithContext(ctx)
}

// WaitForSync blocks until every informer has synced or ctx ends, and
// reports whether they synced.
func (w *Watcher) WaitForSync(ctx context.Context) bool {
	return cache.WaitForCacheSync(ctx.Done(), w.nodeInf.HasSynced, w.leaseCtl.HasSynced, w.csiInf.HasSynced)
}

// State reports the watches' health. A Lease watch error is cleared by a
// later Lease event or by the informer's resource version moving on (a
// successful relist or bookmark).
func (w *Watcher) State() WatchState {
	w.mu.Lock()
	defer w.mu.Unlock()
	rv := w.leaseCtl.LastSyncResourceVersion()
	if w.errMsg != "" && rv != w.errRV {
		w.errMsg = ""
	}
	if rv != w.lastRV {
		w.lastRV = rv
		w.progress = w.clk.Now()
	}
	return WatchState{
		Synced:            w.nodeInf.HasSynced() && w.leaseCtl.HasSynced() && w.csiInf.HasSynced(),
		Error:             w.errMsg,
		ErrorAt:           w.errAt,
		LastLeaseEvent:    w.lastLease,
		LastLeaseProgress: w.progress,
	}
}

// Node returns the cached Node, or false.
func (w *Watcher) Node(name string) (*corev1.Node, bool) {
	n, err := w.nodes.Get(name)
	return n, err == nil
}

// Nodes returns every cached Node.
func (w *Watcher) Nodes() []*corev1.Node {
	ns, err := w.nodes.List(labels.Everything())
	if err != nil {
		return nil
	}
	return ns
}

// Lease returns the node's cached Lease, or false.
func (w *Watcher) Lease(node string) (*coordinationv1.Lease, bool) {
	l, err := w.leases.Get(node)
	return l, err == nil
}

// CSINode returns the cached CSINode, or false.
func (w *Watcher) CSINode(name string) (*storagev1.CSINode, bool) {
	c, err := w.csi.Get(name)
	return c, err == nil
}
