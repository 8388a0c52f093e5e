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

// recoveryInput is what the recovery decision rests on.
type recoveryInput struct {
	// FenceBootID is the boot ID recorded when the fence opened.
	FenceBootID string
	// Node is the Node as the API server has it now.
	Node *corev1.Node
	// Verdict is this replica's latest verdict; HealthySince is when it saw
	// the node become Healthy (zero unless Healthy).
	Verdict      detector.State
	HealthySince time.Time
	// PodUIDs are the pods on the node before the fence; Pods those on it now.
	PodUIDs []string
	Pods    []corev1.Pod
	// Detaching names the node's VolumeAttachments no pod on it needs
	// (kube.Writer.PendingDetaches).
	Detaching []string
	Now       time.Time
	Settle    time.Duration
}

// recoveryDecision says whether to unfence now.
type recoveryDecision struct {
	Unfence bool
	// NeedsReboot: the node is back with the boot ID it had when fenced.
	NeedsReboot bool
	// Why explains a wait or a refusal; on Unfence it is the ledger note.
	Why string
	// BootID is the node's current boot ID.
	BootID string
}

// decideRecovery is the unfence rule of invariant 5: the boot ID changed,
// the heartbeat has been fresh for the settle period, and none of the
// pods from before the fence still runs on the node. It also waits until
// the attach/detach controller has detached every volume no pod on the
// node needs (those of the evicted pods): a detach is a storage action
// for the node, and invariant 1 allows it only while the node is fenced.
func decideRecovery(in recoveryInput) recoveryDecision {
	d := recoveryDecision{}
	ready := false
	if in.Node != nil {
		d.BootID = in.Node.Status.NodeInfo.BootID
		for _, c := range in.Node.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				ready = true
			}
		}
	}
	back := in.Verdict == detector.Healthy || ready
	switch {
	case !back:
		d.Why = fmt.Sprintf("node is still down (verdict %s)", in.Verdict)
	case in.Verdict != detector.Healthy && (in.FenceBootID == "" || d.BootID == "" || d.BootID == in.FenceBootID):
		// The Ready condition lags a dead node by the node controller's
		// grace period: without a new boot ID only a fresh heartbeat (a
		// Healthy verdict) shows the node is back.
		d.Why = fmt.Sprintf("node is still down (verdict %s; its Ready condition is not yet updated)", in.Verdict)
	case in.FenceBootID == "":
		d.NeedsReboot = true
		d.Why = "the node's boot ID at fence time is unknown, so a reboot cannot be proven; reboot it and unfence it with --force"
	case d.BootID == "" || d.BootID == in.FenceBootID:
		d.NeedsReboot = true
		d.Why = fmt.Sprintf("node returned without a reboot (boot ID %s unchanged since the fence); it stays fenced until it reboots", in.FenceBootID)
	case in.Verdict != detector.Healthy:
		d.Why = fmt.Sprintf("node rebooted (boot ID %s); waiting for a healthy verdict", d.BootID)
	case !ready:
		d.Why = fmt.Sprintf("node rebooted (boot ID %s); waiting for it to be Ready", d.BootID)
	case in.Now.Sub(in.HealthySince) < in.Settle:
		d.Why = fmt.Sprintf("node rebooted (boot ID %s); settling until %s", d.BootID,
			in.HealthySince.Add(in.Settle).UTC().Format(time.RFC3339))
	default:
		if old := stalePods(in.PodUIDs, in.Pods); len(old) > 0 {
			d.Why = fmt.Sprintf("node rebooted but pods from before the fence still run there: %s", strings.Join(old, ", "))
			break
		}
		if len(in.Detaching) > 0 {
			d.Why = fmt.Sprintf("node rebooted; waiting for the attach/detach controller to detach %s",
				strings.Join(in.Detaching, ", "))
			break
		}
		d.Unfence = true
		d.Why = fmt.Sprintf("node rebooted (boot ID %s -> %s), healthy for %s, no pod from before the fence runs there and no volume waits for a detach",
			in.FenceBootID, d.BootID, in.Now.Sub(in.HealthySince).Round(time.Second))
	}
	return d
}

// bootSighting is a fenced node's new boot ID and when the leader first
// saw it.
type bootSighting struct {
	bootID string
	at     time.Time
}

