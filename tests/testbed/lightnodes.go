package testbed

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
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
// spread evenly over the interval, each renewal one update of the Lease as
// the kubelet's lease controller makes it. Each renewal runs in its own
// goroutine from its due time, over one client without a rate limit, so
// the number of renewals in flight follows the node count and the API
// server's pace, never a fixed pool: a renewal is late only by the time
// the API server takes. The writer records each renewal's lateness (from
// its due time to the API server's answer) and every renewal skipped
// because the node's last one was still in flight (LightStats). Like the kubelet (nodeStatusReportFrequency, 5 min)
// the writer refreshes each node's condition heartbeats every
// lightStatusRounds intervals, spread the same way. No pods run on a light
// node, and the node fault methods (Kill, Hang, Return, ...) do not apply:
// a light node that is not up is skipped, nothing else.

// lightLateBuckets is how many 1 ms buckets the lateness histogram has;
// a later renewal counts in the last one.
const lightLateBuckets = 10_000

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

	statsMu sync.Mutex
	stats   LightStats
}

// LightStats is the light writer's work since it started: renewals made,
// failed and skipped, and how late they were.
type LightStats struct {
	// Renewals is the Lease updates made; Failures those that failed.
	Renewals, Failures int64
	// Skipped is the renewals not made because the node's last renewal
	// was still in flight when the next one was due.
	Skipped int64
	// late[i] counts the renewals answered i ms after their due time (the
	// last bucket: that late or later).
	late []int64
	// max is the latest renewal's lateness.
	max time.Duration
}

// Since returns the work done between before and s (a later reading).
// Its MaxLateness is to the millisecond, from the histogram.
func (s LightStats) Since(before LightStats) LightStats {
	d := LightStats{Renewals: s.Renewals - before.Renewals, Failures: s.Failures - before.Failures, Skipped: s.Skipped - before.Skipped}
	d.late = make([]int64, len(s.late))
	for i := range s.late {
		d.late[i] = s.late[i]
		if i < len(before.late) {
			d.late[i] -= before.late[i]
		}
		if d.late[i] > 0 {
			d.max = time.Duration(i) * time.Millisecond
		}
	}
	if n := len(d.late); n > 0 && d.late[n-1] > 0 {
		d.max = s.max // beyond the histogram: the latest ever
	}
	return d
}

// Lateness returns the q quantile (0 < q ≤ 1) of the renewals' lateness,
// to the millisecond; 0 without renewals.
func (s LightStats) Lateness(q float64) time.Duration {
	var total int64
	for _, c := range s.late {
		total += c
	}
	if total == 0 {
		return 0
	}
	rank := int64(q*float64(total) + 0.999999)
	var seen int64
	for i, c := range s.late {
		seen += c
		if seen >= rank {
			if i == len(s.late)-1 {
				return s.max
			}
			return time.Duration(i) * time.Millisecond
		}
	}
	return s.max
}

// MaxLateness returns the latest renewal's lateness.
func (s LightStats) MaxLateness() time.Duration { return s.max }

// record counts one renewal answered late after its due time.
func (w *lightWriter) record(late time.Duration, failed bool) {
	w.statsMu.Lock()
	defer w.statsMu.Unlock()
	if w.stats.late == nil {
		w.stats.late = make([]int64, lightLateBuckets)
	}
	w.stats.Renewals++
	if failed {
		w.stats.Failures++
	}
	late = max(late, 0)
	w.stats.late[min(int(late/time.Millisecond), lightLateBuckets-1)]++
	w.stats.max = max(w.stats.max, late)
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

// newLightWriter returns a stopped writer renewing as r's lease
// controllers do (the same user and lease duration) through its own client
// from cfg, without a rate limit: the writer paces itself. It speaks
// protobuf to the API server, as a kubelet does (its
// --kube-api-content-type defaults to application/vnd.kubernetes.protobuf,
// and its clients ask for it: kubernetes/kubernetes#75602):
// JSON would cost the API server more per renewal than the nodes it
// stands for do.
func newLightWriter(cfg *rest.Config, r *leaseRenewer) (*lightWriter, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS = -1
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("create the light writer's client: %w", err)
	}
	return &lightWriter{client: client, duration: r.duration, interval: r.renewInterval()}, nil
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
	s := cp.LightStats()
	return s.Renewals, s.Failures
}

// LightStats returns the light writer's work so far; Since gives a
// window's.
func (cp *ControlPlane) LightStats() LightStats {
	w := cp.light
	w.statsMu.Lock()
	defer w.statsMu.Unlock()
	s := w.stats
	s.late = slices.Clone(w.stats.late)
	return s
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
// in each round, node i of n is due at i/n of the interval from the
// round's start, and its renewal starts then in a goroutine of its own.
func (w *lightWriter) run(ctx context.Context) {
	defer close(w.done)
	var wg sync.WaitGroup
	defer wg.Wait()
	// The rounds keep to a fixed schedule: a round that falls behind
	// shows as lateness, not as a later start of the next one.
	start := time.Now()
	for round := 0; ; round++ {
		w.mu.Lock()
		nodes := append([]*lightNode(nil), w.nodes...)
		w.mu.Unlock()
		for i, ln := range nodes {
			due := start.Add(w.interval * time.Duration(i) / time.Duration(len(nodes)))
			if !sleepUntil(ctx, due) {
				return
			}
			status := (round+i)%lightStatusRounds == 0
			wg.Add(1)
			go func() {
				defer wg.Done()
				w.renew(ctx, ln, due, status)
			}()
		}
		start = start.Add(w.interval)
		if !sleepUntil(ctx, start) {
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
// condition heartbeats), as the kubelet does, and records how late after
// due the API server answered; after a failure the Lease is read again for
// the next renewal. A node that is not up is left alone; one whose last
// renewal is still in flight is counted skipped.
func (w *lightWriter) renew(ctx context.Context, ln *lightNode, due time.Time, status bool) {
	if ln.node.State() != NodeUp {
		return
	}
	if !ln.mu.TryLock() {
		w.statsMu.Lock()
		w.stats.Skipped++
		w.statsMu.Unlock()
		return
	}
	defer ln.mu.Unlock()
	leases := w.client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	l := ln.lease.DeepCopy()
	now := metav1.NewMicroTime(time.Now())
	l.Spec.RenewTime = &now
	updated, err := leases.Update(ctx, l, metav1.UpdateOptions{})
	if ctx.Err() != nil {
		return // stopped: neither a renewal nor a failure
	}
	w.record(time.Since(due), err != nil)
	if err != nil {
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
