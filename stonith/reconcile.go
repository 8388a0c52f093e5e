package stonith

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/cluster/ledger"
	"github.com/fenced-project/fenced/detector"
)

// reconcile reads the node's record and does the one next step.
// EarlyReason ends the reason of a fence opened on an early verdict (every
// witness agreed the node was dead before its heartbeat grace ran out).
const EarlyReason = "early verdict: every witness agreed before the grace"

func (c *Controller) reconcile(ctx context.Context, l Leadership, cl *clusterRuntime, node string) (result, error) {
	v := c.readNode(cl.Name, node)
	f := v.Fence
	if f == nil {
		return c.maybeOpen(ctx, l, cl, node, v)
	}
	if cl.DryRun {
		c.block(cl.Name, node, f.ID, fmt.Sprintf("dry-run: fence %s is held in %s; nothing is written", f.ID, f.State), nil)
		return waitFor(c.cfg.Resync), nil
	}
	if !heldState(f.State) || rebooted(f, v) {
		c.forgetHeld(f.ID)
		return c.stepOpen(ctx, l, cl, f, v)
	}
	// A held fence: its cuts are read back when due, and access that
	// reappeared is cut again before the fence's next step.
	regressed, due, err := c.holdFence(ctx, l, cl, f, v)
	switch {
	case errors.Is(err, errHeldBusy):
		return waitFor(due), nil
	case err != nil:
		return done, err
	case regressed && v.Paused && f.Origin == ledger.OriginVerdict:
		// The access is reported; it is cut again when fencing resumes,
		// and until then the fence takes no further step (no eviction
		// while the node has access).
		return waitFor(c.cfg.Resync), nil
	case regressed:
		return next, nil
	}
	res, err := c.stepOpen(ctx, l, cl, f, v)
	if err == nil && !res.again && (res.after == 0 || res.after > due) {
		// Come back when the next held check is due.
		res.after = max(due, time.Millisecond)
	}
	return res, err
}

// stepOpen does the one next step of an open record.
func (c *Controller) stepOpen(ctx context.Context, l Leadership, cl *clusterRuntime, f *ledger.Fence, v nodeView) (result, error) {
	node := f.Node
	switch f.State {
	case ledger.StateIntent:
		return c.stepIntent(ctx, l, cl, f, v)
	case ledger.StateFencing:
		return c.stepFencing(ctx, l, cl, f, v)
	case ledger.StateFenced:
		return c.stepTaint(ctx, l, cl, f)
	case ledger.StateTainted:
		return c.stepEvict(ctx, l, cl, f)
	case ledger.StateEvicted:
		return c.stepRecover(ctx, l, cl, f)
	case ledger.StateUnfenceIntent:
		return c.stepRestore(ctx, l, cl, f)
	case ledger.StateRestored:
		return c.stepUntaint(ctx, l, cl, f)
	case ledger.StateUntainted:
		if err := c.step(ctx, l, f, ledger.StateClosed, "node restored and untainted"); err != nil {
			return done, err
		}
		c.metrics.fence(cl.Name, ResultRestored)
		c.clearReport(cl.Name, node)
		return done, nil
	case ledger.StateFailed:
		to := ledger.StateFencing
		if f.Kind == ledger.KindUnfence {
			to = ledger.StateUnfenceIntent
		} else if f.Origin == ledger.OriginVerdict && v.Paused {
			c.block(cl.Name, node, f.ID, "fencing is paused: failed fence "+f.ID+" is not retried", nil)
			return waitFor(c.cfg.Resync), nil
		}
		if err := c.step(ctx, l, f, to, "retry after: "+f.FailReason); err != nil {
			return done, err
		}
		return next, nil
	}
	return done, fmt.Errorf("fence %s of %s/%s: unknown state %q", f.ID, cl.Name, node, f.State)
}

// openGuard returns why no new fence may be opened now, or "".
func (c *Controller) openGuard(ctx context.Context, l Leadership, cl *clusterRuntime, v nodeView) string {
	if v.Paused {
		return "fencing is paused"
	}
	if !v.IdentitiesKnown {
		return "the node's array identities were never learned, so a fence could not be proven"
	}
	if cl.Detector != nil {
		st := cl.Detector.Status()
		switch {
		case st.Doubt != detector.ReasonNone:
			return "this replica doubts its view of the cluster: " + string(st.Doubt)
		case st.Storm.Active:
			return fmt.Sprintf("storm guard active: %d of %d nodes unhealthy, limit %d", st.Storm.Unhealthy,
				st.Storm.Total, st.Storm.Limit)
		}
	}
	kctx, cancel := context.WithTimeout(ctx, c.cfg.KubeTimeout)
	defer cancel()
	if err := cl.Kube.CheckAPIServer(kctx); err != nil {
		return "cannot reach the API server: " + err.Error()
	}
	if err := c.verifyLeader(ctx, l); err != nil {
		return "no quorum or no longer leader: " + err.Error()
	}
	return ""
}

