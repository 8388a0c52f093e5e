package stonith

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/cluster/ledger"
	"github.com/fenced-project/fenced/kube"
)

// A fence is held from the moment every array confirmed it until its
// unfence begins: the leader reads every cut of the node back again on a
// period (ClusterConfig.HeldPeriod), and reads the arrays holding a
// footprint volume back at once when a VolumeAttachment of that volume
// changes on any node (a publish elsewhere is what re-adds a fenced node
// on some drivers). Access that
// reappears, from a CSI driver, a sidecar or a person, is a regression: the
// fence goes back to fencing, the access is cut again and read back, and
// the regression is logged, counted and raised as an Event.

// RegressionNote begins the ledger note of a fence's step back to fencing
// when a held read-back found the node's access again; /status counts
// these steps on every replica.
const RegressionNote = "access regained after the fence"

// Reasons of fenced_fence_regressions_total.
const (
	// RegressionVolume: the read-back shows the node reaching a footprint
	// volume again (an export client entry, a mapping, host access).
	RegressionVolume = "volume-access"
	// RegressionEntry: an entry of the node's identity is back (an
	// initiator, a host, an SDC) without a footprint volume being reached.
	RegressionEntry = "identity-entry"
)

// DefaultHeldPeriod is how often an open fence's cuts are read back when
// ClusterConfig.HeldPeriod is not set.
const DefaultHeldPeriod = 30 * time.Second

// errHeldBusy says the held check of an evicted fence is due but as many
// such checks as may run at once are running (Controller.heldRunning): the
// fence takes no step until its check has run, and is reconciled again
// after heldBusyRetry.
var errHeldBusy = errors.New("held check due; waiting for a free checker")

// heldBusyRetry is how soon a fence whose held check found no free checker
// is reconciled again.
const heldBusyRetry = 250 * time.Millisecond

// heldCheckers is how many held checks of evicted fences run at once for
// workers pipeline workers: a quarter of them, at least one.
func heldCheckers(workers int) int {
	return max(1, workers/4)
}

// heldKickGap is the shortest time between two held checks of one fence
// that a change (rather than the period) asks for: a burst of attachment
// changes reads the arrays once, not once per change.
const heldKickGap = time.Second

// heldEntry is the leader's schedule of one fence's held checks.
type heldEntry struct {
	// next is when the next check is due.
	next time.Time
	// full is when the next check of every array is due (the period);
	// zero when unknown (the next check reads every array).
	full time.Time
	// kicked names the arrays whose footprint volumes' attachments
	// changed since the last check, and kickAll is set when a changed
	// volume's array is not known: a check due before full reads only
	// kicked arrays, unless kickAll.
	kicked  map[string]bool
	kickAll bool
	// last is when the last check began.
	last time.Time
	// failing names the arrays whose last held read failed (logged once).
	failing map[string]bool
	// reported is the regression already reported while the step back to
	// fencing could not be committed (paused): it is not reported again.
	reported string
	// sessions is what the checks remember of each array's sessions and
	// I/O (held_sessions.go).
	sessions map[string]*sessionWatch
}

// heldStates are the states in which a fence is held: verified on every
// array, not yet being undone.
func heldState(s ledger.FenceState) bool {
	return s == ledger.StateFenced || s == ledger.StateTainted || s == ledger.StateEvicted
}

// heldSpread is the time between two held checks of a fence: a fraction
// in [0.375, 0.5) of the period, fixed per fence, so that many fences'
// checks spread over time instead of reading every array at once. A check
// comes at most half a period after the last: access regained just after
// a check is found within half a period, which leaves the other half for
// the read-back, the step back to fencing and the cut, so that the access
// ends within one period.
func heldSpread(fenceID string, period time.Duration) time.Duration {
	h := fnv.New32a()
	_, _ = h.Write([]byte(fenceID))
	frac := 0.375 + 0.125*float64(h.Sum32()%1000)/1000
	return time.Duration(float64(period) * frac)
}

