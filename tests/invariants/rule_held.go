package invariants

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/fenced-project/fenced/cluster/ledger"
	"github.com/fenced-project/fenced/tests/arraysim/simcore"
)

// DefaultHeldPeriod is Options.HeldPeriod when none is given: fenced's
// default held period.
const DefaultHeldPeriod = 30 * time.Second

// heldWindow is the time a record holds its node's fence after the
// eviction: from its first "evicted" step to its next "unfence-intent"
// step (zero To: open at the end of the run).
func heldWindow(f *ledger.Fence) (window, bool) {
	var w window
	found := false
	for _, s := range steps(f) {
		switch {
		case !found && s.To == ledger.StateEvicted:
			w, found = window{From: s.At, Enter: s}, true
		case found && s.To == ledger.StateUnfenceIntent:
			w.To, w.Leave = s.At, s
			return w, true
		}
	}
	return w, found
}

// regrant is one array write that gave a held node access, and the
// first later write that took it away (zero cut: none seen): fenced's
// cut, or the driver's own unpublish of the node (csi-vxflexos with
// interfaceNames removes every node's IPs when any node's attachment goes).
type regrant struct {
	array string
	grant simcore.AuditEntry
	cut   simcore.AuditEntry
}

// checkHeld is rule held (see the package doc).
func (c *checker) checkHeld() {
	period := c.opts.HeldPeriod
	if period <= 0 {
		period = DefaultHeldPeriod
	}
	end := c.evidenceEnd()
	for _, f := range c.h.Fences {
		w, ok := heldWindow(f)
		if !ok {
			continue
		}
		subject := f.Cluster + "/" + f.Node
		var held []regrant
		for _, arr := range sortedKeys(c.in.Arrays) {
			tokens := c.nodeTokens(f.Cluster, f.Node, arr)
			if len(tokens) == 0 {
				continue
			}
			c.count(RuleHeld, 1)
			held = append(held, c.regrantsOn(arr, tokens, w)...)
		}
		for _, r := range held {
			c.rep.Held = append(c.rep.Held, HeldAccess{Fence: f.ID, Subject: subject, Array: r.array,
				GrantAt: r.grant.Time, GrantBy: r.grant.Remote, CutAt: r.cut.Time, CutBy: r.cut.Remote})
			deadline := r.grant.Time.Add(period)
			if !w.To.IsZero() && w.To.Before(deadline) {
				deadline = w.To
			}
			switch {
			case r.cut.Seq != 0 && !r.cut.Time.After(r.grant.Time.Add(period)):
			case r.cut.Seq != 0:
				c.violate(RuleHeld, r.grant.Time, subject, "%s: %s gave the node access again (%s %s by %s) and it was cut only %s later (%s %s by %s), more than the held period %s",
					f.ID, r.array, r.grant.Method, r.grant.Path, r.grant.Remote, r.cut.Time.Sub(r.grant.Time).Round(time.Millisecond),
					r.cut.Method, r.cut.Path, r.cut.Remote, period)
			case !w.To.IsZero() && !w.To.After(r.grant.Time.Add(period)):
				// The unfence began within the period: the access is
				// the unfence's to keep or take.
			case end.After(deadline):
				c.violate(RuleHeld, r.grant.Time, subject, "%s: %s gave the node access again (%s %s by %s) and fenced never cut it (held period %s)",
					f.ID, r.array, r.grant.Method, r.grant.Path, r.grant.Remote, period)
			}
			c.podDeletesWhileHeld(f, r, subject)
		}
	}
}

// regrantsOn lists the writes on one array within the window that gave
// the node access, each with the first later write that took it away
// again.
func (c *checker) regrantsOn(arr string, tokens []string, w window) []regrant {
	var out []regrant
	entries := c.in.Arrays[arr]
	for i, e := range entries {
		if !e.Changed || !w.contains(e.Time) || !grantsAccess(e, tokens) {
			continue
		}
		r := regrant{array: arr, grant: e}
		for _, later := range entries[i+1:] {
			if later.Changed && revokesAccess(later, tokens) {
				r.cut = later
				break
			}
		}
		out = append(out, r)
	}
	return out
}

// podDeletesWhileHeld reports a pod of the node deleted (by anyone) while
// the array gave the node access again: from the granting write until
// the cut (the end of the run when none).
func (c *checker) podDeletesWhileHeld(f *ledger.Fence, r regrant, subject string) {
	for _, ev := range c.in.Kube[f.Cluster] {
		ref := ev.ref()
		if !ev.Succeeded() || ref.Resource != "pods" || ref.Subresource != "" || ev.Verb != "delete" ||
			ev.Received.Before(r.grant.Time) || (r.cut.Seq != 0 && !ev.Received.Before(r.cut.Time)) {
			continue
		}
		if node, ok := placedOn(c.in.Placements[f.Cluster], "pods", ref.Namespace, ref.Name, ev.Received); !ok || node != f.Node {
			continue
		}
		c.violate(RuleHeld, ev.Received, subject, "%s: pod %s/%s deleted by %s while %s gave the node access again (%s %s, not cut yet)",
			f.ID, ref.Namespace, ref.Name, ev.User.Username, r.array, r.grant.Method, r.grant.Path)
	}
}

