package testbed

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// Light nodes stand in for kwok where only nodes at rest are needed, in
// the thousands: on a small machine kwok (a controller per node, a status
// write per node every few seconds) and a lease controller goroutine and
// timer per node cost more than the control plane and fenced together.
//
// A light node is registered like a kwok node (the Node with the same
// labels and node-ID annotation, its status with addresses, boot ID and
// capacity, its CSINode, its kubelet listener and its hosts on the array
// simulators), then the light writer, not kwok, writes its conditions
// (Ready True, the pressure conditions False) and creates its Lease in
// kube-node-lease. Every Lease is renewed every renewal interval (a quarter
// of the lease duration, the kubelet's 10 s by default), the renewals
// spread evenly over the interval, by lightWorkers workers over one
// client, each renewal one update of the Lease as the kubelet's lease
// controller makes it. Like the kubelet (nodeStatusReportFrequency, 5 min)
// the writer refreshes each node's condition heartbeats every
// lightStatusRounds intervals, spread the same way. No pods run on a light
// node, and the node fault methods (Kill, Hang, Return, ...) do not apply:
// a light node that is not up is skipped, nothing else.

// lightWorkers is how many renewals of light nodes' Leases are in flight
// at most.
const lightWorkers = 8

// lightStatusRounds is every how many renewal intervals a light node's
// conditions are written again (30 × 10 s: the kubelet's 5 min).
const lightStatusRounds = 30

// lightWriter renews the Leases of a control plane's light nodes.
type lightWriter struct {
	client   kubernetes.Interface
	duration int32
	interval time.Duration

	mu     sync.Mutex
	nodes  []*lightNode
	cancel context.CancelFunc
	done   chan struct{}

	renewals, failures atomic.Int64
}

// lightNode is one light node and the last Lease the API server returned
// for it (the next renewal updates it).
type lightNode struct {
	node *Node
	// mu is held by the renewal under way; a renewal that finds it held
	// (the last one still in flight) is skipped.
	mu    sync.Mutex
	lease *coordinationv1.Lease
}

// newLightWriter returns a stopped writer renewing through r's client.
func newLightWriter(r *leaseRenewer) *lightWriter {
	return &lightWriter{client: r.client, duration: r.duration, interval: r.renewInterval()}
}

// AddLightNodes adds nodes like AddNodes, but written by the light writer
// instead of kwok: see the comment at the top of lightnodes.go. It returns
// once every node is Ready and its Lease created; WaitNodesReady then
// waits for a renewal.
func (cp *ControlPlane) AddLightNodes(ctx context.Context, specs ...NodeSpec) ([]*Node, error) {
	return cp.addNodes(ctx, true, specs)
}

// LightRenewals returns how many renewals of light nodes' Leases the
// writer made and how many of them failed.
func (cp *ControlPlane) LightRenewals() (renewals, failures int64) {
	return cp.light.renewals.Load(), cp.light.failures.Load()
}

// add writes n's conditions, creates its Lease and schedules its renewals.
func (w *lightWriter) add(ctx context.Context, n *Node) error {
	if err := w.writeConditions(ctx, n, true); err != nil {
		return err
	}
	now := metav1.NewMicroTime(time.Now())
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Name:      n.Spec.Name,
			Namespace: corev1.NamespaceNodeLease,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Node", Name: n.Spec.Name, UID: n.uidOf(),
			}},
		},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       &n.Spec.Name,
			LeaseDurationSeconds: &w.duration,
			RenewTime:            &now,
		},
	}
	created, err := w.client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Create(ctx, l, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create the lease of light node %s: %w", n.Spec.Name, err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.nodes = append(w.nodes, &lightNode{node: n, lease: created})
	if w.done == nil {
		run, cancel := context.WithCancel(context.Background())
		w.cancel, w.done = cancel, make(chan struct{})
		go w.run(run)
	}
	return nil
}

// writeConditions sets n's conditions as a healthy kubelet reports them;
// with first, their transition times too (later reports keep them).
func (w *lightWriter) writeConditions(ctx context.Context, n *Node, first bool) error {
	now := metav1.Now()
	cond := func(t corev1.NodeConditionType, st corev1.ConditionStatus, reason, msg string) map[string]any {
		c := map[string]any{"type": t, "status": st, "lastHeartbeatTime": now, "reason": reason, "message": msg}
		if first {
			c["lastTransitionTime"] = now
		}
		return c
	}
	conds := []map[string]any{
		cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
		cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
		cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
		cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"),
	}
	// A strategic merge patch keyed by type, as the kubelet sends it.
	data, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": conds}})
	if err != nil {
		return fmt.Errorf("encode the conditions of light node %s: %w", n.Spec.Name, err)
	}
	if _, err := w.client.CoreV1().Nodes().Patch(ctx, n.Spec.Name, types.StrategicMergePatchType, data, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("write the conditions of light node %s: %w", n.Spec.Name, err)
	}
	return nil
}

// run renews every light node's Lease once per interval until ctx ends:
// in each round, node i of n is due at i/n of the interval, and handed to
// the first free worker.
func (w *lightWriter) run(ctx context.Context) {
	defer close(w.done)
	work := make(chan func(), lightWorkers)
	var wg sync.WaitGroup
	for range lightWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for f := range work {
				f()
			}
		}()
	}
	defer wg.Wait()
	defer close(work)
	for round := 0; ; round++ {
		start := time.Now()
		w.mu.Lock()
		nodes := append([]*lightNode(nil), w.nodes...)
		w.mu.Unlock()
		for i, ln := range nodes {
			due := start.Add(w.interval * time.Duration(i) / time.Duration(len(nodes)))
			if !sleepUntil(ctx, due) {
				return
			}
			status := (round+i)%lightStatusRounds == 0
			select {
			case work <- func() { w.renew(ctx, ln, status) }:
			case <-ctx.Done():
				return
			}
		}
		if !sleepUntil(ctx, start.Add(w.interval)) {
			return
		}
	}
}

// sleepUntil waits until t; false when ctx ended first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// renew updates ln's Lease with the time now (and, with status, its node's
// condition heartbeats), as the kubelet does; after a failure the Lease is
// read again for the next renewal. A node that is not up is left alone.
func (w *lightWriter) renew(ctx context.Context, ln *lightNode, status bool) {
	if ln.node.State() != NodeUp || !ln.mu.TryLock() {
		return
	}
	defer ln.mu.Unlock()
	leases := w.client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	l := ln.lease.DeepCopy()
	now := metav1.NewMicroTime(time.Now())
	l.Spec.RenewTime = &now
	w.renewals.Add(1)
	updated, err := leases.Update(ctx, l, metav1.UpdateOptions{})
	if err != nil {
		w.failures.Add(1)
		if fresh, gerr := leases.Get(ctx, l.Name, metav1.GetOptions{}); gerr == nil {
			ln.lease = fresh
		}
	} else {
		ln.lease = updated
	}
	if status {
		_ = w.writeConditions(ctx, ln.node, false) // a failure is retried at the next report
	}
}

// stop ends the renewals and returns once none is under way.
func (w *lightWriter) stop() {
	if w == nil {
		return
	}
	w.mu.Lock()
	cancel, done := w.cancel, w.done
	w.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// uidOf returns the Node object's UID.
func (n *Node) uidOf() types.UID {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.uid
}