// heldDue returns how long until the fence's next held check, scheduling
// its first one when none is: one spread after the fence's last read-back
// in the ledger, and at once when that is longer ago. A leader that has
// just taken over does not know when the last one checked, so it checks
// every held fence at once; a fence just read back is not read again
// before its spread.
func (c *Controller) heldDue(cl *clusterRuntime, f *ledger.Fence) time.Duration {
	now := c.clk.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.held[f.ID]
	if e == nil {
		spread := heldSpread(f.ID, cl.HeldPeriod)
		next := now
		if last := lastReadBack(f); !last.IsZero() {
			// Bounded by one spread from now: a previous leader's clock
			// ahead of this one's must not put the check off.
			next = minTime(last.Add(spread), now.Add(spread))
			if next.Before(now) {
				next = now
			}
		}
		e = &heldEntry{next: next, full: next}
		c.held[f.ID] = e
	}
	return e.next.Sub(now)
}

// heldArrays returns the arrays a held check due now reads: every planned
// array when the period is due (or the schedule does not know when it
// is), else only those whose footprint volumes' attachments changed since
// the last check (AttachmentChanged): a publish or unpublish of a volume
// can give the fenced node access only on the array that holds it. In a
// storm, every moved pod's attachment asks for a check of its fence: read
// on every array, those checks took as many array calls as the fences
// themselves. Called with c.mu held; it clears the kicks.
func heldArrays(e *heldEntry, f *ledger.Fence, now time.Time) (arrays []string, all bool) {
	kicked, kickAll := e.kicked, e.kickAll
	e.kicked, e.kickAll = nil, false
	all = e.full.IsZero() || !now.Before(e.full) || kickAll || len(kicked) == 0
	for _, p := range f.Plans {
		if all || kicked[p.Array] {
			arrays = append(arrays, p.Array)
		}
	}
	if len(arrays) == 0 {
		// A changed volume on an array the fence has no plan for: read
		// every planned array rather than none.
		all = true
		for _, p := range f.Plans {
			arrays = append(arrays, p.Array)
		}
	}
	return arrays, all
}

