package stonith

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/cluster/ledger"
)

// errBlocked marks a reconcile that cannot go on until an array (or the
// node) changes; it is retried with backoff and logged once per episode.
var errBlocked = errors.New("blocked")

// permanent reports errors that retrying the same call cannot cure.
func permanent(err error) bool {
	return errors.Is(err, arrayclients.ErrPlanMismatch) || errors.Is(err, arrayclients.ErrAmbiguousIdentity) ||
		errors.Is(err, arrayclients.ErrNoIdentity) || errors.Is(err, arrayclients.ErrIdentityConflict)
}

// sleep waits d or until ctx ends.
func (c *Controller) sleep(ctx context.Context, d time.Duration) error {
	t := c.clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C():
		return nil
	}
}

// callArray runs one array call under the per-call deadline and times it.
// The caller holds one of the array's slots (see arraySlots); the call may
// take the array's free slots for requests it runs beside its own
// (arrayclients.SpareCalls).
func (c *Controller) callArray(ctx context.Context, cluster, array, step string, fn func(ctx context.Context) error) error {
	ctx = arrayclients.WithSpareCalls(ctx, func() (func(), bool) { return c.slots.spare(array) })
	cctx, cancel := context.WithTimeout(ctx, c.cfg.ArrayTimeout)
	defer cancel()
	start := c.clk.Now()
	err := fn(cctx)
	c.metrics.stepDuration(cluster, step, c.clk.Since(start))
	return err
}

// readArray is callArray for a read (plan, read-back) in one of the
// array's slots; the error is the call's, or why no slot was had.
func (c *Controller) readArray(ctx context.Context, cluster, array string, rank time.Time, step string,
	fn func(ctx context.Context) error) error {
	var callErr error
	if err := c.slots.do(ctx, array, rank, func() error {
		callErr = c.callArray(ctx, cluster, array, step, fn)
		return nil
	}); err != nil {
		return err
	}
	return callErr
}

// writeArray checks leadership and then makes one write call, both in one
// of the array's slots, so the write starts at once after the check
// however long the slot took. notLeader is the leadership check's error
// (the caller stops); callErr is the write's.
func (c *Controller) writeArray(ctx context.Context, l Leadership, cluster, array string, rank time.Time, step string,
	fn func(ctx context.Context) error) (callErr, notLeader error) {
	notLeader = c.slots.do(ctx, array, rank, func() error {
		if err := c.verifyLeader(ctx, l); err != nil {
			return err
		}
		callErr = c.callArray(ctx, cluster, array, step, fn)
		return nil
	})
	return callErr, notLeader
}

// forEachArray runs fn for each array with bounded concurrency and returns
// the errors by array. An array whose turn comes after ctx ended is not
// started; its error is ctx's.
func (c *Controller) forEachArray(ctx context.Context, arrays []string, fn func(ctx context.Context, array string) error) map[string]error {
	var mu sync.Mutex
	errs := map[string]error{}
	var g errgroup.Group
	g.SetLimit(c.cfg.ArrayConcurrency)
	for _, a := range arrays {
		g.Go(func() error {
			err := ctx.Err()
			if err == nil {
				err = fn(ctx, a)
			}
			if err != nil {
				mu.Lock()
				errs[a] = err
				mu.Unlock()
			}
			return nil // errors are reported by array, not to the group
		})
	}
	_ = g.Wait() // every function returns nil
	return errs
}

// arrayBackoff is the wait between the attempts of one array call within a
// reconcile: ArrayBackoff, doubled after each attempt, each wait lengthened
// by up to a tenth at random so calls that failed together do not retry in
// step. The attempt count (ArrayAttempts) ends the retries, not the backoff.
func (c *Controller) arrayBackoff() wait.Backoff {
	return wait.Backoff{Duration: c.cfg.ArrayBackoff, Factor: 2, Jitter: 0.1, Steps: c.cfg.ArrayAttempts}
}

func (c *Controller) adapter(name string) (Array, error) {
	a := c.cfg.Arrays[name]
	if a == nil {
		return nil, fmt.Errorf("array %s is not configured on this replica", name)
	}
	return a, nil
}

// slotRank is the rank of a record's array calls among those waiting for
// an array's slots (see arraySlots): a fence ranks by when it opened, an
// unfence by when its unfence began, so a storm's fences finish in the
// order they opened.
func slotRank(f *ledger.Fence) time.Time {
	if f.Kind == ledger.KindUnfence {
		for i := len(f.Steps) - 1; i >= 0; i-- {
			if f.Steps[i].To == ledger.StateUnfenceIntent {
				return f.Steps[i].At
			}
		}
	}
	return f.OpenedAt
}

