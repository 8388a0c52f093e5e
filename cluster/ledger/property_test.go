package ledger

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
)

var (
	genClusters = []string{"c1", "c2"}
	genNodes    = []string{"n1", "n2", "n3"}
	genArrays   = []string{"a1", "a2", "a3"}
	genStates   = []FenceState{StateIntent, StateFencing, StateFenced, StateTainted, StateEvicted,
		StateUnfenceIntent, StateRestored, StateUntainted, StateClosed, StateFailed, StateAborted}
	genOps = []ArrayOp{OpApply, OpVerify, OpUndo, OpVerifyRestore}
)

func pick[T any](r *rand.Rand, list []T) T { return list[r.IntN(len(list))] }

// genCommand returns a random command, biased toward ones that the current
// state accepts so that long fence histories build up, but with stale terms,
// wrong states and garbage mixed in.
func genCommand(r *rand.Rand, h *harness) Command {
	m := h.meta()
	if r.IntN(20) == 0 && m.Term > 1 {
		m.Term-- // a deposed leader's write
	}
	if r.IntN(8) == 0 {
		m.V = 1 // a version 1 leader's write: no footprint, version 1 rules
	}
	cl, nd := pick(r, genClusters), pick(r, genNodes)
	var open *Fence
	h.fsm.Read(func(s *State) {
		if n := s.Node(cl, nd); n != nil && n.Fence != nil {
			c := *n.Fence
			open = &c
		}
	})
	if open != nil && r.IntN(2) == 0 {
		if c := progress(r, m, open); c != nil {
			return c
		}
	}
	switch k := r.IntN(12); {
	case k == 0:
		ids := map[string]arrayclients.Identity{}
		for _, a := range genArrays[:r.IntN(len(genArrays)+1)] {
			ids[a] = identity(a, nd)
		}
		return &SetIdentities{Meta: m, Cluster: cl, Node: nd, BootID: fmt.Sprintf("boot-%d", r.IntN(3)), Identities: ids}
	case k == 1 && m.V >= PauseHoldersVersion && r.IntN(2) == 0:
		if r.IntN(2) == 0 {
			return &AddPause{Meta: m, Cluster: pick(r, []string{"", cl}), Operator: pick(r, []string{"op", "op2"}), Reason: "gen"}
		}
		return &EndPauses{Meta: m, IDs: []string{pick(r, []string{LegacyPauseID, "pause-1", "pause-2", "pause-3"})},
			Operator: "op", Reason: "gen"}
	case k == 1:
		return &SetPause{Meta: m, Cluster: pick(r, []string{"", cl}), Paused: r.IntN(3) == 0, Operator: "op", Reason: "gen"}
	case k == 6 && open != nil && m.V >= ConfirmVersion && r.IntN(3) == 0:
		return &ConfirmArray{Meta: m, Cluster: open.Cluster, Node: open.Node, FenceID: open.ID,
			Array: pick(r, genArrays), Operator: "op", Reason: "gen"}
	case k == 2:
		return &Observe{Meta: m, Replica: pick(r, []string{"r1", "r2", "r3"}), Cluster: cl, Node: nd,
			Probe: "kubelet", OK: r.IntN(2) == 0, Since: m.At}
	case k == 3:
		return &OperatorNote{Meta: m, Cluster: cl, Node: nd, Operator: "op", Action: "note", Reason: "gen"}
	case k == 4 && r.IntN(4) == 0:
		return &ForgetNode{Meta: m, Cluster: cl, Node: nd, Reason: "gen"}
	case open == nil || k == 5:
		var plans []arrayclients.Plan
		for _, a := range genArrays[:r.IntN(len(genArrays)+1)] {
			plans = append(plans, plan(a, nd))
		}
		origin, op := OriginVerdict, ""
		if r.IntN(3) == 0 {
			origin, op = OriginOperator, "op"
		}
		c := &OpenFence{Meta: m, Cluster: cl, Node: nd, Origin: origin, Operator: op, Reason: "gen",
			BootID: "boot-0", PodUIDs: []string{fmt.Sprintf("uid-%d", r.IntN(5))}, Plans: plans}
		if m.V >= 2 {
			c.FootprintRecorded = true
			for _, a := range genArrays[:r.IntN(len(genArrays)+1)] {
				fv := footVolume(a, nd)
				if r.IntN(10) == 0 {
					fv.Placements, fv.Gap = nil, &arrayclients.Gap{Reason: arrayclients.GapUnknownDriver, Detail: "gen"}
				}
				c.Footprint = append(c.Footprint, fv)
			}
		}
		return c
	case k == 6:
		return &AmendFence{Meta: m, Cluster: cl, Node: nd, FenceID: open.ID, Expect: open.State,
			Plans: []arrayclients.Plan{plan(pick(r, genArrays), nd)}, PodUIDs: []string{"uid-9"}}
	case k <= 9:
		a := pick(r, genArrays)
		if len(open.Plans) > 0 && r.IntN(4) > 0 {
			a = pick(r, open.Plans).Array
		}
		op := pick(r, genOps)
		expect := opState[op]
		if r.IntN(8) == 0 {
			expect = pick(r, genStates)
		}
		ok := r.IntN(4) > 0
		res := &RecordArrayResult{Meta: m, Cluster: cl, Node: nd, FenceID: open.ID, Expect: expect, Array: a, Op: op, OK: ok}
		if !ok {
			res.Error = "array timed out"
		} else if op == OpVerify || op == OpVerifyRestore {
			res.Verification = fencedRead(a, nd, m.At)
			res.Verification.Fenced, res.Verification.Restored = r.IntN(4) > 0, r.IntN(4) > 0
			res.Verification.Volumes[0].NodeAccess = r.IntN(6) == 0
		}
		return res
	default:
		from, to := open.State, pick(r, genStates)
		if next := rules[m.V][from]; len(next) > 0 && r.IntN(5) > 0 {
			to = pick(r, next)
		}
		if r.IntN(10) == 0 {
			from = pick(r, genStates)
		}
		step := &FenceStep{Meta: m, Cluster: cl, Node: nd, FenceID: open.ID, From: from, To: to, Note: "gen", BootID: "boot-1"}
		if r.IntN(4) == 0 {
			step.Operator = "op"
		}
		return step
	}
}

