package invariants

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fenced-project/fenced/cluster/ledger"
	"github.com/fenced-project/fenced/tests/arraysim/simcore"
)

// kubeAction is a Kubernetes write rule fence-before-delete examines.
type kubeAction struct {
	cluster string
	node    string
	what    string // "pod ns/name deleted", ...
	nodeOp  bool   // a node write (taints), allowed while lifting taints too
	ev      KubeEvent
}

// kubeActions returns the successful writes that need a fence: pod deletes
// by fenced, VolumeAttachment deletes, node writes by fenced. An action
// whose node cannot be told is reported and left out.
func (c *checker) kubeActions() []kubeAction {
	var out []kubeAction
	for _, cl := range sortedKeys(c.in.Kube) {
		for _, ev := range c.in.Kube[cl] {
			if !ev.Succeeded() {
				continue
			}
			ref := ev.ref()
			switch {
			case ref.Resource == "pods" && ref.Subresource == "" && ev.Verb == "delete" && c.opts.isFencedUser(ev.User.Username):
				what := fmt.Sprintf("pod %s/%s deleted by %s", ref.Namespace, ref.Name, ev.User.Username)
				node, ok := placedOn(c.in.Placements[cl], "pods", ref.Namespace, ref.Name, ev.Received)
				if !ok {
					c.violate(RuleFenceBeforeDelete, ev.Received, cl, "%s: no placement tells which node the pod was on", what)
					continue
				}
				out = append(out, kubeAction{cluster: cl, node: node, what: what, ev: ev})
			case ref.Resource == "volumeattachments" && ev.Verb == "delete" && c.vaUser(ev.User.Username):
				what := fmt.Sprintf("VolumeAttachment %s deleted by %s", ref.Name, ev.User.Username)
				node, ok := placedOn(c.in.Placements[cl], "volumeattachments", "", ref.Name, ev.Received)
				if !ok {
					c.violate(RuleFenceBeforeDelete, ev.Received, cl, "%s: no placement tells which node it attached", what)
					continue
				}
				if c.draining(cl+"/"+node, ev.Received) {
					continue // a detach after a drain of a healthy node
				}
				out = append(out, kubeAction{cluster: cl, node: node, what: what, ev: ev})
			case ref.Resource == "nodes" && isWriteVerb(ev.Verb) && c.opts.isFencedUser(ev.User.Username):
				what := fmt.Sprintf("node %s written (%s) by %s", ref.Name, ev.Verb, ev.User.Username)
				out = append(out, kubeAction{cluster: cl, node: ref.Name, what: what, nodeOp: true, ev: ev})
			}
		}
	}
	return out
}