// planArray reads what fencing the identity removes (read-only), with the
// cut of each of the node's footprint volumes on the array, retrying.
func (c *Controller) planArray(ctx context.Context, cluster string, rank time.Time, id arrayclients.Identity,
	vols []arrayclients.VolumeRef) (arrayclients.Plan, error) {
	a, err := c.adapter(id.Array)
	if err != nil {
		return arrayclients.Plan{}, err
	}
	var p arrayclients.Plan
	backoff := c.arrayBackoff()
	for attempt := 1; ; attempt++ {
		err = c.readArray(ctx, cluster, id.Array, rank, "plan", func(ctx context.Context) error {
			var err error
			p, err = a.Plan(ctx, id, vols)
			return err
		})
		if err == nil || permanent(err) || attempt >= c.cfg.ArrayAttempts || ctx.Err() != nil {
			break
		}
		if c.sleep(ctx, backoff.Step()) != nil {
			break
		}
	}
	if err != nil {
		return arrayclients.Plan{}, fmt.Errorf("plan fence of %s on array %s: %w", id.Node, id.Array, err)
	}
	if p.Array != id.Array || p.Identity.Node != id.Node {
		return arrayclients.Plan{}, fmt.Errorf("plan fence of %s on array %s: %w: plan names array %q node %q",
			id.Node, id.Array, arrayclients.ErrPlanMismatch, p.Array, p.Identity.Node)
	}
	return p, nil
}

// planned returns the plan of an array in the record.
func planOf(f *ledger.Fence, array string) (arrayclients.Plan, bool) {
	for _, p := range f.Plans {
		if p.Array == array {
			return p, true
		}
	}
	return arrayclients.Plan{}, false
}

// toPlan lists the arrays whose plan the record lacks or must replace:
// its identity arrays and footprint arrays without a plan, and arrays
// whose plan has no cut for one of the footprint volumes there (a volume
// attached since the plan, or a plan written before footprints).
func toPlan(f *ledger.Fence) []string {
	var out []string
	for _, a := range footprintArrays(f) {
		if _, ok := f.Confirmed(a); ok {
			continue // an operator confirmed the node cannot write there
		}
		p, ok := planOf(f, a)
		if !ok {
			out = append(out, a)
			continue
		}
		for _, v := range footprintVols(f, a) {
			if !slices.ContainsFunc(p.Volumes, func(c arrayclients.VolumeCut) bool { return c.Volume == v.Volume }) {
				out = append(out, a)
				break
			}
		}
	}
	return out
}

// amendPlans plans the arrays toPlan names and commits the plans that
// could be read, replacing (replanning) those of arrays already operated
// on. It returns the errors of those that could not be read.
func (c *Controller) amendPlans(ctx context.Context, l Leadership, f *ledger.Fence) (map[string]error, error) {
	missing := toPlan(f)
	if len(missing) == 0 {
		return nil, nil
	}
	var mu sync.Mutex
	var plans []arrayclients.Plan
	errs := c.forEachArray(ctx, missing, func(ctx context.Context, array string) error {
		p, err := c.planArray(ctx, f.Cluster, slotRank(f), f.Identities[array], footprintVols(f, array))
		if err != nil {
			return err
		}
		mu.Lock()
		plans = append(plans, p)
		mu.Unlock()
		return nil
	})
	if len(plans) > 0 {
		sort.Slice(plans, func(i, j int) bool { return plans[i].Array < plans[j].Array })
		replan := false
		for _, p := range plans {
			if r := f.Results[p.Array]; r != nil && r.Attempts > 0 {
				replan = true
			}
		}
		if err := c.commit(ctx, l, &ledger.AmendFence{Meta: c.meta(l), Cluster: f.Cluster, Node: f.Node,
			FenceID: f.ID, Expect: f.State, Plans: plans, Replan: replan}); err != nil {
			return errs, fmt.Errorf("fence %s: add plans: %w", f.ID, err)
		}
	}
	return errs, nil
}

// arrayDirection is one way of driving a plan on an array: the fence
// (apply, then read back until fenced) or the recovery (undo, then read back
// until restored). Both directions share driveArray, so the leadership check
// before every write, the ledger record of every outcome and the retry rules
// are the same for both.
type arrayDirection struct {
	verb     string // "fence" or "restore", for errors
	change   string // metrics/log name of the write: "apply" or "undo"
	readBack string // metrics/log name of the read: "verify" or "verify-restore"
	point    Point  // test hook after the write
	changeOp ledger.ArrayOp
	readOp   ledger.ArrayOp
	// plans are the plans of the array the direction drives: the current
	// one to fence; every one (superseded first) to restore.
	plans func(f *ledger.Fence, array string) []arrayclients.Plan
	write func(ctx context.Context, a Array, p arrayclients.Plan, scope arrayclients.RestoreScope) error
	read  func(ctx context.Context, a Array, p arrayclients.Plan, scope arrayclients.RestoreScope) (arrayclients.Verification, error)
	// done reports whether the read-back shows the goal reached, and
	// otherwise what is still wrong.
	done func(v arrayclients.Verification) (bool, string)
}

