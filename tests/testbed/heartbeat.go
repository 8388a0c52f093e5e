package testbed

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/component-helpers/apimachinery/lease"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// The nodes' Leases in kube-node-lease are renewed here, by the kubelet's
// own lease controller (k8s.io/component-helpers/apimachinery/lease, which
// pkg/kubelet runs as nodeLeaseController): holder identity the node name,
// renewed every quarter of the lease duration with 4% jitter, owned by the
// Node. kwok runs with its leases off (--node-lease-duration-seconds=0) and
// keeps the Node's status and its pods.
//
// Why not kwok's leases: kwok v0.7.0 (and v0.8.0) loses a node's renewals
// once the node is unmanaged and managed again while one of its renewals
// is in flight, which is what a kill and return of the node do (they
// switch the type=kwok label). Its lease controller then queues the node
// twice in a delaying heap that indexes one entry per item; the entry left
// over blocks that heap, and from then on kwok renews only now and then,
// for every node behind it (seen in a chaos run: one node renewed in a
// tight loop, the others every few minutes). A real kubelet keeps renewing
// through any number of restarts, and so must the test bed's.

// heartbeat is one running lease controller of a node.
type heartbeat struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// leaseRenewer holds what the nodes' lease controllers share.
type leaseRenewer struct {
	client   kubernetes.Interface
	duration int32
	log      logr.Logger
	file     *os.File
}

// newLeaseRenewer builds the client the lease controllers renew with (as
// the user kwok, whose renewals the audit policy leaves out) and their log,
// kubelet-leases.log in the control plane's directory.
func (cp *ControlPlane) newLeaseRenewer(token string) (*leaseRenewer, error) {
	client, err := kubernetes.NewForConfig(cp.RESTConfigFor(token))
	if err != nil {
		return nil, fmt.Errorf("create the kubelets' lease client: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(cp.Dir, "kubelet-leases.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open the kubelets' lease log: %w", err)
	}
	return &leaseRenewer{
		client:   client,
		duration: int32(cp.opts.NodeLeaseDurationSeconds),
		log:      logr.FromSlogHandler(slog.NewTextHandler(f, nil)),
		file:     f,
	}, nil
}

// close closes the lease log; every heartbeat must have stopped.
func (r *leaseRenewer) close() {
	if r != nil {
		_ = r.file.Close()
	}
}

// renewInterval is the kubelet's: a quarter of the lease duration.
func (r *leaseRenewer) renewInterval() time.Duration {
	return time.Duration(r.duration) * time.Second / 4
}

// startHeartbeat starts renewing the node's Lease, if it is not renewed
// already. The first renewal is at once.
func (n *Node) startHeartbeat() {
	r := n.cp.leases
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.heartbeat != nil || r == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	ctx = klog.NewContext(ctx, r.log.WithValues("node", n.Spec.Name))
	uid := n.uid
	owned := func(l *coordinationv1.Lease) error {
		if len(l.OwnerReferences) == 0 && uid != "" {
			l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: n.Spec.Name, UID: uid}}
		}
		return nil
	}
	c := lease.NewController(clock.RealClock{}, r.client, n.Spec.Name, r.duration, nil, r.renewInterval(),
		n.Spec.Name, corev1.NamespaceNodeLease, owned)
	hb := &heartbeat{cancel: cancel, done: make(chan struct{})}
	n.heartbeat = hb
	go func() {
		defer close(hb.done)
		c.Run(ctx)
	}()
}

// stopHeartbeat stops renewing the node's Lease and returns once no
// renewal of it is under way (a request in flight is cancelled).
func (n *Node) stopHeartbeat() {
	n.mu.Lock()
	hb := n.heartbeat
	n.heartbeat = nil
	n.mu.Unlock()
	if hb != nil {
		hb.cancel()
		<-hb.done
	}
}

// setUID records the Node object's UID, which owns its Lease.
func (n *Node) setUID(uid types.UID) {
	n.mu.Lock()
	n.uid = uid
	n.mu.Unlock()
}