func isWriteVerb(v string) bool {
	switch v {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

func (c *checker) vaUser(user string) bool {
	return len(c.opts.VolumeAttachmentUsers) == 0 || slices.Contains(c.opts.VolumeAttachmentUsers, user)
}

// placedOn returns the node an object was on at t: the last placement of
// it at or before t.
func placedOn(ps []Placement, resource, namespace, name string, t time.Time) (string, bool) {
	var best *Placement
	for i := range ps {
		p := &ps[i]
		if p.Resource != resource || p.Namespace != namespace || p.Name != name || p.Time.After(t) {
			continue
		}
		if best == nil || !p.Time.Before(best.Time) {
			best = p
		}
	}
	if best == nil {
		return "", false
	}
	return best.Node, true
}

// checkFenceBeforeDelete is rule fence-before-delete (see the package doc).
func (c *checker) checkFenceBeforeDelete() {
	readback := map[string][]string{} // fence ID + step index -> problems
	for _, a := range c.kubeActions() {
		c.count(RuleFenceBeforeDelete, 1)
		subject := a.cluster + "/" + a.node
		t := a.ev.Received
		var force *window
		var fence *ledger.Fence
		allowedUntaint := false
		for _, f := range c.h.fencesOf(a.cluster, a.node) {
			for _, w := range windows(f, inForce...) {
				if w.From.Before(t) && w.contains(t) {
					force, fence = &w, f
				}
			}
			if a.nodeOp {
				// Lifting the taints: the out-of-service taint goes
				// first, while the unfence is under way and before any
				// access is given back (kubernetes#142331), fenced's own
				// taint once the arrays are restored.
				for _, w := range windows(f, ledger.StateUnfenceIntent, ledger.StateRestored) {
					if w.From.Before(t) && w.contains(t) {
						allowedUntaint = true
					}
				}
			}
		}
		switch {
		case force == nil && allowedUntaint:
			continue
		case force == nil:
			c.violate(RuleFenceBeforeDelete, t, subject, "%s at %s while no fence of the node was in force (%s)",
				a.what, stamp(t), c.fenceSummary(a.cluster, a.node))
			continue
		}
		key := fmt.Sprintf("%s@%d", fence.ID, force.Enter.Index)
		problems, done := readback[key]
		if !done {
			problems = c.readBackProblems(fence, force.Enter)
			readback[key] = problems
		}
		if len(problems) > 0 {
			c.violate(RuleFenceBeforeDelete, t, subject, "%s at %s under %s, whose fenced step (%s) is not backed by a read-back: %s",
				a.what, stamp(t), fence.ID, stamp(force.Enter.At), strings.Join(problems, "; "))
		}
	}
}

// readBackProblems checks that every array of the record shows a
// successful read between the last fencing step before the fenced step and
// the fenced step, from a replica that led in between.
func (c *checker) readBackProblems(f *ledger.Fence, fenced ledger.Step) []string {
	var fencing *ledger.Step
	for _, s := range steps(f) {
		if s.To == ledger.StateFencing && s.Index < fenced.Index {
			s := s
			fencing = &s
		}
	}
	if fencing == nil {
		return []string{"the record has no fencing step before it"}
	}
	from, to := fencing.At, fenced.At
	leaders := leadersDuring(c.h.Epochs, from, to)
	var problems []string
	for _, arr := range requiredArrays(f) {
		entries, ok := c.in.Arrays[arr]
		if !ok {
			problems = append(problems, fmt.Sprintf("array %s: no audit log", arr))
			continue
		}
		if !c.hasReadBack(entries, from, to, leaders) {
			problems = append(problems, fmt.Sprintf("array %s: no successful read between %s and %s from a leader (%s)",
				arr, stamp(from), stamp(to), strings.Join(sortedKeys(leaders), ",")))
		}
	}
	return problems
}

func (c *checker) hasReadBack(entries []simcore.AuditEntry, from, to time.Time, leaders map[string]bool) bool {
	for _, e := range entries {
		if simcore.IsWrite(e.Method) || e.Status < 200 || e.Status >= 300 || e.Time.Before(from) || e.Time.After(to) {
			continue
		}
		if len(c.opts.Remotes) == 0 || len(leaders) == 0 || leaders[c.opts.replicaOf(e.Remote)] {
			return true
		}
	}
	return false
}

// fenceSummary lists a node's records with their steps, for messages.
func (c *checker) fenceSummary(cluster, node string) string {
	fs := c.h.fencesOf(cluster, node)
	if len(fs) == 0 {
		return "the ledger has no fence record of it"
	}
	var parts []string
	for _, f := range fs {
		var st []string
		for _, s := range steps(f) {
			st = append(st, fmt.Sprintf("%s@%s", s.To, stamp(s.At)))
		}
		parts = append(parts, f.ID+": "+strings.Join(st, " "))
	}
	return strings.Join(parts, "; ")
}

func stamp(t time.Time) string { return t.UTC().Format("15:04:05.000000") }

// draining reports whether the harness was draining the node ("cluster/node")
// at t (between a DrainStart and the next DrainEnd of it).
func (c *checker) draining(subject string, t time.Time) bool {
	on := false
	for _, e := range c.in.Timeline {
		if e.Detail != subject || e.Time.After(t) {
			continue
		}
		switch e.Kind {
		case DrainStart:
			on = true
		case DrainEnd:
			on = false
		}
	}
	return on
}