var (
	fenceDirection = arrayDirection{
		verb: "fence", change: "apply", readBack: "verify", point: PointApplied,
		changeOp: ledger.OpApply, readOp: ledger.OpVerify,
		plans: func(f *ledger.Fence, array string) []arrayclients.Plan {
			p, _ := planOf(f, array)
			return []arrayclients.Plan{p}
		},
		write: func(ctx context.Context, a Array, p arrayclients.Plan, _ arrayclients.RestoreScope) error {
			return a.Apply(ctx, p)
		},
		read: func(ctx context.Context, a Array, p arrayclients.Plan, _ arrayclients.RestoreScope) (arrayclients.Verification, error) {
			return a.Verify(ctx, p)
		},
		done: func(v arrayclients.Verification) (bool, string) {
			return v.Fenced, "read-back shows access remaining: " + strings.Join(accessLeft(v), ", ")
		},
	}
	restoreDirection = arrayDirection{
		verb: "restore", change: "undo", readBack: "verify-restore", point: PointUndone,
		changeOp: ledger.OpUndo, readOp: ledger.OpVerifyRestore,
		plans: func(f *ledger.Fence, array string) []arrayclients.Plan {
			var out []arrayclients.Plan
			for _, p := range f.Superseded {
				if p.Array == array {
					out = append(out, p)
				}
			}
			if p, ok := planOf(f, array); ok {
				out = append(out, p)
			}
			return out
		},
		write: func(ctx context.Context, a Array, p arrayclients.Plan, scope arrayclients.RestoreScope) error {
			return a.Undo(ctx, p, scope)
		},
		read: func(ctx context.Context, a Array, p arrayclients.Plan, scope arrayclients.RestoreScope) (arrayclients.Verification, error) {
			return a.VerifyRestore(ctx, p, scope)
		},
		done: func(v arrayclients.Verification) (bool, string) {
			return v.Restored, restoreShortfall(v)
		},
	}
)

// restoreShortfall says why a restore read-back is not done: entries that
// are not back, and access the node must not have (a volume that moved,
// or that Kubernetes no longer wants on it).
func restoreShortfall(v arrayclients.Verification) string {
	var parts []string
	if len(v.Missing) > 0 {
		parts = append(parts, "entries missing: "+strings.Join(v.Missing, ", "))
	}
	if len(v.Remaining) > 0 {
		parts = append(parts, "access the node must not have: "+strings.Join(v.Remaining, ", "))
	}
	if len(parts) == 0 {
		return "read-back does not show the node restored"
	}
	return "read-back shows " + strings.Join(parts, "; ")
}

// accessLeft names what a fence read-back still shows: entries, and
// footprint volumes the node still reaches.
func accessLeft(v arrayclients.Verification) []string {
	out := slices.Clone(v.Remaining)
	for _, vc := range v.Volumes {
		if vc.NodeAccess {
			out = append(out, "volume "+vc.Volume)
		}
	}
	return out
}

// fenceArray applies the plan on one array and reads it back, recording
// every outcome, until the read-back shows the node fenced or the attempts
// run out. Each apply is preceded by a leadership check.
func (c *Controller) fenceArray(ctx context.Context, l Leadership, f *ledger.Fence, array string) error {
	return c.driveArray(ctx, l, f, array, fenceDirection)
}

// restoreArray undoes the array's plans (a superseded plan's removals
// too) within the record's restore scope and reads them back, recording
// every outcome, until the read-back shows everything restored.
func (c *Controller) restoreArray(ctx context.Context, l Leadership, f *ledger.Fence, array string) error {
	return c.driveArray(ctx, l, f, array, restoreDirection)
}

// mergeReadBacks folds the read-backs of an array's plans into one: done
// only when every one is, with every entry and volume they name.
func mergeReadBacks(vs []arrayclients.Verification) arrayclients.Verification {
	if len(vs) == 1 {
		return vs[0]
	}
	out := arrayclients.Verification{Fenced: true, Restored: true}
	for _, v := range vs {
		out.Fenced = out.Fenced && v.Fenced
		out.Restored = out.Restored && v.Restored
		out.Remaining = append(out.Remaining, v.Remaining...)
		out.Missing = append(out.Missing, v.Missing...)
		out.Volumes = append(out.Volumes, v.Volumes...)
		if v.CheckedAt.After(out.CheckedAt) {
			out.CheckedAt = v.CheckedAt
		}
	}
	return out
}