// returningGuard returns why a Failed verdict must not lead to a change
// of any array now, or "": the node's heartbeat is fresh again since the
// verdict (the detector's evidence shows it settling). A Failed verdict
// stays Failed while a returning node settles (the detector's
// hysteresis), but a node whose kubelet renews its Lease again is alive:
// whether it died and rebooted or never died, nothing of it needs fencing
// until its heartbeat goes stale again, which ends the settling (and the
// verdict, still Failed, lets the fence go on). A fence already past
// intent is not affected: its arrays are cut, and a node back without a
// reboot stays fenced.
func returningGuard(cl *clusterRuntime, node string) string {
	if cl.Detector == nil {
		return ""
	}
	for _, v := range cl.Detector.Status().Nodes {
		if v.Node == node && v.State == detector.Failed && !v.Evidence.SettlingSince.IsZero() {
			return "the node's heartbeat is fresh again since " + v.Evidence.SettlingSince.UTC().Format(time.RFC3339) +
				" (a returning node settles, and is not fenced unless its heartbeat goes stale again)"
		}
	}
	return ""
}

// fencingGuard returns why a fence in intent may not enter fencing now, or
// "": this replica doubts its view of the cluster (invariant 4: no fencing
// without the API server), or, for a fence on a verdict, the storm guard
// holds.
func (c *Controller) fencingGuard(cl *clusterRuntime, f *ledger.Fence) string {
	if cl.Detector == nil {
		return ""
	}
	st := cl.Detector.Status()
	switch {
	case st.Doubt != detector.ReasonNone:
		return "this replica doubts its view of the cluster: " + string(st.Doubt)
	case f.Origin == ledger.OriginVerdict && st.Storm.Active:
		return fmt.Sprintf("storm guard active: %d of %d nodes unhealthy, limit %d", st.Storm.Unhealthy, st.Storm.Total, st.Storm.Limit)
	}
	return ""
}

// anyApplied reports whether the fence has changed an array (an apply
// succeeded on one, by the ledger).
func anyApplied(f *ledger.Fence) bool {
	for _, r := range f.Results {
		if r != nil && r.Applied {
			return true
		}
	}
	return false
}

// decision is what opening a fence would commit.
type decision struct {
	Plans   []planSummary
	plans   *ledgerPlans
	Missing map[string]string
	BootID  string
	PodUIDs []string
	// Evict names the pods that would be force-deleted (namespace/name).
	Evict []string
	// Footprint is the node's storage footprint the fence records; Gaps
	// are its volumes fenced cannot cut. With a gap the node is
	// unprotected and no fence is opened (PRODUCT.md invariant 7).
	Footprint []arrayclients.FootprintVolume
	Gaps      []VolumeGap
}