// settledSince is when the fenced node's settle period starts: when its
// verdict turned Healthy, but never before this leader first saw the boot
// ID it has now (different from the fence's). A node whose verdict never
// left Healthy (a fence asked for by NodeHealthCheck or an operator while
// the detector still saw heartbeats) would otherwise count its settle
// period from before its reboot; a new leader starts the count again.
func (c *Controller) settledSince(f *ledger.Fence, n *corev1.Node, healthySince time.Time) time.Time {
	boot := n.Status.NodeInfo.BootID
	if boot == "" || boot == f.BootID {
		return healthySince
	}
	now := c.clk.Now()
	c.mu.Lock()
	s, ok := c.rebootSeen[f.ID]
	if !ok || s.bootID != boot {
		s = bootSighting{bootID: boot, at: now}
		c.rebootSeen[f.ID] = s
	}
	c.mu.Unlock()
	if s.at.After(healthySince) {
		return s.at
	}
	return healthySince
}

// stalePods names the pods from before the fence that still run.
func stalePods(uids []string, pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		if !slices.Contains(uids, string(p.UID)) {
			continue
		}
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		out = append(out, p.Namespace+"/"+p.Name)
	}
	return out
}

// stepRecover commits unfence-intent once the node rebooted and settled,
// and reports a node that came back without a reboot.
func (c *Controller) stepRecover(ctx context.Context, l Leadership, cl *clusterRuntime, f *ledger.Fence) (result, error) {
	// A volume Kubernetes attached to the node after its eviction (a pod
	// bound before the taint, attached after it) is cut and read back
	// while the node stays fenced. The informers' change of the node's
	// footprint enqueues it; this reads only their cache.
	if again, err := c.refence(ctx, l, cl, f); err != nil || again {
		return next, err
	}
	if r, held := c.remediationHoldsRecovery(cl, f); held {
		// NodeHealthCheck asked for the fence: the node is unfenced once
		// NHC deleted its FencedRemediation (it found the node healthy),
		// and then only with the checks below.
		why := "waits for NodeHealthCheck to delete FencedRemediation " + r.Key()
		c.report(cl.Name, f.Node, func(r *nodeReport) { r.FenceID, r.Recovery = f.ID, why })
		return waitFor(c.cfg.Resync), nil
	}
	ve, known := c.verdict(cl.Name, f.Node)
	if !known || ve.State != detector.Healthy {
		// Only a Healthy verdict leads to an unfence (or shows a node back
		// without a reboot; see decideRecovery), and a verdict change
		// enqueues the node at once. Until then the resync reads nothing:
		// a hundred fenced nodes re-read every Resync would take the
		// client's whole request budget from fences still in progress.
		state := detector.Failed
		if known {
			state = ve.State
		}
		d := decideRecovery(recoveryInput{FenceBootID: f.BootID, Verdict: state, Now: c.clk.Now(), Settle: cl.SettlePeriod})
		c.report(cl.Name, f.Node, func(r *nodeReport) { r.FenceID, r.NeedsReboot, r.Recovery = f.ID, "", d.Why })
		return waitFor(c.cfg.Resync), nil
	}
	kctx, cancel := context.WithTimeout(ctx, c.cfg.KubeTimeout)
	defer cancel()
	n, err := cl.Kube.GetNode(kctx, f.Node)
	if err != nil {
		return done, fmt.Errorf("fence %s: recovery check: %w", f.ID, err)
	}
	pods, err := cl.Kube.PodsOnNode(kctx, f.Node)
	if err != nil {
		return done, fmt.Errorf("fence %s: recovery check: %w", f.ID, err)
	}
	in := recoveryInput{FenceBootID: f.BootID, Node: n, PodUIDs: f.PodUIDs, Pods: pods, Now: c.clk.Now(),
		Settle: cl.SettlePeriod, Verdict: ve.State, HealthySince: c.settledSince(f, n, ve.ObservedAt)}
	d := decideRecovery(in)
	if d.Unfence {
		// Listing the cluster's VolumeAttachments is the costly check:
		// only once every other condition holds, not on every resync of a
		// node that is still down.
		if in.Detaching, err = cl.Kube.PendingDetaches(kctx, f.Node); err != nil {
			return done, fmt.Errorf("fence %s: recovery check: %w", f.ID, err)
		}
		d = decideRecovery(in)
	}
	if !d.Unfence {
		needs := ""
		if d.NeedsReboot {
			needs = d.Why
		}
		first := false
		c.report(cl.Name, f.Node, func(r *nodeReport) {
			first = needs != "" && r.NeedsReboot != needs
			r.FenceID, r.NeedsReboot, r.Recovery = f.ID, needs, d.Why
		})
		if first {
			c.log.Warn("fenced node needs a reboot", "cluster", cl.Name, "node", f.Node, "fenceID", f.ID, "why", d.Why)
			c.nodeEvent(ctx, cl, f.Node, corev1.EventTypeWarning, "FencedNodeNeedsReboot", f.ID+"/"+d.BootID,
				fmt.Sprintf("fence %s: %s", f.ID, d.Why))
		}
		return waitFor(c.cfg.Resync), nil
	}
	if w := c.conflictWait(l, f, dirUnfence); w > 0 {
		return waitFor(w), nil
	}
	scope, err := c.restoreScope(cl, f)
	if err != nil {
		return done, err
	}
	err = c.commit(ctx, l, &ledger.FenceStep{Meta: c.meta(l), Cluster: f.Cluster, Node: f.Node, FenceID: f.ID,
		From: f.State, To: ledger.StateUnfenceIntent, Note: d.Why, BootID: d.BootID, Restore: scope})
	if err != nil {
		return done, fmt.Errorf("fence %s: unfence intent: %w", f.ID, err)
	}
	c.report(cl.Name, f.Node, func(r *nodeReport) { r.NeedsReboot, r.Recovery = "", "" })
	c.log.Info("unfencing node", "cluster", cl.Name, "node", f.Node, "fenceID", f.ID, "why", d.Why)
	if err := c.at(PointUnfenceIntent); err != nil {
		return done, err
	}
	return next, nil
}

