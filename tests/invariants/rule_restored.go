package invariants

import (
	"github.com/fenced-project/fenced/cluster/ledger"
)

// stillFenced reports whether the record's last step leaves the node
// fenced, or possibly fenced, on its arrays at the end of the run.
func stillFenced(f *ledger.Fence) bool {
	st := steps(f)
	if len(st) == 0 {
		return false
	}
	switch st[len(st)-1].To {
	case ledger.StateIntent, ledger.StateRestored, ledger.StateUntainted, ledger.StateClosed, ledger.StateAborted:
		return false
	}
	return true
}

// checkArrayRestored is rule array-restored (see the package doc).
func (c *checker) checkArrayRestored() {
	for _, arr := range sortedKeys(c.in.ArrayEnd) {
		start, ok := c.in.ArrayStart[arr]
		if !ok {
			c.violate(RuleEvidence, timeZero, arr, "an end state dump but no start state dump")
			continue
		}
		diffs, err := DiffStates(start, c.in.ArrayEnd[arr], c.opts.SignalKeys)
		if err != nil {
			c.violate(RuleEvidence, timeZero, arr, "compare state dumps: %v", err)
			continue
		}
		c.count(RuleArrayRestored, 1)
		var fencedTokens []nodeTokens
		for _, nt := range c.tokensOnArray(arr) {
			for _, f := range c.h.fencesOf(nt.cluster, nt.node) {
				if stillFenced(f) {
					fencedTokens = append(fencedTokens, nt)
					break
				}
			}
		}
		for _, d := range diffs {
			text := d.Path + " " + d.Before + " " + d.After
			explained := false
			for _, nt := range fencedTokens {
				if mentionsAny(text, nt.tokens) {
					explained = true
					break
				}
			}
			if !explained {
				c.violate(RuleArrayRestored, timeZero, arr, "state differs from the start at %s, and no node still fenced explains it", d)
			}
		}
	}
}