// progress returns the command that moves an open fence toward its next
// guard: a missing plan, a missing verification or restore.
func progress(r *rand.Rand, m Meta, f *Fence) Command {
	ref := func(expect FenceState, array string, op ArrayOp, v *arrayclients.Verification) Command {
		return &RecordArrayResult{Meta: m, Cluster: f.Cluster, Node: f.Node, FenceID: f.ID, Expect: expect,
			Array: array, Op: op, OK: true, Verification: v}
	}
	switch f.State {
	case StateIntent, StateFencing:
		if !f.FootprintRecorded && m.V >= 2 {
			return &AmendFence{Meta: m, Cluster: f.Cluster, Node: f.Node, FenceID: f.ID, Expect: f.State,
				Footprint: []arrayclients.FootprintVolume{footVolume(pick(r, genArrays), f.Node)}}
		}
		arrays := slices.Collect(maps.Keys(f.Identities))
		for _, v := range f.Footprint {
			for _, pl := range v.Placements {
				arrays = append(arrays, pl.Array)
			}
		}
		slices.Sort(arrays)
		for _, a := range arrays {
			if _, ok := f.plan(a); !ok {
				return &AmendFence{Meta: m, Cluster: f.Cluster, Node: f.Node, FenceID: f.ID, Expect: f.State,
					Plans: []arrayclients.Plan{plan(a, f.Node)}}
			}
		}
		if f.State == StateIntent {
			return nil
		}
		for _, p := range f.Plans {
			if res := f.Results[p.Array]; res == nil || !res.Verified {
				v := fencedRead(p.Array, f.Node, m.At)
				v.Fenced = r.IntN(5) > 0
				return ref(StateFencing, p.Array, OpVerify, v)
			}
		}
		return &FenceStep{Meta: m, Cluster: f.Cluster, Node: f.Node, FenceID: f.ID, From: f.State, To: StateFenced, Note: "gen"}
	case StateFenced, StateTainted:
		to := map[FenceState]FenceState{StateFenced: StateTainted, StateTainted: StateEvicted}[f.State]
		return &FenceStep{Meta: m, Cluster: f.Cluster, Node: f.Node, FenceID: f.ID, From: f.State, To: to, Note: "gen"}
	case StateUnfenceIntent:
		if r.IntN(4) == 0 {
			// The scope computed again: any subset of the footprint.
			scope := map[string]arrayclients.RestoreScope{}
			for _, v := range f.Footprint {
				for _, pl := range v.Placements {
					if r.IntN(2) == 0 {
						sc := scope[pl.Array]
						sc.Wanted = append(sc.Wanted, v.PV)
						scope[pl.Array] = sc
					}
				}
			}
			return &Rescope{Meta: m, Cluster: f.Cluster, Node: f.Node, FenceID: f.ID, Restore: scope, Note: "gen"}
		}
		for _, p := range f.Plans {
			if res := f.Results[p.Array]; res == nil || !res.RestoreVerified {
				return ref(StateUnfenceIntent, p.Array, OpVerifyRestore, &arrayclients.Verification{Restored: r.IntN(5) > 0, CheckedAt: m.At})
			}
		}
	}
	return nil
}

