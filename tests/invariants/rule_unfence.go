package invariants

import (
	"time"

	"github.com/fenced-project/fenced/cluster/ledger"
)

// reboots returns the times of the recorded reboots of a node.
func (c *checker) reboots(cluster, node string) []time.Time {
	var out []time.Time
	for _, e := range c.in.Timeline {
		if e.Kind == NodeReboot && e.Detail == cluster+"/"+node {
			out = append(out, e.Time)
		}
	}
	return out
}

// checkUnfenceOnce is rule unfence-once (see the package doc).
func (c *checker) checkUnfenceOnce() {
	for _, f := range c.h.Fences {
		subject := f.Cluster + "/" + f.Node
		st := steps(f)
		c.count(RuleUnfenceOnce, 1)
		var restored []ledger.Step
		var firstFencing *ledger.Step
		for i, s := range st {
			switch s.To {
			case ledger.StateRestored:
				restored = append(restored, s)
			case ledger.StateFencing:
				if firstFencing == nil {
					firstFencing = &st[i]
				}
			case ledger.StateUnfenceIntent:
				c.checkUnfenceCause(f, st, s)
			}
		}
		if len(restored) > 1 {
			c.violate(RuleUnfenceOnce, restored[1].At, subject, "%s restored %d times (at %s and %s)",
				f.ID, len(restored), stamp(restored[0].At), stamp(restored[1].At))
		}
		if firstFencing == nil {
			continue // no array was ever changed
		}
		for _, rb := range c.reboots(f.Cluster, f.Node) {
			if rb.Before(firstFencing.At) || !stillFencedAt(st, rb) {
				continue
			}
			if len(restored) == 0 {
				c.violate(RuleUnfenceOnce, rb, subject, "node rebooted at %s while %s was fenced, but the record was never restored (last step %s)",
					stamp(rb), f.ID, st[len(st)-1].To)
			}
			break
		}
	}
}

// stillFencedAt reports whether, at t, the record had entered fencing and
// not yet been restored.
func stillFencedAt(st []ledger.Step, t time.Time) bool {
	fenced := false
	for _, s := range st {
		if s.At.After(t) {
			break
		}
		switch s.To {
		case ledger.StateFencing:
			fenced = true
		case ledger.StateRestored, ledger.StateClosed:
			fenced = false
		}
	}
	return fenced
}

// checkUnfenceCause checks that a recovery not asked for by an operator
// follows a reboot of the node since the fence started, with a new boot ID.
func (c *checker) checkUnfenceCause(f *ledger.Fence, st []ledger.Step, u ledger.Step) {
	subject := f.Cluster + "/" + f.Node
	if f.Origin == ledger.OriginOperator || u.Operator != "" {
		return
	}
	if f.BootID != "" && f.UnfenceBootID != "" && f.BootID == f.UnfenceBootID {
		c.violate(RuleUnfenceOnce, u.At, subject, "%s: recovery started with the boot ID the node had when fenced (%s)",
			f.ID, f.BootID)
	}
	start := st[0].At
	for _, rb := range c.reboots(f.Cluster, f.Node) {
		if !rb.Before(start) && rb.Before(u.At) {
			return
		}
	}
	c.violate(RuleUnfenceOnce, u.At, subject, "%s: recovery started at %s by %s without a reboot of the node since the record opened at %s",
		f.ID, stamp(u.At), u.By, stamp(start))
}
