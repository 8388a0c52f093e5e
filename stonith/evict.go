package stonith

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fenced-project/fenced/cluster/ledger"
	"github.com/fenced-project/fenced/kube"
)

// The taints of a fenced node.
const (
	// TaintFenced keeps new pods off a fenced node; its value is the fence ID.
	TaintFenced = "fenced.io/fenced"
	// TaintOutOfService makes Kubernetes (>= 1.28) force-detach the node's
	// volumes and evict its pods.
	TaintOutOfService = "node.kubernetes.io/out-of-service"
	// OutOfServiceValue is the value Kubernetes documents for it.
	OutOfServiceValue = "nodeshutdown"
)

// fenceTaints are the taints of fence f.
func fenceTaints(fenceID string) []corev1.Taint {
	return []corev1.Taint{
		{Key: TaintFenced, Value: fenceID, Effect: corev1.TaintEffectNoSchedule},
		{Key: TaintOutOfService, Value: OutOfServiceValue, Effect: corev1.TaintEffectNoExecute},
	}
}

// ownTaints are the taints fence f puts on its node and lifts again: both
// of fenceTaints, but not the out-of-service taint when the node carried
// one of its own before the fence (an administrator's, which stays as it
// was).
func ownTaints(f *ledger.Fence) []corev1.Taint {
	ts := fenceTaints(f.ID)
	if f.OutOfServiceBefore != nil && *f.OutOfServiceBefore {
		return ts[:1]
	}
	return ts
}

// foreignOutOfService reports whether the node has an out-of-service taint
// that fence f did not put there: one while the node does not carry f's
// own fenced taint (which fenced puts on together with its out-of-service
// taint).
func foreignOutOfService(n *corev1.Node, fenceID string) bool {
	has, ours := false, false
	for _, t := range n.Spec.Taints {
		switch {
		case t.Key == TaintOutOfService:
			has = true
		case t.Key == TaintFenced && t.Value == fenceID:
			ours = true
		}
	}
	return has && !ours
}

// nodeEvent records an Event on the node; failures are logged only.
func (c *Controller) nodeEvent(ctx context.Context, cl *clusterRuntime, node, eventType, reason, key, msg string) {
	kctx, cancel := context.WithTimeout(ctx, c.cfg.KubeTimeout)
	defer cancel()
	var uid string
	if n, err := cl.Kube.GetNode(kctx, node); err == nil {
		uid = string(n.UID)
	}
	if err := cl.Kube.Event(kctx, kube.NodeTarget(node, types.UID(uid)), eventType, reason, key, msg); err != nil {
		c.log.Warn("record event on node", "cluster", cl.Name, "node", node, "reason", reason, "error", err)
	}
}

// stepTaint puts the fence's taints on the node (the record is fenced:
// every array confirmed by read-back).
func (c *Controller) stepTaint(ctx context.Context, l Leadership, cl *clusterRuntime, f *ledger.Fence) (result, error) {
	if w := c.conflictWait(l, f, dirFence); w > 0 {
		return waitFor(w), nil
	}
	if again, err := c.refence(ctx, l, cl, f); err != nil || again {
		return next, err
	}
	// A guard that arose while the arrays were cut holds the taints and
	// the evictions (the node stays fenced) until it clears.
	if reason := c.fencingGuard(cl, f); reason != "" {
		c.block(cl.Name, f.Node, f.ID, reason+": fence "+f.ID+" is fenced on every array but holds its taints and evictions", nil)
		return waitFor(c.cfg.Resync), nil
	}
	c.unblock(cl.Name, f.Node)
	if lag, err := c.footprintLag(ctx, cl, f); err != nil {
		return done, err
	} else if len(lag) > 0 {
		c.log.Info("the API server shows volumes attached to the fenced node that the footprint has not seen yet: the taint waits for them",
			"cluster", cl.Name, "node", f.Node, "fenceID", f.ID, "volumes", lag)
		return waitFor(footprintLagWait), nil
	}
	if err := c.verifyLeader(ctx, l); err != nil {
		return done, err
	}
	kctx, cancel := context.WithTimeout(ctx, c.cfg.KubeTimeout)
	defer cancel()
	start := c.clk.Now()
	changed, err := cl.Kube.AddTaints(kctx, f.Node, ownTaints(f)...)
	if err != nil {
		return done, fmt.Errorf("fence %s: taint node: %w", f.ID, err)
	}
	c.metrics.stepDuration(cl.Name, "taint", c.clk.Since(start))
	if err := c.at(PointTaintWritten); err != nil {
		return done, err
	}
	c.nodeEvent(ctx, cl, f.Node, corev1.EventTypeWarning, "NodeFenced", f.ID,
		fmt.Sprintf("node fenced by %s on %s (verified by read-back); tainted %s and %s", f.ID,
			strings.Join(planArrays(f), ", "), TaintFenced, TaintOutOfService))
	note := "taints already present"
	if changed {
		note = "tainted " + TaintFenced + " and " + TaintOutOfService
	}
	if err := c.step(ctx, l, f, ledger.StateTainted, note); err != nil {
		return done, err
	}
	if err := c.at(PointTainted); err != nil {
		return done, err
	}
	return next, nil
}