// stepRestore undoes every plan and verifies each restore, then commits
// restored.
func (c *Controller) stepRestore(ctx context.Context, l Leadership, cl *clusterRuntime, f *ledger.Fence) (result, error) {
	if w := c.conflictWait(l, f, dirUnfence); w > 0 {
		return waitFor(w), nil
	}
	if w, err := c.liftOutOfService(ctx, l, cl, f); err != nil || w > 0 {
		return waitFor(w), err
	}
	// Every attempt restores with the scope Kubernetes wants now (a
	// retry after an array error, after a block, under a new leader):
	// recorded first when it changed.
	if again, err := c.rescope(ctx, l, cl, f); err != nil || again {
		return next, err
	}
	var todo []string
	for _, p := range f.Plans {
		if _, ok := f.AbandonedRestore(p.Array); ok {
			continue // an operator abandoned it: never written to
		}
		if r := f.Results[p.Array]; r == nil || !r.RestoreVerified {
			todo = append(todo, p.Array)
		}
	}
	errs := c.forEachArray(ctx, todo, func(ctx context.Context, array string) error {
		return c.restoreArray(ctx, l, f, array)
	})
	if hasStop(errs) {
		return done, errStopped
	}
	for _, err := range errs {
		if errors.Is(err, errRescoped) {
			return next, nil // record the new scope, then restore with it
		}
		if errors.Is(err, errAbandoned) {
			return next, nil // restore the other arrays, without this one
		}
	}
	if len(errs) > 0 {
		names, text := errorsByArray(errs)
		return done, c.blocked(ctx, cl, f, names, "cannot restore on "+text+confirmedGoneHint(f, names))
	}
	f = c.readNode(cl.Name, f.Node).Fence
	if f == nil || f.State != ledger.StateUnfenceIntent {
		return next, nil
	}
	// An array restored earlier under a scope that changed since is
	// restored again (the new scope takes its read-back away).
	if again, err := c.rescope(ctx, l, cl, f); err != nil || again {
		return next, err
	}
	if err := c.step(ctx, l, f, ledger.StateRestored, restoredNote(f)); err != nil {
		return done, err
	}
	c.unblock(cl.Name, f.Node)
	if err := c.at(PointRestored); err != nil {
		return done, err
	}
	return next, nil
}