// driveArray writes the array's plans in one direction and reads them
// back, recording every outcome in the ledger, until the read-back shows
// the goal reached or the attempts run out. Each write is preceded by a
// leadership check.
func (c *Controller) driveArray(ctx context.Context, l Leadership, f *ledger.Fence, array string, d arrayDirection) error {
	plans := d.plans(f, array)
	scope := f.Restore[array]
	a, err := c.adapter(array)
	if err != nil {
		return err
	}
	rank := slotRank(f)
	backoff := c.arrayBackoff()
	for attempt := 1; ; attempt++ {
		if d.changeOp == ledger.OpUndo {
			// Never a write on an array whose restore an operator
			// abandoned meanwhile (read from the ledger, not from f).
			if c.abandoned(f, array) {
				return errAbandoned
			}
			// Never a write with a scope Kubernetes no longer has.
			if err := c.scopeCurrent(f, array); err != nil {
				return err
			}
			// What the node is known by now: a node back under a new
			// name (a new IP on PowerStore) is recognised by it.
			scope.Learned = c.learnedIdentity(f.Cluster, f.Node, array)
		}
		writeErr, err := c.writeArray(ctx, l, f.Cluster, array, rank, d.change, func(ctx context.Context) error {
			if d.changeOp == ledger.OpUndo && c.abandoned(f, array) {
				// Read again once the slot and the leadership check
				// are had, right before the write: an abandonment
				// committed while this attempt waited for them.
				return errAbandoned
			}
			for _, p := range plans {
				if err := d.write(ctx, a, p, scope); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		if errors.Is(writeErr, errAbandoned) {
			return errAbandoned
		}
		if err := c.at(d.point); err != nil {
			return err
		}
		if err := c.record(ctx, l, f, array, d.changeOp, writeErr, nil); err != nil {
			return err
		}
		err = writeErr
		if err == nil {
			var v arrayclients.Verification
			verr := c.readArray(ctx, f.Cluster, array, rank, d.readBack, func(ctx context.Context) error {
				var vs []arrayclients.Verification
				for _, p := range plans {
					pv, err := d.read(ctx, a, p, scope)
					if err != nil {
						return err
					}
					vs = append(vs, pv)
				}
				v = mergeReadBacks(vs)
				return nil
			})
			if err := c.record(ctx, l, f, array, d.readOp, verr, &v); err != nil {
				return err
			}
			if verr != nil {
				err = fmt.Errorf("read back: %w", verr)
			} else if ok, wrong := d.done(v); ok {
				return nil
			} else {
				err = errors.New(wrong)
			}
		}
		if permanent(err) || attempt >= c.cfg.ArrayAttempts || ctx.Err() != nil {
			return fmt.Errorf("%s %s on array %s: %w", d.verb, f.Node, array, err)
		}
		if err := c.sleep(ctx, backoff.Step()); err != nil {
			return err
		}
	}
}

// abandoned reports whether an operator abandoned the restore of array for
// fence f, read from the ledger (not from f, which may be older).
func (c *Controller) abandoned(f *ledger.Fence, array string) bool {
	cur := c.readNode(f.Cluster, f.Node).Fence
	if cur == nil || cur.ID != f.ID {
		return false
	}
	_, ok := cur.AbandonedRestore(array)
	return ok
}

// allVerified reports whether every identity array and every planned array
// has a verified fence read-back or an operator's confirmation (the
// ledger's own rule for fenced).
func allVerified(f *ledger.Fence) (bool, []string) {
	arrays := []string{}
	for a := range f.Identities {
		arrays = append(arrays, a)
	}
	for _, p := range f.Plans {
		arrays = append(arrays, p.Array)
	}
	slices.Sort(arrays)
	var missing []string
	for _, a := range slices.Compact(arrays) {
		if _, ok := f.Confirmed(a); ok {
			continue // the ledger's rule from version 5 (ConfirmArray)
		}
		_, planned := planOf(f, a)
		if r := f.Results[a]; !planned || r == nil || !r.Verified {
			missing = append(missing, a)
		}
	}
	return len(missing) == 0 && f.IdentitiesKnown, missing
}

func errorsByArray(errs map[string]error) (names []string, text string) {
	for a := range errs {
		names = append(names, a)
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names))
	for _, a := range names {
		parts = append(parts, fmt.Sprintf("%s: %v", a, errs[a]))
	}
	return names, strings.Join(parts, "; ")
}

func hasStop(errs map[string]error) bool {
	for _, err := range errs {
		if errors.Is(err, errStopped) {
			return true
		}
	}
	return false
}