// evidenceEnd is the latest time any input shows.
func (c *checker) evidenceEnd() time.Time {
	var end time.Time
	later := func(t time.Time) {
		if t.After(end) {
			end = t
		}
	}
	for _, es := range c.in.Arrays {
		for _, e := range es {
			later(e.Time)
		}
	}
	for _, evs := range c.in.Kube {
		for _, ev := range evs {
			later(ev.Received)
		}
	}
	for _, ev := range c.in.Timeline {
		later(ev.Time)
	}
	for _, f := range c.h.Fences {
		for _, s := range f.Steps {
			later(s.At)
		}
	}
	return end
}

// accessWords are what a write's path or body key says when it gives
// access (add_read_write_root_hosts, addMappedSdc, /attach, add_initiators,
// map) or takes it away (remove_..., removeMappedSdc, /detach, unmap).
var (
	grantWords  = []string{"add", "attach", "map"}
	revokeWords = []string{"remove", "detach", "unmap", "delete"}
)

// grantsAccess reports whether an array write gave one of the node's
// identifiers (tokens: its IPs, host, SDC, initiators) access: its path
// names a granting action and it names the node, or its body holds a
// granting key (add_*) whose value names the node, or its change adds an
// element that names the node. A write whose action takes access away is
// not a grant.
func grantsAccess(e simcore.AuditEntry, tokens []string) bool {
	if action := pathAction(e.Path); action != "" {
		switch {
		case hasWord(action, revokeWords):
			return false
		case hasWord(action, grantWords):
			return mentionsAny(e.Path, tokens) || mentionsAny(e.Body, tokens)
		}
	}
	if bodyKeysName(e.Body, tokens, func(k string) bool {
		return strings.HasPrefix(k, "add") && !hasWord(k, revokeWords)
	}) {
		return true
	}
	for _, ch := range strings.Split(e.Change, " ") {
		if strings.HasPrefix(ch, "+") && mentionsAny(ch, tokens) {
			return true
		}
	}
	return false
}

// revokesAccess reports whether an array write took one of the node's
// identifiers' access away: a revoking action naming the node, a
// removing body key (remove_*) naming it, a change removing an element
// that names it, or a write naming the node in its path or change that
// grants nothing (a rewritten list or a host modified).
func revokesAccess(e simcore.AuditEntry, tokens []string) bool {
	if action := pathAction(e.Path); action != "" && hasWord(action, revokeWords) {
		return mentionsAny(e.Path, tokens) || mentionsAny(e.Body, tokens)
	}
	if bodyKeysName(e.Body, tokens, func(k string) bool { return hasWord(k, revokeWords) }) {
		return true
	}
	for _, ch := range strings.Split(e.Change, " ") {
		if strings.HasPrefix(ch, "-") && mentionsAny(ch, tokens) {
			return true
		}
	}
	return e.Method == "DELETE" && mentionsAny(e.Path, tokens)
}

// pathAction is the last segment of a path that names an action
// (".../action/addMappedSdc", ".../volume/<id>/attach"), lower-cased, or
// "" for a plain object path.
func pathAction(path string) string {
	p, _, _ := strings.Cut(path, "?")
	segs := strings.Split(strings.Trim(p, "/"), "/")
	if len(segs) == 0 {
		return ""
	}
	last := strings.ToLower(segs[len(segs)-1])
	// An action is a word; an object's ID (hex digits, a UUID) that
	// happens to hold "add" is not one.
	if strings.IndexFunc(last, func(r rune) bool { return (r < 'a' || r > 'z') && r != '_' }) >= 0 {
		return ""
	}
	if hasWord(last, grantWords) || hasWord(last, revokeWords) {
		return last
	}
	return ""
}

func hasWord(s string, words []string) bool {
	s = strings.ToLower(s)
	for _, w := range words {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

// bodyKeysName reports whether a JSON body has, at any depth, a key that
// keep accepts (lower-cased) whose value names one of tokens.
func bodyKeysName(body string, tokens []string, keep func(string) bool) bool {
	var v any
	if json.Unmarshal([]byte(body), &v) != nil {
		return false
	}
	var walk func(v any) bool
	walk = func(v any) bool {
		switch t := v.(type) {
		case []any:
			for _, e := range t {
				if walk(e) {
					return true
				}
			}
		case map[string]any:
			for k, e := range t {
				if keep(strings.ToLower(k)) && mentionsAny(fmt.Sprint(e), tokens) {
					return true
				}
				if walk(e) {
					return true
				}
			}
		}
		return false
	}
	return walk(v)
}