// decide reads (never writes) what a fence of the node would hold: its
// storage footprint, a plan per array (its identity arrays and those
// holding footprint volumes, each plan with the cut of every footprint
// volume there), the node's boot ID and pods. When the footprint has a
// gap that needs no array read, no plan is read.
func (c *Controller) decide(ctx context.Context, cl *clusterRuntime, node string, v nodeView) (decision, error) {
	d := decision{Missing: map[string]string{}, BootID: v.BootID, plans: &ledgerPlans{}}
	kvols, err := cl.Footprints.Volumes(node)
	if err != nil {
		return d, fmt.Errorf("decide fence of %s/%s: %w", cl.Name, node, err)
	}
	cv := cover(kvols, cl.Drivers, cl.arrays, v.identities())
	d.Footprint, d.Gaps = cv.Footprint, cv.Gaps
	kctx, cancel := context.WithTimeout(ctx, c.cfg.KubeTimeout)
	defer cancel()
	n, err := cl.Kube.GetNode(kctx, node)
	if err != nil {
		return d, fmt.Errorf("decide fence of %s/%s: %w", cl.Name, node, err)
	}
	if b := n.Status.NodeInfo.BootID; b != "" {
		d.BootID = b
	}
	pods, err := cl.Kube.PodsOnNode(kctx, node)
	if err != nil {
		return d, fmt.Errorf("decide fence of %s/%s: %w", cl.Name, node, err)
	}
	for _, p := range pods {
		d.PodUIDs = append(d.PodUIDs, string(p.UID))
		if cl.evictable(&p) {
			d.Evict = append(d.Evict, p.Namespace+"/"+p.Name)
		}
	}
	if len(d.Gaps) > 0 {
		return d, nil
	}
	arrays := slices.Collect(maps.Keys(v.Identities))
	for a := range cv.Vols {
		arrays = append(arrays, a)
	}
	slices.Sort(arrays)
	c.withUnattached(cl, node, cv.Vols)
	errs := c.forEachArray(ctx, slices.Compact(arrays), func(ctx context.Context, array string) error {
		p, err := c.planArray(ctx, cl.Name, c.clk.Now(), v.Identities[array], cv.Vols[array])
		if err != nil {
			return err
		}
		d.plans.add(p)
		return nil
	})
	for a, err := range errs {
		d.Missing[a] = err.Error()
	}
	for _, p := range d.plans.list {
		d.Gaps = append(d.Gaps, planGaps(p)...)
	}
	d.Plans = d.plans.summaries()
	return d, nil
}

// evictable reports whether the pod is force-deleted from a fenced node:
// owned by a StatefulSet, or matching the protection selector.
func (cl *clusterRuntime) evictable(p *corev1.Pod) bool {
	for _, o := range p.OwnerReferences {
		if o.Kind == "StatefulSet" && o.Controller != nil && *o.Controller {
			return true
		}
	}
	return cl.selector.Matches(labelSet(p.Labels))
}

// maybeOpen opens a fence when the node's verdict is Failed and every guard
// holds; in dry-run it only reports.
func (c *Controller) maybeOpen(ctx context.Context, l Leadership, cl *clusterRuntime, node string, v nodeView) (result, error) {
	ve, ok := c.verdict(cl.Name, node)
	rem, asked := c.remediationAsks(cl, node, "")
	if (!ok || ve.State != detector.Failed) && !asked {
		c.clearReport(cl.Name, node)
		return done, nil
	}
	if !ok || ve.State != detector.Failed {
		// A FencedRemediation is NodeHealthCheck's verdict on the node:
		// the same rules hold for it as for the detector's.
		ve = verdictEntry{Verdict: detector.Verdict{Cluster: cl.Name, Node: node, State: detector.Failed,
			Reason: detector.Reason("nodehealthcheck"), Since: rem.Created}, ObservedAt: rem.Created}
	}
	guard := c.openGuard(ctx, l, cl, v)
	if guard == "" {
		guard = returningGuard(cl, node)
	}
	if guard != "" {
		if c.block(cl.Name, node, "", "not fencing: "+guard, nil) {
			c.log.Warn("node failed but not fencing it", "cluster", cl.Name, "node", node, "reason", guard)
		}
		return waitFor(c.cfg.Resync), nil
	}
	d, err := c.decide(ctx, cl, node, v)
	if err != nil {
		return done, err
	}
	if cl.DryRun {
		c.dryRun(cl, node, ve, d)
		return waitFor(c.cfg.Resync), nil
	}
	if len(d.Gaps) > 0 {
		// Invariant 7: a node whose footprint cannot be fully cut is
		// never fenced, tainted or evicted on a verdict.
		c.holdUnprotected(ctx, cl, node, d.Gaps)
		return waitFor(c.cfg.Resync), nil
	}
	if !asked {
		// Coordination with NodeHealthCheck: fenced's own verdict waits
		// while another medik8s remediator holds the node's Lease.
		why, err := c.takeNodeLease(ctx, cl, node)
		if err != nil {
			return done, fmt.Errorf("open fence of %s/%s: %w", cl.Name, node, err)
		}
		if why != "" {
			if c.block(cl.Name, node, "", "not fencing: "+why, nil) {
				c.log.Warn("node failed but not fencing it", "cluster", cl.Name, "node", node, "reason", why)
			}
			return waitFor(c.cfg.Resync), nil
		}
	}
	if err := c.verifyLeader(ctx, l); err != nil {
		return done, err
	}
	reason := fmt.Sprintf("verdict failed (%s) since %s", ve.Reason, ve.Since.UTC().Format("2006-01-02T15:04:05.000Z"))
	if len(ve.Evidence.CorroboratedBy) > 0 {
		reason += ", corroborated by " + strings.Join(ve.Evidence.CorroboratedBy, ", ")
	}
	if ve.Evidence.Early {
		reason += ", " + EarlyReason
	}
	if asked {
		// The origin of the verdict, in the ledger: NodeHealthCheck's CR.
		reason = remediationReason(rem)
	}
	err = c.commit(ctx, l, &ledger.OpenFence{Meta: c.meta(l), Cluster: cl.Name, Node: node,
		Origin: ledger.OriginVerdict, Reason: reason, BootID: d.BootID, PodUIDs: d.PodUIDs, Plans: d.plans.list,
		Footprint: d.Footprint, FootprintRecorded: true})
	if err != nil {
		return done, fmt.Errorf("open fence of %s/%s: %w", cl.Name, node, err)
	}
	c.report(cl.Name, node, func(r *nodeReport) { r.FailedAt, r.DryRun, r.Blocked = ve.ObservedAt, nil, "" })
	c.log.Warn("fence opened", "cluster", cl.Name, "node", node, "plans", len(d.plans.list),
		"unplanned", len(d.Missing), "volumes", len(d.Footprint), "reason", reason)
	if err := c.at(PointOpened); err != nil {
		return done, err
	}
	return next, nil
}

