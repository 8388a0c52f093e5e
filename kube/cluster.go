package kube

import (
	"context"
	"errors"
	"fmt"
	"sync"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
)

// ErrNotStarted means the cluster's watches have not been started.
var ErrNotStarted = errors.New("watches not started")

// ErrNotSynced means the volume attachment and persistent volume caches
// have not synced with the API server yet (or not since it came back):
// what they would show is not known.
var ErrNotSynced = errors.New("the volume attachment and persistent volume caches have not synced with the API server (is it reachable?)")

// Cluster is one cluster's API access for the detector: clients, watches,
// read-backs, the API server check and the kubelet probe.
type Cluster struct {
	name    string
	clients *Clients
	clk     clock.PassiveClock

	mu      sync.Mutex
	watcher *Watcher
}

// NewCluster builds the clients of the named cluster from cfg.
func NewCluster(name string, cfg Config, clk clock.PassiveClock) (*Cluster, error) {
	cs, err := NewClients(cfg)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", name, err)
	}
	return NewClusterFromClients(name, cs, clk), nil
}

// NewClusterFromClients wraps existing clients.
func NewClusterFromClients(name string, cs *Clients, clk clock.PassiveClock) *Cluster {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Cluster{name: name, clients: cs, clk: clk}
}

// Name is the cluster's configured name.
func (c *Cluster) Name() string { return c.name }

// Clients returns the cluster's clientsets.
func (c *Cluster) Clients() *Clients { return c.clients }

// StartWatches starts the informers, delivering their events to h, and
// returns at once. It may be called once.
func (c *Cluster) StartWatches(ctx context.Context, h Handler) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.watcher != nil {
		return fmt.Errorf("cluster %s: watches already started", c.name)
	}
	w, err := NewWatcher(c.clients.Watch, c.clk, h)
	if err != nil {
		return fmt.Errorf("cluster %s: %w", c.name, err)
	}
	c.watcher = w
	w.Start(ctx)
	return nil
}

func (c *Cluster) w() *Watcher {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.watcher
}

// WatchState reports the watches' health (not synced before StartWatches).
func (c *Cluster) WatchState() WatchState {
	w := c.w()
	if w == nil {
		return WatchState{Error: ErrNotStarted.Error()}
	}
	return w.State()
}

// Node returns the cached Node.
func (c *Cluster) Node(name string) (*corev1.Node, bool) {
	if w := c.w(); w != nil {
		return w.Node(name)
	}
	return nil, false
}

// NodeNames names the cached Nodes (none before StartWatches).
func (c *Cluster) NodeNames() []string {
	w := c.w()
	if w == nil {
		return nil
	}
	nodes := w.Nodes()
	out := make([]string, 0, len(nodes))
	for _, n := range nodes {
		out = append(out, n.Name)
	}
	return out
}

// CSINode returns the cached CSINode.
func (c *Cluster) CSINode(name string) (*storagev1.CSINode, bool) {
	if w := c.w(); w != nil {
		return w.CSINode(name)
	}
	return nil, false
}

// ReadLease reads the node's Lease directly from the API server (not the
// cache). A missing Lease returns an error for which
// apierrors.IsNotFound is true.
func (c *Cluster) ReadLease(ctx context.Context, node string) (*coordinationv1.Lease, error) {
	l, err := c.clients.Requests.CoordinationV1().Leases(LeaseNamespace).Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("read lease %s/%s on %s: %w", LeaseNamespace, node, c.name, err)
	}
	return l, nil
}

// CheckAPIServer checks the API server's /readyz.
func (c *Cluster) CheckAPIServer(ctx context.Context) error {
	if err := CheckReadyz(ctx, c.clients.Requests); err != nil {
		return fmt.Errorf("cluster %s: %w", c.name, err)
	}
	return nil
}

// ProbeKubelet dials the node's kubelet port and returns the address dialed.
func (c *Cluster) ProbeKubelet(ctx context.Context, node *corev1.Node) (string, error) {
	addr, err := KubeletAddress(node)
	if err != nil {
		return "", err
	}
	return addr, ProbeTCP(ctx, addr)
}
