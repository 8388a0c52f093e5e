package invariants

import (
	"fmt"
	"sort"
	"time"

	"github.com/fenced-project/fenced/cluster/ledger"
)

// FromState returns the evidence one ledger State holds: its leadership
// epochs and every open and historical fence record. The lists of a State
// are bounded; prefer ReplayDataDir when a replica's data directory is at
// hand.
func FromState(st *ledger.State) *History {
	h := &History{Final: st}
	if st == nil {
		return h
	}
	h.Epochs = append(h.Epochs, st.Leaders...)
	for _, c := range st.Clusters {
		if c == nil {
			continue
		}
		for _, n := range c.Nodes {
			if n == nil {
				continue
			}
			h.Fences = append(h.Fences, n.History...)
			if n.Fence != nil {
				h.Fences = append(h.Fences, n.Fence)
				if n.Fence.State == ledger.StateFenced {
					h.AtFenced = append(h.AtFenced, n.Fence)
				}
			}
		}
	}
	h.normalize()
	return h
}

// Merge combines the evidence of several replicas: the union of their
// epochs (by term and replica) and of their fence records (by ID, keeping
// the version with the most recent step). The Final state of the first
// history that has one is kept.
func Merge(hs ...*History) *History {
	out := &History{}
	type epochKey struct {
		term    uint64
		replica string
	}
	seenEpoch := map[epochKey]bool{}
	byID := map[string]*ledger.Fence{}
	atFenced := map[string]*ledger.Fence{}
	for _, h := range hs {
		if h == nil {
			continue
		}
		if out.Final == nil {
			out.Final = h.Final
		}
		for _, e := range h.Epochs {
			k := epochKey{e.Term, e.Replica}
			if !seenEpoch[k] {
				seenEpoch[k] = true
				out.Epochs = append(out.Epochs, e)
			}
		}
		for _, f := range h.Fences {
			if f == nil {
				continue
			}
			if old, ok := byID[f.ID]; !ok || lastIndex(f) > lastIndex(old) {
				byID[f.ID] = f
			}
		}
		for _, f := range h.AtFenced {
			if f != nil {
				atFenced[fmt.Sprintf("%s@%d", f.ID, lastIndex(f))] = f
			}
		}
	}
	for _, k := range sortedKeys(atFenced) {
		out.AtFenced = append(out.AtFenced, atFenced[k])
	}
	for _, f := range byID {
		out.Fences = append(out.Fences, f)
	}
	out.normalize()
	return out
}

// normalize sorts epochs by term and fences by their first step's index and
// drops nil records.
func (h *History) normalize() {
	sort.SliceStable(h.Epochs, func(i, j int) bool { return h.Epochs[i].Term < h.Epochs[j].Term })
	fences := h.Fences[:0]
	for _, f := range h.Fences {
		if f != nil {
			fences = append(fences, f)
		}
	}
	h.Fences = fences
	sort.SliceStable(h.Fences, func(i, j int) bool { return firstIndex(h.Fences[i]) < firstIndex(h.Fences[j]) })
}

func firstIndex(f *ledger.Fence) uint64 {
	if len(f.Steps) == 0 {
		return 0
	}
	return f.Steps[0].Index
}

func lastIndex(f *ledger.Fence) uint64 {
	var m uint64
	for _, s := range f.Steps {
		m = max(m, s.Index)
	}
	return m
}

// fencesOf returns the records of one node.
func (h *History) fencesOf(cluster, node string) []*ledger.Fence {
	var out []*ledger.Fence
	for _, f := range h.Fences {
		if f.Cluster == cluster && f.Node == node {
			out = append(out, f)
		}
	}
	return out
}

// steps returns a record's steps in log order.
func steps(f *ledger.Fence) []ledger.Step {
	out := append([]ledger.Step(nil), f.Steps...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Index < out[j].Index })
	return out
}

// window is a time interval [From, To); To is zero when it is still open at
// the end of the run.
type window struct {
	From, To time.Time
	// Enter is the step that opened the window, Leave the one that closed
	// it (zero when open).
	Enter, Leave ledger.Step
}

func (w window) contains(t time.Time) bool {
	return !t.Before(w.From) && (w.To.IsZero() || t.Before(w.To))
}

// windows returns the intervals during which a record was in one of the
// states in set: from each step entering the set to the next step leaving
// it.
func windows(f *ledger.Fence, set ...ledger.FenceState) []window {
	in := func(s ledger.FenceState) bool {
		for _, x := range set {
			if s == x {
				return true
			}
		}
		return false
	}
	var out []window
	var open *window
	for _, s := range steps(f) {
		switch {
		case open == nil && in(s.To):
			open = &window{From: s.At, Enter: s}
		case open != nil && !in(s.To):
			open.To, open.Leave = s.At, s
			out = append(out, *open)
			open = nil
		}
	}
	if open != nil {
		out = append(out, *open)
	}
	return out
}

// inForce are the states in which a node is fenced and confirmed so.
var inForce = []ledger.FenceState{ledger.StateFenced, ledger.StateTainted, ledger.StateEvicted}

// requiredArrays are the arrays a record must be fenced on: its identity
// set and its planned arrays.
func requiredArrays(f *ledger.Fence) []string {
	seen := map[string]bool{}
	var out []string
	add := func(a string) {
		if a != "" && !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	for a := range f.Identities {
		add(a)
	}
	for _, p := range f.Plans {
		add(p.Array)
	}
	sort.Strings(out)
	return out
}

// leadersDuring returns the replicas whose epochs overlap [from, to].
func leadersDuring(epochs []ledger.Epoch, from, to time.Time) map[string]bool {
	out := map[string]bool{}
	for i, e := range epochs {
		end := time.Time{}
		if i+1 < len(epochs) {
			end = epochs[i+1].At
		}
		if e.At.After(to) {
			continue
		}
		if !end.IsZero() && !end.After(from) {
			continue
		}
		out[e.Replica] = true
	}
	return out
}

// epochAt returns the index of the epoch covering t, or -1 before the first.
func epochAt(epochs []ledger.Epoch, t time.Time) int {
	idx := -1
	for i, e := range epochs {
		if !e.At.After(t) {
			idx = i
		}
	}
	return idx
}