// lastReadBack is when the fence's last recorded result was written (its
// read-back, by whichever leader), zero when it has none.
func lastReadBack(f *ledger.Fence) time.Time {
	var last time.Time
	for _, r := range f.Results {
		if r != nil && r.LastAt.After(last) {
			last = r.LastAt
		}
	}
	return last
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// forgetHeld drops the schedule of a fence that is no longer held.
func (c *Controller) forgetHeld(fenceID string) {
	c.mu.Lock()
	delete(c.held, fenceID)
	c.mu.Unlock()
}

// AttachmentChanged is told that a VolumeAttachment of the PersistentVolume
// changed, on whichever node (the footprint informers' OnAttachmentChange). Every
// held fence of the cluster whose footprint holds the volume is checked at
// once, on the arrays that hold the volume (every planned array when its
// placement is not known): a publish of the volume to another node can give the fenced node
// its access back (csi-vxflexos NFS with interfaceNames adds every known
// node's IP to the export), and so can another node's unpublish (a driver
// writing back an export's whole client list it read before the cut). The
// fenced node's own attachment going away does not schedule a check. It
// only schedules and enqueues.
func (c *Controller) AttachmentChanged(cluster string, ch kube.AttachmentChange) {
	if (ch.PV == "" && ch.Handle == "") || c.clusters[cluster] == nil {
		return
	}
	c.mu.Lock()
	leading := c.queue != nil
	c.mu.Unlock()
	if !leading { // a follower's informers see every change: no ledger scan for them
		return
	}
	var nodes []string
	var ids []string
	var kicks [][]string
	c.cfg.Ledger.Read(func(s *ledger.State) {
		for _, f := range s.OpenFences() {
			if f.Cluster != cluster || !heldState(f.State) {
				continue
			}
			if ch.Detaching && ch.Node == f.Node {
				// The fenced node's own attachment going away (the
				// attach-detach controller's detach after the
				// out-of-service taint) unpublishes the volume from
				// this node: it takes access, it cannot give any. In
				// a storm these detaches would otherwise read every
				// array again for every fence before its eviction.
				continue
			}
			var on []string // the changed volume's arrays, nil when not known
			found := false
			for _, v := range f.Footprint {
				if !sameVolume(v.KubeVolume, ch) {
					continue
				}
				found = true
				if len(v.Placements) == 0 {
					on = nil
					break
				}
				for _, pl := range v.Placements {
					on = append(on, pl.Array)
				}
			}
			if found {
				nodes = append(nodes, f.Node)
				ids = append(ids, f.ID)
				kicks = append(kicks, on)
			}
		}
	})
	if len(ids) == 0 {
		return
	}
	now := c.clk.Now()
	c.mu.Lock()
	if c.queue == nil { // not leading: the next leader schedules its own checks
		c.mu.Unlock()
		return
	}
	for i, id := range ids {
		e := c.held[id]
		if e == nil {
			e = &heldEntry{}
			c.held[id] = e
		}
		if kicks[i] == nil {
			e.kickAll = true
		} else {
			if e.kicked == nil {
				e.kicked = map[string]bool{}
			}
			for _, a := range kicks[i] {
				e.kicked[a] = true
			}
		}
		e.next = now
		if !e.last.IsZero() && e.last.Add(heldKickGap).After(now) {
			e.next = e.last.Add(heldKickGap)
		}
	}
	c.mu.Unlock()
	for _, n := range nodes {
		c.Enqueue(cluster, n)
	}
}

// sameVolume says whether an attachment change is of a footprint volume:
// the same PersistentVolume, or another one (or an inline volume) naming
// the same array volume: the same CSI driver and handle.
func sameVolume(v arrayclients.KubeVolume, ch kube.AttachmentChange) bool {
	if ch.PV != "" && v.PV == ch.PV {
		return true
	}
	return ch.Handle != "" && v.Handle == ch.Handle && v.Driver == ch.Driver
}

// holdFence runs the fence's held check when it is due: every planned
// array is read back (read-only) and a read-back that shows the node's
// access again sends the fence back to fencing. It reports whether it did
// (the caller reconciles again at once), and otherwise how long until the
// next check is due.
func (c *Controller) holdFence(ctx context.Context, l Leadership, cl *clusterRuntime, f *ledger.Fence, nv nodeView) (bool, time.Duration, error) {
	if due := c.heldDue(cl, f); due > 0 {
		return false, due, nil
	}
	// A check waiting for array slots holds a pipeline worker: bound how
	// many checks of evicted fences do, so that the steps that need no
	// array (the taint, the eviction) always find a worker while many
	// held fences are due at once (a storm's fences all become held
	// within seconds). The check of a fence not yet evicted is part of
	// its way to the eviction and is not bounded: behind the evicted
	// fences' checks (which wait for slots behind every fence in
	// progress) it would wait for all of them.
	if f.State == ledger.StateEvicted {
		select {
		case c.heldRunning <- struct{}{}:
			defer func() { <-c.heldRunning }()
		default:
			return false, heldBusyRetry, errHeldBusy
		}
	}
	if f.BootID != "" {
		// A node the API server shows rebooted is left to the unfence
		// (see rebooted); an error reading it keeps the checks going.
		kctx, cancel := context.WithTimeout(ctx, c.cfg.KubeTimeout)
		n, err := cl.Kube.GetNode(kctx, f.Node)
		cancel()
		if err == nil && n.Status.NodeInfo.BootID != "" && n.Status.NodeInfo.BootID != f.BootID {
			c.forgetHeld(f.ID)
			return false, cl.HeldPeriod, nil
		}
	}
	now := c.clk.Now()
	c.mu.Lock()
	e := c.held[f.ID]
	e.last = now
	arrays, all := heldArrays(e, f, now)
	if all {
		e.full = now.Add(heldSpread(f.ID, cl.HeldPeriod))
	}
	e.next = e.full
	c.mu.Unlock()
	// The check of a fence whose pods are still to be evicted ranks like
	// its fence's steps (it comes before the eviction); one of an evicted
	// fence waits behind every fence in progress.
	rank := now
	if f.State != ledger.StateEvicted {
		rank = slotRank(f)
	}
	reads := map[string]arrayclients.Verification{}
	sess := map[string]*sessionRead{}
	var rmu sync.Mutex
	// A read-back that shows the node's access again ends the check at
	// once: the other arrays' reads are cancelled rather than waited for,
	// so an array that does not answer (an outage, each attempt running
	// into the call timeout) cannot hold the cut of access regained on
	// another array past the held period. The fencing step the regression
	// starts reads every array back again.
	rctx, stopReads := context.WithCancel(ctx)
	defer stopReads()
	errs := c.forEachArray(rctx, arrays, func(ctx context.Context, array string) error {
		a, err := c.adapter(array)
		if err != nil {
			return err
		}
		p, _ := planOf(f, array)
		var v arrayclients.Verification
		var sr *sessionRead
		if err := c.readArray(ctx, cl.Name, array, rank, "held-verify", func(ctx context.Context) error {
			var err error
			if v, err = a.Verify(ctx, p); err != nil {
				return err
			}
			sr = c.readSessions(ctx, a, p)
			return nil
		}); err != nil {
			return err
		}
		rmu.Lock()
		reads[array] = v
		if sr != nil {
			sess[array] = sr
		}
		rmu.Unlock()
		if regained(v) {
			stopReads()
		}
		return nil
	})
	if ctx.Err() != nil {
		return false, 0, ctx.Err()
	}
	read := arrays
	if rctx.Err() != nil {
		// Cut short by regained access: an array whose read was
		// cancelled was not read, and its error says nothing of it.
		read = slices.DeleteFunc(slices.Clone(arrays), func(a string) bool {
			_, ok := reads[a]
			return !ok
		})
	}
	c.heldReadErrors(cl, f, read, errs)
	c.watchSessions(cl, f.ID, f.Node, reads, sess)

	var regressed []string
	for _, a := range slices.Sorted(maps.Keys(reads)) {
		if regained(reads[a]) {
			regressed = append(regressed, a)
		}
	}
	if len(regressed) == 0 {
		c.mu.Lock()
		if e := c.held[f.ID]; e != nil {
			e.reported = ""
		}
		c.mu.Unlock()
		return false, c.heldDue(cl, f), nil
	}
	return true, 0, c.regress(ctx, l, cl, f, nv, regressed, reads)
}

// regained reports whether a held read-back shows the node's access on
// the array again (not fenced, or access left).
func regained(v arrayclients.Verification) bool {
	return !v.Fenced || len(accessLeft(v)) > 0
}

// heldReadErrors logs a held read that failed, once per array and episode,
// and a recovered one: a held check that cannot read an array proves
// nothing either way, and the next period reads it again.
func (c *Controller) heldReadErrors(cl *clusterRuntime, f *ledger.Fence, arrays []string, errs map[string]error) {
	c.mu.Lock()
	e := c.held[f.ID]
	if e == nil {
		c.mu.Unlock()
		return
	}
	if e.failing == nil {
		e.failing = map[string]bool{}
	}
	var newFail, recovered []string
	for _, a := range arrays {
		switch err := errs[a]; {
		case err != nil && !e.failing[a]:
			e.failing[a] = true
			newFail = append(newFail, a)
		case err == nil && e.failing[a]:
			delete(e.failing, a)
			recovered = append(recovered, a)
		}
	}
	c.mu.Unlock()
	for _, a := range newFail {
		c.log.Warn("held fence: cannot read the array back; the fence is re-verified when it answers", "cluster", cl.Name,
			"node", f.Node, "fenceID", f.ID, "array", a, "error", errs[a])
	}
	for _, a := range recovered {
		c.log.Info("held fence: the array answers again", "cluster", cl.Name, "node", f.Node, "fenceID", f.ID, "array", a)
	}
}

// regress reports the access a held read-back found and takes the fence
// back to fencing with that read-back recorded, so the arrays are cut
// again and read back before anything else (invariant 1, held).
func (c *Controller) regress(ctx context.Context, l Leadership, cl *clusterRuntime, f *ledger.Fence, nv nodeView,
	arrays []string, reads map[string]arrayclients.Verification) error {
	var parts []string
	for _, a := range arrays {
		parts = append(parts, a+": "+strings.Join(accessLeft(reads[a]), ", "))
	}
	what := strings.Join(parts, "; ")
	note := truncate(fmt.Sprintf("%s (was %s): %s", RegressionNote, f.State, what), 2000)

	c.mu.Lock()
	first := true
	if e := c.held[f.ID]; e != nil {
		first = e.reported != what
		e.reported = what
	}
	c.mu.Unlock()
	if first {
		for _, a := range arrays {
			reason := RegressionEntry
			if slices.ContainsFunc(reads[a].Volumes, func(v arrayclients.VolumeCheck) bool { return v.NodeAccess }) {
				reason = RegressionVolume
			} else if sessionRegressed(reads[a]) {
				reason = RegressionSession
			}
			c.metrics.regressed(cl.Name, a, reason)
		}
		c.log.Error("fence regressed: a fenced node has access again; cutting it again", "cluster", cl.Name,
			"node", f.Node, "fenceID", f.ID, "state", string(f.State), "arrays", arrays, "access", what)
		c.nodeEvent(ctx, cl, f.Node, corev1.EventTypeWarning, "FenceRegressed", f.ID+"/"+strings.Join(arrays, ","),
			truncate(fmt.Sprintf("fence %s: the node has access again after the fence (%s); cutting it again and reading it back",
				f.ID, what), 1000))
	}
	if nv.Paused && f.Origin == ledger.OriginVerdict {
		// The ledger refuses to take a fence on a verdict back to fencing
		// while fencing is paused: the regression is reported and held.
		c.block(cl.Name, f.Node, f.ID, fmt.Sprintf("fencing is paused: fence %s found the node's access again (%s); "+
			"it is cut again when fencing resumes, and the fence takes no further step until then", f.ID, what), arrays)
		return nil
	}
	if g := c.groupVersion(); f.State != ledger.StateFenced && g < ledger.RefenceVersion {
		// Replicas of builds before the rule refuse the step back to
		// fencing from tainted or evicted: reported and held until every
		// voter applies it, as for a grown footprint (refence).
		c.block(cl.Name, f.Node, f.ID, fmt.Sprintf("%v: fence %s found the node's access again (%s); taking it back to "+
			"fencing needs ledger version %d and the group runs %d: it is cut again once every replica is upgraded, and the "+
			"fence takes no further step until then", ErrLedgerVersion, f.ID, what, ledger.RefenceVersion, g), arrays)
		return nil
	}
	if err := c.step(ctx, l, f, ledger.StateFencing, note); err != nil {
		return err
	}
	// Record the read-back that found the access, so the arrays' results
	// show it and the fencing step drives them again. A crash before this
	// is covered by stepFencing, which re-drives every array not read back
	// since the step (regressionStale).
	nf := c.readNode(cl.Name, f.Node).Fence
	if nf == nil || nf.ID != f.ID || nf.State != ledger.StateFencing {
		return nil
	}
	for _, a := range arrays {
		v := reads[a]
		if err := c.record(ctx, l, nf, a, ledger.OpVerify, nil, &v); err != nil {
			return err
		}
	}
	return nil
}

// regressionStale names the arrays a fence sent back to fencing by a held
// read-back must drive again although their results say verified: those
// not read back since that step (the read-back that found the access may
// not have been recorded before a crash or a change of leader).
func regressionStale(f *ledger.Fence) []string {
	var back *ledger.Step
	for i := len(f.Steps) - 1; i >= 0; i-- {
		if f.Steps[i].To == ledger.StateFencing {
			back = &f.Steps[i]
			break
		}
	}
	if back == nil || !strings.HasPrefix(back.Note, RegressionNote) {
		return nil
	}
	var out []string
	for _, p := range f.Plans {
		r := f.Results[p.Array]
		if r != nil && r.Verified && !recordedAfter(r, back) {
			out = append(out, p.Array)
		}
	}
	sort.Strings(out)
	return out
}

// recordedAfter says whether an array's last recorded operation was
// written after a step. Terms order them whatever the leaders' clocks say
// (a log's terms never decrease with its index); within one term the same
// leader wrote both, so its own clock orders them.
func recordedAfter(r *ledger.ArrayResult, s *ledger.Step) bool {
	if r.LastTerm != s.Term {
		return r.LastTerm > s.Term
	}
	return r.LastAt.After(s.At)
}

// Regressions counts a fence's steps back to fencing on a held read-back,
// with the note of the last one (the same on every replica: the ledger's).
func Regressions(f *ledger.Fence) (int, string) {
	n, last := 0, ""
	for _, s := range f.Steps {
		if s.To == ledger.StateFencing && strings.HasPrefix(s.Note, RegressionNote) {
			n++
			last = s.Note
		}
	}
	return n, last
}

// rebooted reports whether the node's boot ID, as the ledger last learned
// it, differs from the one the fence recorded: the node has rebooted, so
// nothing that ran on it before the fence still runs (fenced's NoSchedule
// taint keeps new pods away until the unfence). Its CSI node plugin then
// registers it on the arrays again (csi-powerstore creates a host for a
// node back with a new IP), which the unfence reconciles; the held checks
// stop instead of cutting that registration.
func rebooted(f *ledger.Fence, v nodeView) bool {
	return f.BootID != "" && v.BootID != "" && v.BootID != f.BootID
}