// replay applies n generated commands to h, with occasional term changes,
// leader epochs and garbage entries.
func replay(t testing.TB, h *harness, seed uint64, n int) {
	r := rand.New(rand.NewPCG(seed, seed^0x5eed))
	for range n {
		switch r.IntN(40) {
		case 0:
			h.term++
			_ = h.apply(&LeaderEpoch{Meta: h.meta(), LedgerVersion: Version})
		case 1:
			junk := make([]byte, r.IntN(16))
			for i := range junk {
				junk[i] = byte(r.UintN(256))
			}
			if len(junk) > 0 {
				// A known type: garbage of an unknown type halts the
				// ledger (TestHaltOnEntryItCannotApply), which a leader
				// never writes.
				junk[0] = junk[0]%byte(TypeRescope) + 1
			}
			_ = h.raw(junk)
		default:
			_ = h.apply(genCommand(r, h))
		}
	}
}

// TestReplayIsDeterministic is the property: replaying a log into a fresh
// FSM, whole or from a snapshot taken part way, gives the same state.
func TestReplayIsDeterministic(t *testing.T) {
	for seed := uint64(1); seed <= 40; seed++ {
		h := newHarness(t)
		replay(t, h, seed, 300)
		want := h.dump()

		fresh := New()
		for _, l := range h.log {
			fresh.Apply(l)
		}
		got, err := fresh.Dump()
		require.NoError(t, err)
		require.Equal(t, want, string(got), "seed %d: replay differs", seed)

		cut := int(seed*7) % len(h.log)
		part := New()
		for _, l := range h.log[:cut] {
			part.Apply(l)
		}
		resumed := New()
		require.NoError(t, resumed.Restore(io.NopCloser(bytes.NewReader(snapshotBytes(t, part)))))
		for _, l := range h.log[cut:] {
			resumed.Apply(l)
		}
		got, err = resumed.Dump()
		require.NoError(t, err)
		require.Equal(t, want, string(got), "seed %d: snapshot at %d then replay differs", seed, cut)
	}
}

// TestGeneratorReachesDeepStates keeps the property test honest: the
// generated histories do walk fences far along.
func TestGeneratorReachesDeepStates(t *testing.T) {
	seen := map[FenceState]int{}
	var rejected, applied uint64
	for seed := uint64(1); seed <= 40; seed++ {
		h := newHarness(t)
		replay(t, h, seed, 300)
		s := h.fsm.Copy()
		rejected += s.Rejected
		applied += s.Index - s.Rejected
		for _, c := range s.Clusters {
			for _, n := range c.Nodes {
				for _, f := range append(n.History, n.Fence) {
					if f == nil {
						continue
					}
					for _, st := range f.Steps {
						seen[st.To]++
					}
				}
			}
		}
	}
	t.Logf("states entered: %v; applied %d, rejected %d", seen, applied, rejected)
	for _, st := range genStates {
		assert.Positive(t, seen[st], "no generated history entered %s", st)
	}
	assert.Positive(t, rejected)
	assert.Greater(t, applied, rejected)
}
