package kube

import (
	"context"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/labels"
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

// Watcher runs shared informers for Nodes, the node Leases in
// kube-node-lease and CSINodes of one cluster. Objects handed out by its
// getters are shared with the cache: never modify them.
type Watcher struct {
	clk      clock.PassiveClock
	handler  Handler
	nodeInf  cache.SharedIndexInformer
	leaseInf cache.SharedIndexInformer
	csiInf   cache.SharedIndexInformer
	nodes    corelisters.NodeLister
	leases   coordlisters.LeaseNamespaceLister
	csi      storagelisters.CSINodeLister
	factory  informers.SharedInformerFactory
	leaseFac informers.SharedInformerFactory

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
	w.leaseFac = informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(LeaseNamespace),
		informers.WithTransform(trimCached))
	w.nodeInf = w.factory.Core().V1().Nodes().Informer()
	w.nodes = w.factory.Core().V1().Nodes().Lister()
	w.csiInf = w.factory.Storage().V1().CSINodes().Informer()
	w.csi = w.factory.Storage().V1().CSINodes().Lister()
	w.leaseInf = w.leaseFac.Coordination().V1().Leases().Informer()
	w.leases = w.leaseFac.Coordination().V1().Leases().Lister().Leases(LeaseNamespace)
	if err := w.leaseInf.SetWatchErrorHandlerWithContext(w.leaseWatchError); err != nil {
		return nil, fmt.Errorf("watcher: lease watch error handler: %w", err)
	}
	for _, reg := range []struct {
		inf  cache.SharedIndexInformer
		kind Kind
	}{{w.nodeInf, KindNode}, {w.leaseInf, KindLease}, {w.csiInf, KindCSINode}} {
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

func (w *Watcher) leaseWatchError(ctx context.Context, r *cache.Reflector, err error) {
	cache.DefaultWatchErrorHandler(ctx, r, err)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.errMsg = err.Error()
	w.errAt = w.clk.Now()
	w.errRV = w.leaseInf.LastSyncResourceVersion()
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
	runInformers(ctx, w.nodeInf, w.csiInf, w.leaseInf)
}

// WaitForSync blocks until every informer has synced or ctx ends, and
// reports whether they synced.
func (w *Watcher) WaitForSync(ctx context.Context) bool {
	return cache.WaitForCacheSync(ctx.Done(), w.nodeInf.HasSynced, w.leaseInf.HasSynced, w.csiInf.HasSynced)
}

// State reports the watches' health. A Lease watch error is cleared by a
// later Lease event or by the informer's resource version moving on (a
// successful relist or bookmark).
func (w *Watcher) State() WatchState {
	w.mu.Lock()
	defer w.mu.Unlock()
	rv := w.leaseInf.LastSyncResourceVersion()
	if w.errMsg != "" && rv != w.errRV {
		w.errMsg = ""
	}
	if rv != w.lastRV {
		w.lastRV = rv
		w.progress = w.clk.Now()
	}
	return WatchState{
		Synced:            w.nodeInf.HasSynced() && w.leaseInf.HasSynced() && w.csiInf.HasSynced(),
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
