package invariants

import (
	"time"

	"github.com/fenced-project/fenced/cluster/ledger"
)

var timeZero time.Time

// interval is a span of the timeline; To is zero while still open.
type interval struct {
	From, To time.Time
}

func (iv interval) contains(t time.Time) bool {
	return !t.Before(iv.From) && (iv.To.IsZero() || !t.After(iv.To))
}

// intervals pairs start and end events by Detail.
func intervals(tl []Event, startKind, endKind string) map[string][]interval {
	out := map[string][]interval{}
	open := map[string]time.Time{}
	for _, e := range tl {
		switch e.Kind {
		case startKind:
			if _, ok := open[e.Detail]; !ok {
				open[e.Detail] = e.Time
			}
		case endKind:
			if from, ok := open[e.Detail]; ok {
				out[e.Detail] = append(out[e.Detail], interval{From: from, To: e.Time})
				delete(open, e.Detail)
			}
		}
	}
	for d, from := range open {
		out[d] = append(out[d], interval{From: from})
	}
	return out
}

// checkNoActionOnDoubt is rule no-action-on-doubt (see the package doc).
func (c *checker) checkNoActionOnDoubt() {
	storms := intervals(c.in.Timeline, StormStart, StormEnd)
	cuts := intervals(c.in.Timeline, APICutStart, APICutEnd)
	downs := intervals(c.in.Timeline, APIDownStart, APIDownEnd)
	slack := c.opts.DetectionSlack
	for _, f := range c.h.Fences {
		subject := f.Cluster + "/" + f.Node
		for _, s := range steps(f) {
			if s.To != ledger.StateFencing {
				continue
			}
			c.count(RuleNoActionOnDoubt, 1)
			if f.Origin != ledger.OriginOperator {
				for _, iv := range storms[f.Cluster] {
					if iv.contains(s.At) {
						c.violate(RuleNoActionOnDoubt, s.At, subject, "%s entered fencing at %s during a storm of cluster %s (from %s)",
							f.ID, stamp(s.At), f.Cluster, stamp(iv.From))
					}
				}
			}
			for _, iv := range cuts[s.By+"/"+f.Cluster] {
				if (interval{From: iv.From.Add(slack), To: iv.To}).contains(s.At) {
					c.violate(RuleNoActionOnDoubt, s.At, subject, "%s entered fencing at %s by %s, which had lost the apiserver of %s at %s",
						f.ID, stamp(s.At), s.By, f.Cluster, stamp(iv.From))
				}
			}
			for _, iv := range downs[f.Cluster] {
				if (interval{From: iv.From.Add(slack), To: iv.To}).contains(s.At) {
					c.violate(RuleNoActionOnDoubt, s.At, subject, "%s entered fencing at %s while the apiserver of %s was down (since %s)",
						f.ID, stamp(s.At), f.Cluster, stamp(iv.From))
				}
			}
		}
	}
}

// checkDryRun is rule dry-run (see the package doc).
func (c *checker) checkDryRun() {
	if !c.in.DryRun {
		return
	}
	for _, arr := range sortedKeys(c.in.Arrays) {
		for _, e := range c.in.Arrays[arr] {
			if c.opts.isDriver(e.Remote) {
				continue // a CSI driver's write (the test bed's emulated controller), not fenced's
			}
			c.count(RuleDryRun, 1)
			if e.Changed {
				c.violate(RuleDryRun, e.Time, arr, "write %s %s (seq %d) in a dry-run", e.Method, e.Path, e.Seq)
			}
		}
	}
	for _, cl := range sortedKeys(c.in.Kube) {
		for _, ev := range c.in.Kube[cl] {
			if !c.opts.isFencedUser(ev.User.Username) || !isWriteVerb(ev.Verb) || !ev.Succeeded() {
				continue
			}
			c.count(RuleDryRun, 1)
			if ref := ev.ref(); ref.Resource == "pods" || ref.Resource == "nodes" || ref.Resource == "volumeattachments" {
				c.violate(RuleDryRun, ev.Received, cl, "%s %s %s/%s by %s in a dry-run", ev.Verb, ref.Resource, ref.Namespace, ref.Name, ev.User.Username)
			}
		}
	}
	for _, f := range c.h.Fences {
		c.violate(RuleDryRun, f.OpenedAt, f.Cluster+"/"+f.Node, "fence record %s in the ledger of a dry-run", f.ID)
	}
}