// stepIntent moves a record into fencing (or aborts it when the node
// recovered before any array was changed).
func (c *Controller) stepIntent(ctx context.Context, l Leadership, cl *clusterRuntime, f *ledger.Fence, v nodeView) (result, error) {
	if f.Origin == ledger.OriginVerdict {
		// A FencedRemediation still asking for this fence is
		// NodeHealthCheck's verdict: the detector's Healthy does not
		// withdraw it.
		_, asked := c.remediationAsks(cl, f.Node, f.ID)
		if ve, ok := c.verdict(cl.Name, f.Node); ok && ve.State == detector.Healthy && !asked {
			if err := c.step(ctx, l, f, ledger.StateAborted, "node healthy again before any array was changed"); err != nil {
				return done, err
			}
			c.metrics.fence(cl.Name, ResultAborted)
			c.clearReport(cl.Name, f.Node)
			return done, nil
		}
		if v.Paused {
			c.block(cl.Name, f.Node, f.ID, "fencing is paused: fence "+f.ID+" waits before changing any array", nil)
			return waitFor(c.cfg.Resync), nil
		}
		if reason := returningGuard(cl, f.Node); reason != "" {
			c.block(cl.Name, f.Node, f.ID, reason+": fence "+f.ID+" waits before changing any array", nil)
			return waitFor(c.cfg.Resync), nil
		}
	}
	// The guards were checked when the fence was opened, but committing
	// the intent can take a while (a slow or changing quorum); check the
	// ones that can arise since again before any array may be changed.
	if reason := c.fencingGuard(cl, f); reason != "" {
		c.block(cl.Name, f.Node, f.ID, reason+": fence "+f.ID+" waits before changing any array", nil)
		return waitFor(c.cfg.Resync), nil
	}
	c.brokenBeforeFencing(ctx, cl, f) // a no-op outside the checker's broken test build
	if err := c.step(ctx, l, f, ledger.StateFencing, "plans committed for "+strings.Join(planArrays(f), ", ")); err != nil {
		return done, err
	}
	if err := c.at(PointFencing); err != nil {
		return done, err
	}
	return next, nil
}