// stepEvict force-deletes the node's StatefulSet and protected pods.
func (c *Controller) stepEvict(ctx context.Context, l Leadership, cl *clusterRuntime, f *ledger.Fence) (result, error) {
	if w := c.conflictWait(l, f, dirFence); w > 0 {
		return waitFor(w), nil
	}
	kctx, cancel := context.WithTimeout(ctx, c.cfg.KubeTimeout)
	pods, err := cl.Kube.PodsOnNode(kctx, f.Node)
	cancel()
	if err != nil {
		return done, fmt.Errorf("fence %s: %w", f.ID, err)
	}
	var evict []*corev1.Pod
	for i := range pods {
		if cl.evictable(&pods[i]) {
			evict = append(evict, &pods[i])
		}
	}
	if wait := awaitingTaintEviction(evict); len(wait) > 0 {
		if at := taintedAt(f); !at.IsZero() && c.clk.Since(at) < c.cfg.TaintEvictionWait {
			return waitFor(c.evictionPoll(f.ID)), nil
		}
		c.log.Info("the taint-eviction controller has not deleted these pods of the fenced node: fenced deletes them",
			"cluster", cl.Name, "node", f.Node, "fenceID", f.ID, "pods", wait, "waited", c.cfg.TaintEvictionWait)
	}
	c.evictionWaitOver(f.ID)
	// The footprint may have grown since the taint: a pod bound to the
	// node before it whose volume Kubernetes attached after it. No pod is
	// deleted until that volume is cut too (invariant 1). Both checks come
	// after the pods were listed, so every volume of a listed pod that
	// was attached when they were listed is checked.
	if again, err := c.refence(ctx, l, cl, f); err != nil || again {
		return next, err
	}
	if lag, err := c.footprintLag(ctx, cl, f); err != nil {
		return done, err
	} else if len(lag) > 0 {
		c.log.Info("the API server shows volumes attached to the fenced node that the footprint has not seen yet: the eviction waits for them",
			"cluster", cl.Name, "node", f.Node, "fenceID", f.ID, "volumes", lag)
		return waitFor(footprintLagWait), nil
	}
	start := c.clk.Now()
	// Side by side, at most evictWorkers at once: each pod's deletion is
	// its own leadership check, Event and UID-preconditioned delete, so
	// their order does not matter, and one node's pods cost about one
	// round of API calls instead of one per pod.
	gone := make([]bool, len(evict))
	errs := make([]error, len(evict))
	var g errgroup.Group
	g.SetLimit(evictWorkers)
	var failed atomic.Bool // after an error no further pod is started
	for i, p := range evict {
		g.Go(func() error {
			if failed.Load() {
				return nil
			}
			if gone[i], errs[i] = c.deletePod(ctx, l, cl, f, p); errs[i] != nil {
				failed.Store(true)
			}
			return nil
		})
	}
	_ = g.Wait() // the errors are in errs, by pod
	var deleted []string
	for i, p := range evict {
		if gone[i] {
			deleted = append(deleted, p.Namespace+"/"+p.Name)
		}
	}
	for _, err := range errs {
		if err != nil {
			return done, err
		}
	}
	c.metrics.stepDuration(cl.Name, "evict", c.clk.Since(start))
	if err := c.at(PointPodsDeleted); err != nil {
		return done, err
	}
	sort.Strings(deleted)
	c.nodeEvent(ctx, cl, f.Node, corev1.EventTypeWarning, "FencedPodsDeleted", f.ID,
		fmt.Sprintf("fence %s: force-deleted %d pods: %s", f.ID, len(deleted), truncate(strings.Join(deleted, ", "), 800)))
	if err := c.step(ctx, l, f, ledger.StateEvicted, truncate(fmt.Sprintf("force-deleted %d pods: %s", len(deleted),
		strings.Join(deleted, ", ")), 2000)); err != nil {
		return done, err
	}
	if evictedBefore(f) {
		// A refence after the eviction: the fence was counted then.
		c.log.Warn("refence complete: the node's footprint is cut and read back again", "cluster", cl.Name, "node", f.Node,
			"fenceID", f.ID, "pods", len(deleted))
		return waitFor(c.cfg.Resync), nil
	}
	c.metrics.fence(cl.Name, ResultEvicted)
	if f.Origin == ledger.OriginVerdict {
		from := f.OpenedAt
		if r, ok := c.reportOf(cl.Name, f.Node); ok && !r.FailedAt.IsZero() {
			from = r.FailedAt
		}
		c.metrics.evicted(cl.Name, c.clk.Since(from))
	}
	c.log.Warn("fence complete: node fenced, tainted and its pods force-deleted", "cluster", cl.Name, "node", f.Node,
		"fenceID", f.ID, "pods", len(deleted))
	if err := c.at(PointEvicted); err != nil {
		return done, err
	}
	return waitFor(c.cfg.Resync), nil
}

