package invariants

import (
	"fmt"
	"time"

	"github.com/fenced-project/fenced/cluster/ledger"
)

// checkOneActor is rule one-actor (see the package doc).
func (c *checker) checkOneActor() {
	ep := c.h.Epochs
	for i := 1; i < len(ep); i++ {
		prev, cur := ep[i-1], ep[i]
		switch {
		case cur.Term == prev.Term && cur.Replica != prev.Replica:
			c.violate(RuleOneActor, cur.At, cur.Replica, "two leaders in term %d: %s (since %s) and %s (since %s)",
				cur.Term, prev.Replica, stamp(prev.At), cur.Replica, stamp(cur.At))
		case cur.At.Before(prev.At):
			c.violate(RuleEvidence, cur.At, cur.Replica, "epoch of term %d (%s) starts before the epoch of term %d (%s)",
				cur.Term, stamp(cur.At), prev.Term, stamp(prev.At))
		}
	}
	c.checkStepAuthors()
	for _, arr := range sortedKeys(c.in.Arrays) {
		for _, e := range c.in.Arrays[arr] {
			if !e.Changed {
				continue
			}
			if c.opts.isDriver(e.Remote) {
				continue // the CSI driver's write, not fenced's
			}
			c.count(RuleOneActor, 1)
			if len(c.opts.Remotes) == 0 {
				continue
			}
			r := c.opts.replicaOf(e.Remote)
			if r == "" {
				c.violate(RuleOneActor, e.Time, arr, "write %s %s (seq %d) from %s, which is no replica's listener",
					e.Method, e.Path, e.Seq, e.Remote)
				continue
			}
			if msg := c.leaderProblem(r, e.Time); msg != "" {
				c.violate(RuleOneActor, e.Time, arr, "write %s %s (seq %d) by %s %s", e.Method, e.Path, e.Seq, r, msg)
			}
		}
	}
	for _, cl := range sortedKeys(c.in.Kube) {
		for _, ev := range c.in.Kube[cl] {
			r := c.opts.FencedUsers[ev.User.Username]
			if r == "" || !ev.Succeeded() || !isWriteVerb(ev.Verb) || ev.ref().Resource == "events" {
				continue
			}
			c.count(RuleOneActor, 1)
			if msg := c.leaderProblem(r, ev.Received); msg != "" {
				ref := ev.ref()
				c.violate(RuleOneActor, ev.Received, cl, "%s %s %s/%s by %s %s", ev.Verb, ref.Resource, ref.Namespace, ref.Name, r, msg)
			}
		}
	}
}

// leaderProblem explains why replica r may not write at t, or returns "".
func (c *checker) leaderProblem(r string, t time.Time) string {
	ep := c.h.Epochs
	if len(ep) == 0 {
		return "" // nothing to compare with; evidence reports a missing ledger
	}
	i := epochAt(ep, t)
	switch {
	case i < 0:
		return fmt.Sprintf("before the first leadership epoch (%s led from %s)", ep[0].Replica, stamp(ep[0].At))
	case ep[i].Replica == r:
		return ""
	case i > 0 && ep[i-1].Replica == r && t.Before(ep[i].At.Add(c.opts.InFlightGrace)):
		return ""
	}
	return fmt.Sprintf("while %s led (term %d since %s)", ep[i].Replica, ep[i].Term, stamp(ep[i].At))
}

// checkStepAuthors checks that every step was written by its term's leader.
func (c *checker) checkStepAuthors() {
	ep := c.h.Epochs
	if len(ep) == 0 {
		return
	}
	byTerm := map[uint64]ledger.Epoch{}
	for _, e := range ep {
		byTerm[e.Term] = e
	}
	for _, f := range c.h.Fences {
		var lastTerm uint64
		for _, s := range steps(f) {
			c.count(RuleOneActor, 1)
			if s.Term < lastTerm {
				c.violate(RuleOneActor, s.At, f.Cluster+"/"+f.Node, "%s: step to %s in term %d follows a step in term %d",
					f.ID, s.To, s.Term, lastTerm)
			}
			lastTerm = max(lastTerm, s.Term)
			if s.Term < ep[0].Term {
				continue // older than the epochs kept
			}
			e, ok := byTerm[s.Term]
			switch {
			case !ok:
				c.violate(RuleOneActor, s.At, f.Cluster+"/"+f.Node, "%s: step to %s by %s in term %d, which has no leadership epoch",
					f.ID, s.To, s.By, s.Term)
			case e.Replica != s.By:
				c.violate(RuleOneActor, s.At, f.Cluster+"/"+f.Node, "%s: step to %s by %s in term %d, whose leader was %s",
					f.ID, s.To, s.By, s.Term, e.Replica)
			}
		}
	}
}
