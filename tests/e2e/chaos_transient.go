package e2e

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fenced-project/fenced/cluster/ledger"
	"github.com/fenced-project/fenced/stonith"
	"github.com/fenced-project/fenced/tests/testbed"
)

// The transient profile's faults that end on their own last between these
// bounds. The upper bound keeps a node's heartbeat age below the product's
// default grace (40 s) with room for the renewal interval before the fault
// (10 s) and the first renewal after it (10 s): a fault that outlasts the
// grace is a failure fenced is right to fence, not a transient one.
const (
	transientMin = 3 * time.Second
	transientMax = 15 * time.Second
	// deadAtLeast is how long a node killed in the transient profile stays
	// dead: past the default grace, so that it is fenced.
	deadAtLeast = 50 * time.Second
	// heldAtLeast is how long a dead node whose fence the run saw held
	// (evicted) stays dead after that, so that the re-grant fault can hit
	// its fence several times; deadAtMost bounds the wait of a dead node
	// that is not seen held (its verdict held back by the faults).
	heldAtLeast = 30 * time.Second
	deadAtMost  = 2 * time.Minute
)

// TransientTiming is the cluster timing of the transient profile: the
// product's defaults (heartbeat grace 40 s, kubelet Leases renewed every
// 10 s) with early verdicts on, but a storm cooldown of 30 s instead of
// 5 minutes: a cut of the management network from most nodes rightly
// trips the storm guard, and its default cooldown would then hold every
// verdict, and so every chance of a false one, for most of the run; and a
// held period of 5 s instead of 30 s, so that every re-grant fault is
// judged against a period shorter than the time its node stays fenced.
func TransientTiming() ClusterTiming {
	return ClusterTiming{EarlyVerdict: EarlyOn, StormCooldown: 30 * time.Second, HeldPeriod: transientHeldPeriod}
}