// taintEvictionPoll is how often the eviction looks again while it waits
// for the taint-eviction controller, when it is the only one waiting.
const taintEvictionPoll = 100 * time.Millisecond

// taintEvictionPolls bounds the pod listings per second of every fence
// waiting for the taint-eviction controller together: half the pipeline
// client's default rate (kube.Config FenceQPS, 100), so that a storm's
// waits leave the other half to the taints and deletes of the fences
// that are done waiting.
const taintEvictionPolls = 50

// evictionPoll records that fence id waits for the taint-eviction
// controller and returns when it should look again: taintEvictionPoll,
// or longer when so many fences wait that their polls together would
// pass taintEvictionPolls a second.
func (c *Controller) evictionPoll(id string) time.Duration {
	now := c.clk.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.evictWaits[id] = now
	n := 0
	for other, at := range c.evictWaits {
		if now.Sub(at) > 2*c.cfg.TaintEvictionWait {
			delete(c.evictWaits, other) // a fence that stopped waiting without saying so
			continue
		}
		n++
	}
	return max(taintEvictionPoll, time.Duration(n)*time.Second/taintEvictionPolls)
}

// evictionWaitOver forgets fence id's wait for the taint-eviction
// controller.
func (c *Controller) evictionWaitOver(id string) {
	c.mu.Lock()
	delete(c.evictWaits, id)
	c.mu.Unlock()
}

// awaitingTaintEviction names the pods Kubernetes' taint-eviction
// controller is still to delete: pods not being deleted that do not
// tolerate the out-of-service taint. The controller deletes every pod
// without a matching NoExecute toleration as soon as it sees the taint,
// and a pod whose toleration has tolerationSeconds later; it deletes by
// name and retries on an error, reading the pod by name again each time
// (kubernetes pkg/controller/tainteviction taint_eviction.go:
// deletePodHandler, addConditionAndDeletePod). A force-delete of ours
// before its delete lands would let that retry find the StatefulSet's
// replacement pod, bound to a healthy node, under the same name and
// delete it. Once the controller's delete has landed (the pod has a
// deletion timestamp) its work on the pod is done; a pod that tolerates
// the taint is one it does not delete now, and its scheduled work is
// cancelled when the pod is deleted.
func awaitingTaintEviction(pods []*corev1.Pod) []string {
	oos := corev1.Taint{Key: TaintOutOfService, Value: OutOfServiceValue, Effect: corev1.TaintEffectNoExecute}
	var out []string
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		if slices.ContainsFunc(p.Spec.Tolerations, func(t corev1.Toleration) bool { return t.ToleratesTaint(&oos) }) {
			continue
		}
		out = append(out, p.Namespace+"/"+p.Name)
	}
	return out
}