// stepFencing applies and verifies the fence on every array not yet
// verified, then commits fenced when every array confirms.
func (c *Controller) stepFencing(ctx context.Context, l Leadership, cl *clusterRuntime, f *ledger.Fence, v nodeView) (result, error) {
	if f.Origin == ledger.OriginVerdict && v.Paused {
		c.block(cl.Name, f.Node, f.ID, "fencing is paused: fence "+f.ID+" holds its array changes", nil)
		return waitFor(c.cfg.Resync), nil
	}
	if w := c.conflictWait(l, f, dirFence); w > 0 {
		return waitFor(w), nil
	}
	// The guards (doubt about this replica's view, the storm guard) can
	// arise after the fence entered fencing. Rule: a fence that has changed
	// no array yet holds until they clear; one that has changed an array
	// finishes cutting the node (a half-cut node helps nobody, and cutting
	// writes nothing to Kubernetes), and then holds before its taints
	// (stepTaint).
	if reason := c.fencingGuard(cl, f); reason != "" && !anyApplied(f) {
		c.block(cl.Name, f.Node, f.ID, reason+": fence "+f.ID+" holds before changing any array", nil)
		return waitFor(c.cfg.Resync), nil
	}
	if amended, err := c.amendFootprint(ctx, l, cl, f, v); err != nil || amended {
		return next, err
	}
	planErrs, err := c.amendPlans(ctx, l, f)
	if err != nil {
		return done, err
	}
	if f = c.readNode(cl.Name, f.Node).Fence; f == nil || f.State != ledger.StateFencing {
		return next, nil
	}
	// Arrays not yet verified, and after a held read-back found the
	// node's access again, those not read back since (regressionStale).
	todo := regressionStale(f)
	for _, p := range f.Plans {
		if r := f.Results[p.Array]; (r == nil || !r.Verified) && !slices.Contains(todo, p.Array) {
			todo = append(todo, p.Array)
		}
	}
	// An array an operator confirmed the node cannot write to (gone for
	// good, or the node powered off) is not tried again for this fence.
	todo = slices.DeleteFunc(todo, func(a string) bool { _, ok := f.Confirmed(a); return ok })
	errs := c.forEachArray(ctx, todo, func(ctx context.Context, array string) error {
		return c.fenceArray(ctx, l, f, array)
	})
	if hasStop(errs) {
		return done, errStopped
	}
	for a, e := range planErrs {
		errs[a] = e
	}
	f = c.readNode(cl.Name, f.Node).Fence
	if f == nil || f.State != ledger.StateFencing {
		return next, nil
	}
	ok, missing := allVerified(f)
	if gaps := uncut(f); len(gaps) > 0 {
		// A plan found, reading the array, a footprint volume it cannot
		// cut: the fence holds (no taint, no eviction) and says why.
		for _, g := range gaps {
			if g.Array != "" && errs[g.Array] == nil {
				errs[g.Array] = fmt.Errorf("cannot cut %s", g)
			}
		}
		ok = false
	}
	if !ok {
		if !f.IdentitiesKnown {
			errs["*"] = errors.New("the node's identities were never learned")
		}
		for _, a := range missing {
			if errs[a] == nil {
				errs[a] = errors.New("not verified fenced")
			}
		}
		names, text := errorsByArray(errs)
		return done, c.blocked(ctx, cl, f, names, "cannot fence on "+text)
	}
	// The footprint may have grown while the arrays were cut (an attach
	// that reached the node meanwhile): fenced only over all of it.
	if amended, err := c.amendFootprint(ctx, l, cl, f, v); err != nil || amended {
		return next, err
	}
	if err := c.at(PointVerified); err != nil {
		return done, err
	}
	if err := c.stepFenced(ctx, l, cl, f); err != nil {
		return done, err
	}
	c.unblock(cl.Name, f.Node)
	if err := c.at(PointFenced); err != nil {
		return done, err
	}
	return next, nil
}

// blocked reports a fence or recovery that cannot go on because of arrays:
// the first time for a reason it logs an error, records an Event on the
// node and counts it. It returns an errBlocked error for the retry.
func (c *Controller) blocked(ctx context.Context, cl *clusterRuntime, f *ledger.Fence, arrays []string, what string) error {
	msg := fmt.Sprintf("fence %s of node %s is blocked: %s; its pods are not deleted, retrying with backoff", f.ID, f.Node, what)
	if f.Kind == ledger.KindUnfence {
		msg = fmt.Sprintf("recovery of fence %s of node %s is blocked: %s; the node stays fenced, retrying with backoff", f.ID, f.Node, what)
	}
	if c.block(cl.Name, f.Node, f.ID, msg, arrays) {
		c.log.Error("fence blocked", "cluster", cl.Name, "node", f.Node, "fenceID", f.ID, "arrays", arrays, "error", what)
		if f.Kind == ledger.KindFence {
			c.metrics.fence(cl.Name, ResultBlocked)
		}
		c.nodeEvent(ctx, cl, f.Node, corev1.EventTypeWarning, "FenceBlocked", f.ID+"/"+strings.Join(arrays, ","), msg)
	}
	return fmt.Errorf("%w: %s", errBlocked, msg)
}

func planArrays(f *ledger.Fence) []string {
	out := make([]string, 0, len(f.Plans))
	for _, p := range f.Plans {
		out = append(out, p.Array)
	}
	if len(out) == 0 {
		return []string{"no array"}
	}
	return out
}