// liftOutOfService removes the fence's out-of-service taint before any
// array access is given back, and returns how long the unfence must still
// wait after it. Kubernetes' pod garbage collector and attach/detach
// controller read that taint from informer caches, so for a while after it
// is removed they can still force-delete the node's pods or force-detach
// its volumes (kubernetes#142331): with access already back, a pod running
// on the node could be deleted from the API server and started elsewhere
// while the node still writes. So the order of an unfence is: the
// out-of-service taint off (fenced's NoSchedule taint keeps new pods
// away), OutOfServiceSettle for the controllers to converge, then array
// access (Undo, read back), then fenced's own taint (stepUntaint). A new
// leader waits the settle again. An out-of-service taint an administrator
// put on the node before the fence is theirs and stays.
func (c *Controller) liftOutOfService(ctx context.Context, l Leadership, cl *clusterRuntime, f *ledger.Fence) (time.Duration, error) {
	var oos []corev1.Taint
	for _, t := range ownTaints(f) {
		if t.Key == TaintOutOfService {
			oos = append(oos, t)
		}
	}
	if len(oos) == 0 {
		return 0, nil
	}
	now := c.clk.Now()
	c.mu.Lock()
	at, ok := c.lifted[f.ID]
	c.mu.Unlock()
	if ok {
		return max(at.Add(c.cfg.OutOfServiceSettle).Sub(now), 0), nil
	}
	if err := c.verifyLeader(ctx, l); err != nil {
		return 0, err
	}
	kctx, cancel := context.WithTimeout(ctx, c.cfg.KubeTimeout)
	defer cancel()
	changed, err := cl.Kube.RemoveTaints(kctx, f.Node, oos...)
	if err != nil {
		return 0, fmt.Errorf("fence %s: remove the out-of-service taint before giving access back: %w", f.ID, err)
	}
	c.mu.Lock()
	c.lifted[f.ID] = now
	c.mu.Unlock()
	c.log.Info("unfence: out-of-service taint removed; array access is given back once Kubernetes' controllers have seen it",
		"cluster", cl.Name, "node", f.Node, "fenceID", f.ID, "removed", changed, "wait", c.cfg.OutOfServiceSettle)
	return c.cfg.OutOfServiceSettle, nil
}

// errRescoped ends an array's restore attempts when the volumes
// Kubernetes wants on the node changed since the scope was recorded: the
// reconcile records the new scope, then restores with it.
var errRescoped = errors.New("the restore scope changed since it was recorded")

// errAbandoned ends an array's restore attempts when an operator
// abandoned its restore meanwhile: the reconcile goes on without it.
var errAbandoned = errors.New("an operator abandoned the restore of this array")

// rescope computes the record's restore scope again from the live
// VolumeAttachments and, when it differs from the recorded one, records
// it (ledger.Rescope) and reports true: the caller reconciles again and
// restores with it. A volume whose VolumeAttachment to the node went away
// is not given back; one Kubernetes wants on the node since is. A group
// that runs a ledger version before ledger.RescopeVersion cannot record
// it: the unfence restores with the recorded scope, as that version does,
// and the leader says so once per fence and scope.
func (c *Controller) rescope(ctx context.Context, l Leadership, cl *clusterRuntime, f *ledger.Fence) (bool, error) {
	live, err := c.restoreScope(cl, f)
	g := c.groupVersion()
	if g < ledger.RescopeVersion {
		if err != nil || sameScope(live, f.Restore) {
			return false, nil
		}
		key := scopeKey(live)
		c.mu.Lock()
		first := c.keptScope[f.ID] != key
		c.keptScope[f.ID] = key
		c.mu.Unlock()
		if first {
			c.log.Warn("unfence restores with the scope recorded at unfence-intent although Kubernetes wants other volumes on the node now: "+
				fmt.Sprintf("the group runs ledger version %d, recomputed scopes need version %d; upgrade every replica", g, ledger.RescopeVersion),
				"cluster", cl.Name, "node", f.Node, "fenceID", f.ID, "recorded", scopeKey(f.Restore), "live", key,
				"change", scopeChange(f.Restore, live))
		}
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("fence %s: restore scope: %w", f.ID, err)
	}
	if sameScope(live, f.Restore) {
		return false, nil
	}
	note := scopeChange(f.Restore, live)
	if err := c.commit(ctx, l, &ledger.Rescope{Meta: c.meta(l), Cluster: f.Cluster, Node: f.Node, FenceID: f.ID,
		Restore: live, Note: note}); err != nil {
		return false, fmt.Errorf("fence %s: record the restore scope: %w", f.ID, err)
	}
	c.log.Warn("unfence: the volumes Kubernetes wants on the node changed since the restore scope was recorded; restoring with the new scope",
		"cluster", cl.Name, "node", f.Node, "fenceID", f.ID, "change", note, "scope", scopeKey(live))
	return true, nil
}

// scopeCurrent checks, before a restore write on array, that the volumes
// Kubernetes wants on the node there are still those of the recorded
// scope (from ledger.RescopeVersion; an older group restores with the
// recorded scope). It returns errRescoped when they are not.
func (c *Controller) scopeCurrent(f *ledger.Fence, array string) error {
	cl := c.clusters[f.Cluster]
	if cl == nil || c.groupVersion() < ledger.RescopeVersion {
		return nil
	}
	live, err := c.restoreScope(cl, f)
	if err != nil {
		return fmt.Errorf("fence %s: restore scope: %w", f.ID, err)
	}
	if !sameWanted(live[array], f.Restore[array]) {
		return fmt.Errorf("%w: %s", errRescoped, scopeChange(f.Restore, live))
	}
	return nil
}