// taintedAt is when the fence last entered tainted, or zero.
func taintedAt(f *ledger.Fence) time.Time {
	for i := len(f.Steps) - 1; i >= 0; i-- {
		if f.Steps[i].To == ledger.StateTainted {
			return f.Steps[i].At
		}
	}
	return time.Time{}
}

// evictWorkers is how many of a fenced node's pods are force-deleted at
// once. The pipeline's Kubernetes client allows bursts of 200 requests
// (kube.Config FenceBurst), so the API server sees at most a few dozen
// calls from one node's eviction.
const evictWorkers = 8

// deletePod force-deletes one pod of fenced node f, after checking this
// replica still leads and recording an Event on the pod. It reports
// whether the pod was deleted (false: already gone or replaced).
func (c *Controller) deletePod(ctx context.Context, l Leadership, cl *clusterRuntime, f *ledger.Fence, p *corev1.Pod) (bool, error) {
	if err := c.verifyLeader(ctx, l); err != nil {
		return false, err
	}
	kctx, cancel := context.WithTimeout(ctx, c.cfg.KubeTimeout)
	defer cancel()
	if err := cl.Kube.Event(kctx, kube.PodTarget(p), corev1.EventTypeWarning, "FencedPodDeleted", f.ID,
		fmt.Sprintf("force-deleting pod: node %s is fenced by %s on every array", f.Node, f.ID)); err != nil {
		c.log.Warn("record event on pod", "cluster", cl.Name, "pod", p.Namespace+"/"+p.Name, "error", err)
	}
	gone, err := cl.Kube.ForceDeletePod(kctx, p.Namespace, p.Name, p.UID)
	if err != nil {
		return false, fmt.Errorf("fence %s: %w", f.ID, err)
	}
	if gone {
		c.metrics.podDeleted(cl.Name)
		c.log.Info("force-deleted pod", "cluster", cl.Name, "node", f.Node, "fenceID", f.ID, "pod", p.Namespace+"/"+p.Name,
			"uid", string(p.UID))
	}
	return gone, nil
}

// evictedBefore reports whether the fence was evicted before: it went back
// to fencing after its eviction because the node's footprint grew.
func evictedBefore(f *ledger.Fence) bool {
	return slices.ContainsFunc(f.Steps, func(s ledger.Step) bool { return s.To == ledger.StateEvicted })
}

// stepUntaint removes the fence's taints (the record is restored: every
// array's undo was verified).
func (c *Controller) stepUntaint(ctx context.Context, l Leadership, cl *clusterRuntime, f *ledger.Fence) (result, error) {
	if w := c.conflictWait(l, f, dirUnfence); w > 0 {
		return waitFor(w), nil
	}
	if err := c.verifyLeader(ctx, l); err != nil {
		return done, err
	}
	kctx, cancel := context.WithTimeout(ctx, c.cfg.KubeTimeout)
	defer cancel()
	start := c.clk.Now()
	if _, err := cl.Kube.RemoveTaints(kctx, f.Node, ownTaints(f)...); err != nil {
		return done, fmt.Errorf("fence %s: remove taints: %w", f.ID, err)
	}
	c.metrics.stepDuration(cl.Name, "untaint", c.clk.Since(start))
	if err := c.at(PointUntaintWritten); err != nil {
		return done, err
	}
	c.mu.Lock()
	delete(c.lifted, f.ID)
	delete(c.keptScope, f.ID)
	delete(c.rebootSeen, f.ID)
	c.mu.Unlock()
	c.nodeEvent(ctx, cl, f.Node, corev1.EventTypeNormal, "NodeUnfenced", f.ID,
		fmt.Sprintf("fence %s lifted: access restored and verified on %s; taints removed", f.ID, strings.Join(planArrays(f), ", ")))
	if err := c.step(ctx, l, f, ledger.StateUntainted, "taints removed"); err != nil {
		return done, err
	}
	if err := c.at(PointUntainted); err != nil {
		return done, err
	}
	return next, nil
}