// sleep waits until next (or end), running the pending heals that fall
// due meanwhile.
func (c *chaos) sleep(next, end time.Time) error {
	next = minTime(next, end)
	for {
		c.runDue()
		wait := time.Until(next)
		if len(c.pending) > 0 {
			wait = min(wait, time.Until(c.pending[0].at))
		}
		if wait <= 0 {
			if time.Now().Before(next) {
				continue
			}
			return nil
		}
		select {
		case <-c.h.ctx.Done():
			return c.h.ctx.Err()
		case <-time.After(wait):
		}
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// runDue runs the pending heals that are due.
func (c *chaos) runDue() {
	now := time.Now()
	for len(c.pending) > 0 && !c.pending[0].at.After(now) {
		p := c.pending[0]
		c.pending = c.pending[1:]
		p.run()
	}
}

// later schedules a heal after a random duration between transientMin and
// transientMax.
func (c *chaos) later(run func()) time.Duration {
	d := transientMin + time.Duration(c.rng.Int64N(int64(transientMax-transientMin)))
	c.pending = append(c.pending, pendingHeal{at: time.Now().Add(d), run: run})
	slices.SortFunc(c.pending, func(a, b pendingHeal) int { return a.at.Compare(b.at) })
	return d.Round(100 * time.Millisecond)
}

// nodeDown logs what happens to a node, makes it happen (do) and records
// the node as down in state from now.
func (c *chaos) nodeDown(n, what string, do func(string), state testbed.NodeState) {
	c.logf("node %s %s", n, what)
	do(n)
	c.nodeState[n] = state
	c.markDead(n)
}

// nodeUp logs a node coming back, brings it back (do) and records it up.
func (c *chaos) nodeUp(n, what string, do func(string)) {
	c.logf("node %s %s", n, what)
	do(n)
	c.nodeState[n] = testbed.NodeUp
	c.markUp(n)
}

func (c *chaos) markDead(node string) {
	c.dead[node] = append(c.dead[node], window{from: time.Now()})
}

func (c *chaos) markUp(node string) {
	ws := c.dead[node]
	if len(ws) > 0 && ws[len(ws)-1].to.IsZero() {
		ws[len(ws)-1].to = time.Now()
	}
}

// wasDead reports whether the node was killed (or hung) at t.
func (c *chaos) wasDead(node string, t time.Time) bool {
	for _, w := range c.dead[node] {
		if !t.Before(w.from) && (w.to.IsZero() || t.Before(w.to)) {
			return true
		}
	}
	return false
}

// stepTransient injects or heals one fault of the transient profile: the
// faults that must never fence a node — replica kill -9 and partitions,
// cuts of a replica from the apiserver, apiserver restarts and outages,
// array API outages, kubelet restarts and cuts of the management network
// from most nodes (the last two end on their own within transientMax,
// their nodes' storage paths up all along) — and real node deaths and
// reboots, so that verdicts, early or at the grace, are taken too; while
// a dead node's fence is held, the emulated driver publishes one of its
// volumes to it again (regrant), which fenced must cut within its held
// period.
func (c *chaos) stepTransient() {
	var acts actions
	add := acts.add
	h := c.h
	down := c.nodesIn(testbed.NodeKilled, testbed.NodeHung)
	var up []string
	for _, n := range c.nodesIn(testbed.NodeUp) {
		if !c.kubeletDown[n] {
			up = append(up, n)
		}
	}
	quiet := len(c.pending) == 0 && len(down) == 0
	c.groupFaults(add, 2)
	// An outage blocks the schedule while it lasts, so it starts only
	// when nothing is due to heal meanwhile.
	add(quiet, 1, func() {
		d := transientMin + time.Duration(c.rng.Int64N(int64(transientMax-transientMin)))
		c.logf("apiserver outage for %s", d.Round(100*time.Millisecond))
		if err := h.APIServerOutage(d); err != nil {
			c.logf("  outage failed: %v", err)
		}
	})
	add(len(up) > 0, 4, func() {
		n := c.pick(up)
		c.kubeletDown[n] = true
		h.StopKubelet(n)
		d := c.later(func() {
			c.logf("node %s: kubelet back", n)
			h.StartKubelet(n)
			c.kubeletDown[n] = false
		})
		c.logf("node %s: kubelet restart (%s)", n, d)
	})
	add(quiet && len(up) > 1, 1, func() {
		cut := slices.Clone(up)
		c.rng.Shuffle(len(cut), func(i, j int) { cut[i], cut[j] = cut[j], cut[i] })
		cut = cut[:len(cut)-1] // most nodes: every node up but one
		slices.Sort(cut)
		for _, n := range cut {
			c.kubeletDown[n] = true
			h.StopKubelet(n)
		}
		d := c.later(func() {
			c.logf("management network back for %s", strings.Join(cut, ", "))
			for _, n := range cut {
				h.StartKubelet(n)
				c.kubeletDown[n] = false
			}
		})
		c.logf("management network cut from %s (%s)", strings.Join(cut, ", "), d)
	})
	add(len(down) < c.cfg.MaxNodesDown && len(up) > 0 && len(c.pending) == 0, 3, func() {
		n := c.pick(up)
		c.recordFootprint(n)
		c.nodeDown(n, "dies", h.KillNode, testbed.NodeKilled)
	})
	// A dead node whose fence is held (evicted) gets one of its volumes
	// published to it again by the emulated driver, as the driver and the
	// attacher's reconcile do (see regrant).
	if targets := c.regrantTargets(down); len(targets) > 0 {
		add(true, 8, func() { c.regrant(c.pick(targets)) })
	}
	// A dead node stays dead past its grace, so that its verdict, early
	// or at the grace, is taken before it comes back, and once its fence
	// is seen held, for heldAtLeast more (at most deadAtMost in all when
	// it is not).
	var longDead []string
	for _, n := range down {
		ws := c.dead[n]
		if len(ws) == 0 {
			continue
		}
		dead := time.Since(ws[len(ws)-1].from)
		held, seen := c.heldSince[n]
		if dead > deadAtLeast && ((seen && time.Since(held) > heldAtLeast) || dead > deadAtMost) {
			longDead = append(longDead, n)
		}
	}
	add(len(longDead) > 0, 4, func() {
		c.nodeUp(c.pick(longDead), "reboots", h.RebootNode)
	})
	acts.runOne(c.rng)
}

// classify counts the fences opened on early verdicts and at the grace
// and, in the transient profile, lists every fence of a node that was not
// dead when it was opened.
func (c *chaos) classify(res *ChaosResult, fences []*ledger.Fence) {
	for _, f := range fences {
		if f.Origin != ledger.OriginVerdict {
			continue
		}
		if strings.Contains(f.Reason, stonith.EarlyReason) {
			res.EarlyVerdicts++
		} else {
			res.GraceVerdicts++
		}
		if c.cfg.Transient && !c.wasDead(f.Node, f.OpenedAt) {
			res.FalseFences = append(res.FalseFences, fmt.Sprintf("%s of %s opened %s (%s)",
				f.ID, f.Node, f.OpenedAt.Format("15:04:05.000"), f.Reason))
		}
	}
}