// sameScope reports whether two restore scopes want the same volumes on
// every array (an empty scope and none are the same).
func sameScope(a, b map[string]arrayclients.RestoreScope) bool {
	for _, array := range slices.Concat(slices.Collect(maps.Keys(a)), slices.Collect(maps.Keys(b))) {
		if !sameWanted(a[array], b[array]) {
			return false
		}
	}
	return true
}

// sameWanted reports whether two scopes of one array name the same volumes.
func sameWanted(a, b arrayclients.RestoreScope) bool {
	x, y := slices.Sorted(slices.Values(a.Wanted)), slices.Sorted(slices.Values(b.Wanted))
	return slices.Equal(slices.Compact(x), slices.Compact(y))
}

// scopeKey writes a scope as "array: pv, pv; array: pv", "none" when empty.
func scopeKey(s map[string]arrayclients.RestoreScope) string {
	var parts []string
	for _, array := range slices.Sorted(maps.Keys(s)) {
		if w := slices.Compact(slices.Sorted(slices.Values(s[array].Wanted))); len(w) > 0 {
			parts = append(parts, array+": "+strings.Join(w, ", "))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "; ")
}

// scopeChange says what changed from one scope to the next: the volumes
// no longer wanted on the node and those newly wanted, with their arrays.
func scopeChange(old, now map[string]arrayclients.RestoreScope) string {
	var gone, added []string
	for _, array := range slices.Compact(slices.Sorted(slices.Values(slices.Concat(
		slices.Collect(maps.Keys(old)), slices.Collect(maps.Keys(now)))))) {
		for _, v := range old[array].Wanted {
			if !now[array].Wants(v) && !slices.Contains(gone, v+" ("+array+")") {
				gone = append(gone, v+" ("+array+")")
			}
		}
		for _, v := range now[array].Wanted {
			if !old[array].Wants(v) && !slices.Contains(added, v+" ("+array+")") {
				added = append(added, v+" ("+array+")")
			}
		}
	}
	var parts []string
	if len(gone) > 0 {
		parts = append(parts, "no longer wanted on the node: "+strings.Join(gone, ", "))
	}
	if len(added) > 0 {
		parts = append(parts, "newly wanted: "+strings.Join(added, ", "))
	}
	if len(parts) == 0 {
		return "unchanged"
	}
	return strings.Join(parts, "; ")
}

// confirmedGoneHint tells the operator, for the arrays of a blocked
// restore that an operator confirmed for this fence (fenced confirm), why
// the unfence waits and what ends the wait: fenced never closes a fence
// while a cut it recorded may still be in place on an array, so the node
// stays fenced until the array answers again and its access is given back
// and read back there.
func confirmedGoneHint(f *ledger.Fence, arrays []string) string {
	var parts, abandon []string
	for _, a := range arrays {
		if cf, ok := f.Confirmed(a); ok {
			parts = append(parts, fmt.Sprintf("%s (confirmed gone by %s: %s)", a, cf.Operator, cf.Reason))
			abandon = append(abandon, fmt.Sprintf("fenced unfence %s --cluster %s --abandon-array %s --reason R --yes",
				f.Node, f.Cluster, a))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "; a cut of this fence may still be in place on " + strings.Join(parts, ", ") +
		": the unfence restores it there and finishes once the array answers again; until then the node stays fenced (bring the array back, or see the operations guide: When an array is gone for good)" +
		"; if it never comes back, abandon its restore: " + strings.Join(abandon, " and ")
}

// restoredNote is the ledger note of the restored step: the arrays
// restored and read back, and those whose restore an operator abandoned.
func restoredNote(f *ledger.Fence) string {
	var done, abandoned []string
	for _, p := range f.Plans {
		if ab, ok := f.AbandonedRestore(p.Array); ok {
			abandoned = append(abandoned, p.Array+" "+ab.Text())
			continue
		}
		done = append(done, p.Array)
	}
	if len(abandoned) == 0 {
		return "restored and verified on " + strings.Join(planArrays(f), ", ")
	}
	note := "restored and verified on " + strings.Join(done, ", ")
	if len(done) == 0 {
		note = "restored on no array"
	}
	return note + "; " + strings.Join(abandoned, "; ")
}
