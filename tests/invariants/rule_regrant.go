package invariants

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/cluster/ledger"
)

// holderAt names the node other than node that Kubernetes had the volume
// attached (or attaching) to at t, if any: where the volume moved.
func (c *checker) holderAt(cluster string, v arrayclients.FootprintVolume, node string, t time.Time) string {
	if v.Handle == "" || v.Driver == "" {
		return ""
	}
	ps := c.in.Placements[cluster]
	for _, m := range c.nodesOf(cluster) {
		if m == node {
			continue
		}
		if n, ok := attachedAt(ps, AttachmentName(v.Handle, v.Driver, m), t); ok && n == m {
			return m
		}
	}
	return ""
}

// nodesOf names every node the evidence shows in a cluster.
func (c *checker) nodesOf(cluster string) []string {
	set := map[string]bool{}
	for _, p := range c.in.Placements[cluster] {
		if p.Node != "" {
			set[p.Node] = true
		}
	}
	for _, f := range c.h.Fences {
		if f.Cluster == cluster {
			set[f.Node] = true
		}
	}
	return sortedKeys(set)
}

// restoreWindow returns the record's unfence window: from its
// unfence-intent step to the step after it (the end of the run when none).
func restoreWindow(f *ledger.Fence) (from, to ledger.Step, ok bool) {
	st := steps(f)
	for i, s := range st {
		if s.To == ledger.StateUnfenceIntent {
			from, ok = s, true
			if i+1 < len(st) {
				to = st[i+1]
			} else {
				to = ledger.Step{}
			}
		}
	}
	return from, to, ok
}

// checkNoRegrant is rule no-regrant (see the package doc).
func (c *checker) checkNoRegrant() {
	for _, f := range c.h.Fences {
		from, to, ok := restoreWindow(f)
		if !ok || !f.FootprintRecorded {
			continue
		}
		subject := f.Cluster + "/" + f.Node
		for _, v := range f.Footprint {
			if v.MultiNode {
				continue
			}
			for _, pl := range v.Placements {
				c.count(RuleNoRegrant, 1)
				c.regrantWrites(f, v, pl, from, to, subject)
				c.regrantAtEnd(f, v, pl, subject)
			}
		}
	}
}

// regrantWrites reports a write by fenced during the record's unfence
// that gave the node a volume held then by another node.
func (c *checker) regrantWrites(f *ledger.Fence, v arrayclients.FootprintVolume, pl arrayclients.Placement, from, to ledger.Step, subject string) {
	tokens := c.nodeTokens(f.Cluster, f.Node, pl.Array)
	for _, e := range c.in.Arrays[pl.Array] {
		if !e.Changed || e.Time.Before(from.At) || (!to.At.IsZero() && e.Time.After(to.At)) || c.opts.replicaOf(e.Remote) == "" {
			continue
		}
		for _, change := range strings.Split(e.Change, " ") {
			if !strings.HasPrefix(change, "+") || !mentions(change, pl.Object) ||
				(!mentionsAny(change, tokens) && !mentionsAny(e.Body, tokens)) {
				continue
			}
			if m := c.holderAt(f.Cluster, v, f.Node, e.Time); m != "" {
				c.violate(RuleNoRegrant, e.Time, subject, "%s: unfence gave the node volume %s (%s on %s) while Kubernetes had it on %s: %s %s %s",
					f.ID, v.PV, pl.Object, pl.Array, m, e.Method, e.Path, change)
			}
		}
	}
}

// regrantAtEnd reports a volume that moved and that the array still gives
// the node at the end of the run, once the record no longer fences it.
func (c *checker) regrantAtEnd(f *ledger.Fence, v arrayclients.FootprintVolume, pl arrayclients.Placement, subject string) {
	end, ok := c.in.ArrayEnd[pl.Array]
	if !ok || stillFenced(f) || !c.lastRecord(f) {
		return
	}
	m := c.holderAt(f.Cluster, v, f.Node, time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC))
	if m == "" {
		return
	}
	var state any
	if json.Unmarshal(end, &state) != nil {
		return
	}
	var ids []string
	for _, id := range []arrayclients.Identity{f.Identities[pl.Array], planIdentity(f, pl.Array)} {
		if id.ObjectID != "" {
			ids = append(ids, id.ObjectID)
		}
	}
	tokens := c.nodeTokens(f.Cluster, f.Node, pl.Array)
	if objectsMention(state, []string{pl.Object}, tokens) || objectsMention(state, ids, []string{pl.Object}) {
		c.violate(RuleNoRegrant, timeZero, subject, "%s: at the end of the run %s still gives the node volume %s (%s), which moved to %s",
			f.ID, pl.Array, v.PV, pl.Object, m)
	}
}

// lastRecord reports whether f is its node's last record.
func (c *checker) lastRecord(f *ledger.Fence) bool {
	for _, o := range c.h.fencesOf(f.Cluster, f.Node) {
		if firstIndex(o) > firstIndex(f) {
			return false
		}
	}
	return true
}

func planIdentity(f *ledger.Fence, array string) arrayclients.Identity {
	for _, p := range f.Plans {
		if p.Array == array {
			return p.Identity
		}
	}
	return arrayclients.Identity{}
}

// nodeTokens are the node's identifiers on the array.
func (c *checker) nodeTokens(cluster, node, array string) []string {
	for _, nt := range c.tokensOnArray(array) {
		if nt.cluster == cluster && nt.node == node {
			return nt.tokens
		}
	}
	return nil
}

// objectsMention reports whether some object of the state identified by
// one of ids (a map key, or an "id" or "name" field equal to it) holds a
// string equal to one of tokens anywhere inside it, or some object has
// fields equal to one of ids and to one of tokens (a mapping linking them).
func objectsMention(state any, ids, tokens []string) bool {
	if len(ids) == 0 || len(tokens) == 0 {
		return false
	}
	is := func(s string, list []string) bool {
		for _, x := range list {
			if x != "" && strings.EqualFold(s, x) {
				return true
			}
		}
		return false
	}
	var holds func(v any) bool
	holds = func(v any) bool {
		switch t := v.(type) {
		case string:
			return is(t, tokens)
		case []any:
			for _, e := range t {
				if holds(e) {
					return true
				}
			}
		case map[string]any:
			for k, e := range t {
				if is(k, tokens) || holds(e) {
					return true
				}
			}
		}
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
			for _, f := range []string{"id", "name"} {
				s, ok := t[f].(string)
				if n, isNum := t[f].(float64); isNum {
					s, ok = strconv.FormatFloat(n, 'f', -1, 64), true
				}
				if ok && is(s, ids) && holds(t) {
					return true
				}
			}
			// A link object (a mapping naming both, e.g. {hostId, volumeId}).
			var hasID, hasToken bool
			for _, e := range t {
				if s, ok := e.(string); ok {
					hasID = hasID || is(s, ids)
					hasToken = hasToken || is(s, tokens)
				}
			}
			if hasID && hasToken {
				return true
			}
			for k, e := range t {
				if is(k, ids) && holds(e) {
					return true
				}
				if walk(e) {
					return true
				}
			}
		}
		return false
	}
	return walk(state)
}
