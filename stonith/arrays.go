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

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/cluster/ledger"
)

// errBlocked marks a reconcile that cannot go on until an array (or the
// node) changes; it is retried with backoff and logged once per episode.
var errBlocked = errors.New("blocked")

// permanent reports errors that retrying the same call cannot cure.
func permanent(err error) bool {
	return errors.Is(err, arrayclients.ErrPlanMismatch) || errors.Is(err, arrayclients.ErrAmbiguousIdentity) ||
		errors.Is(err, arrayclients.ErrNoIdentity)
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
// The caller holds one of the array's slots (see arraySlots).
func (c *Controller) callArray(ctx context.Context, step string, fn func(ctx context.Context) error) error {
	cctx, cancel := context.WithTimeout(ctx, c.cfg.ArrayTimeout)
	defer cancel()
	start := c.clk.Now()
	err := fn(cctx)
	c.metrics.stepDuration(step, c.clk.Since(start))
	return err
}

// readArray is callArray for a read (plan, read-back) in one of the
// array's slots; the error is the call's, or why no slot was had.
func (c *Controller) readArray(ctx context.Context, array, step string, fn func(ctx context.Context) error) error {
	var callErr error
	if err := c.slots.do(ctx, array, func() error {
		callErr = c.callArray(ctx, step, fn)
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
func (c *Controller) writeArray(ctx context.Context, l Leadership, array, step string, fn func(ctx context.Context) error) (callErr, notLeader error) {
	notLeader = c.slots.do(ctx, array, func() error {
		if err := c.verifyLeader(ctx, l); err != nil {
			return err
		}
		callErr = c.callArray(ctx, step, fn)
		return nil
	})
	return callErr, notLeader
}

// forEachArray runs fn for each array with bounded concurrency and returns
// the errors by array.
func (c *Controller) forEachArray(ctx context.Context, arrays []string, fn func(ctx context.Context, array string) error) map[string]error {
	sem := make(chan struct{}, c.cfg.ArrayConcurrency)
	var mu sync.Mutex
	errs := map[string]error{}
	var wg sync.WaitGroup
	for _, a := range arrays {
		wg.Go(func() {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				mu.Lock()
				errs[a] = ctx.Err()
				mu.Unlock()
				return
			}
			defer func() { <-sem }()
			if err := fn(ctx, a); err != nil {
				mu.Lock()
				errs[a] = err
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errs
}

func (c *Controller) adapter(name string) (Array, error) {
	a := c.cfg.Arrays[name]
	if a == nil {
		return nil, fmt.Errorf("array %s is not configured on this replica", name)
	}
	return a, nil
}

// planArray reads what fencing the identity removes (read-only), retrying.
func (c *Controller) planArray(ctx context.Context, id arrayclients.Identity) (arrayclients.Plan, error) {
	a, err := c.adapter(id.Array)
	if err != nil {
		return arrayclients.Plan{}, err
	}
	var p arrayclients.Plan
	backoff := c.cfg.ArrayBackoff
	for attempt := 1; ; attempt++ {
		err = c.readArray(ctx, id.Array, "plan", func(ctx context.Context) error {
			var err error
			p, err = a.Plan(ctx, id, nil)
			return err
		})
		if err == nil || permanent(err) || attempt >= c.cfg.ArrayAttempts || ctx.Err() != nil {
			break
		}
		if c.sleep(ctx, backoff) != nil {
			break
		}
		backoff *= 2
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

// unplanned lists the identity arrays that have no plan in the record.
func unplanned(f *ledger.Fence) []string {
	var out []string
	for a := range f.Identities {
		if _, ok := planOf(f, a); !ok {
			out = append(out, a)
		}
	}
	sort.Strings(out)
	return out
}

// amendPlans plans the identity arrays that have none yet and commits the
// plans that could be read. It returns the errors of those that could not.
func (c *Controller) amendPlans(ctx context.Context, l Leadership, f *ledger.Fence) (map[string]error, error) {
	missing := unplanned(f)
	if len(missing) == 0 {
		return nil, nil
	}
	var mu sync.Mutex
	var plans []arrayclients.Plan
	errs := c.forEachArray(ctx, missing, func(ctx context.Context, array string) error {
		p, err := c.planArray(ctx, f.Identities[array])
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
		if err := c.commit(ctx, l, &ledger.AmendFence{Meta: c.meta(l), Cluster: f.Cluster, Node: f.Node,
			FenceID: f.ID, Expect: f.State, Plans: plans}); err != nil {
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
	write    func(ctx context.Context, a Array, p arrayclients.Plan) error
	// done reports whether the read-back shows the goal reached, and
	// otherwise what is still wrong.
	done func(v arrayclients.Verification) (bool, string)
}

var (
	fenceDirection = arrayDirection{
		verb: "fence", change: "apply", readBack: "verify", point: PointApplied,
		changeOp: ledger.OpApply, readOp: ledger.OpVerify,
		write: func(ctx context.Context, a Array, p arrayclients.Plan) error { return a.Apply(ctx, p) },
		done: func(v arrayclients.Verification) (bool, string) {
			return v.Fenced, "read-back shows access remaining: " + strings.Join(v.Remaining, ", ")
		},
	}
	restoreDirection = arrayDirection{
		verb: "restore", change: "undo", readBack: "verify-restore", point: PointUndone,
		changeOp: ledger.OpUndo, readOp: ledger.OpVerifyRestore,
		write: func(ctx context.Context, a Array, p arrayclients.Plan) error {
			return a.Undo(ctx, p, arrayclients.RestoreScope{})
		},
		done: func(v arrayclients.Verification) (bool, string) {
			return v.Restored, "read-back shows entries missing: " + strings.Join(v.Missing, ", ")
		},
	}
)

// fenceArray applies the plan on one array and reads it back, recording
// every outcome, until the read-back shows the node fenced or the attempts
// run out. Each apply is preceded by a leadership check.
func (c *Controller) fenceArray(ctx context.Context, l Leadership, f *ledger.Fence, array string) error {
	return c.driveArray(ctx, l, f, array, fenceDirection)
}

// restoreArray undoes the plan on one array and reads it back, recording
// every outcome, until the read-back shows every entry restored.
func (c *Controller) restoreArray(ctx context.Context, l Leadership, f *ledger.Fence, array string) error {
	return c.driveArray(ctx, l, f, array, restoreDirection)
}

// driveArray writes the plan in one direction and reads it back, recording
// every outcome in the ledger, until the read-back shows the goal reached or
// the attempts run out. Each write is preceded by a leadership check.
func (c *Controller) driveArray(ctx context.Context, l Leadership, f *ledger.Fence, array string, d arrayDirection) error {
	p, _ := planOf(f, array)
	a, err := c.adapter(array)
	if err != nil {
		return err
	}
	backoff := c.cfg.ArrayBackoff
	for attempt := 1; ; attempt++ {
		writeErr, err := c.writeArray(ctx, l, array, d.change, func(ctx context.Context) error { return d.write(ctx, a, p) })
		if err != nil {
			return err
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
			verr := c.readArray(ctx, array, d.readBack, func(ctx context.Context) error {
				var err error
				v, err = a.Verify(ctx, p)
				return err
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
		if err := c.sleep(ctx, backoff); err != nil {
			return err
		}
		backoff *= 2
	}
}

// allVerified reports whether every identity array and every planned array
// has a verified fence read-back (the ledger's own rule for fenced).
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
