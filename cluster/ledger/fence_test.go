package ledger

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
)

func TestFenceLifecycle(t *testing.T) {
	h := newHarness(t)
	h.learn()
	h.must(&OpenFence{Meta: h.meta(), Cluster: "c1", Node: "n1", Origin: OriginVerdict,
		Reason: "heartbeat stale 40s, kubelet unreachable from 2/3", BootID: "boot-1",
		PodUIDs: []string{"uid-1", "uid-2"}, Plans: []arrayclients.Plan{plan("a1", "n1")},
		Footprint: []arrayclients.FootprintVolume{footVolume("a1", "n1"), footVolume("a2", "n1")}, FootprintRecorded: true})
	f := h.fence()
	require.NotNil(t, f)
	id := f.ID
	assert.Equal(t, FenceID(2), id)
	assert.Equal(t, StateIntent, f.State)
	assert.Equal(t, KindFence, f.Kind)
	assert.True(t, f.IdentitiesKnown)
	assert.Len(t, f.Identities, 2)

	h.must(&AmendFence{Meta: h.meta(), Cluster: "c1", Node: "n1", FenceID: id, Expect: StateIntent,
		Plans: []arrayclients.Plan{plan("a2", "n1")}, PodUIDs: []string{"uid-2", "uid-3"}})
	assert.Equal(t, []string{"uid-1", "uid-2", "uid-3"}, h.fence().PodUIDs)

	require.NoError(t, h.step(id, StateIntent, StateFencing))
	require.NoError(t, h.result(id, StateFencing, "a1", OpApply, nil))
	require.NoError(t, h.result(id, StateFencing, "a1", OpVerify, fencedRead("a1", "n1", t0)))

	// Invariant 1 in the ledger: not fenced until every array is verified.
	err := h.step(id, StateFencing, StateFenced)
	require.ErrorIs(t, err, ErrBadTransition)
	assert.Contains(t, err.Error(), "a2")

	require.NoError(t, h.result(id, StateFencing, "a2", OpApply, nil))
	require.NoError(t, h.result(id, StateFencing, "a2", OpVerify,
		&arrayclients.Verification{Fenced: false, Remaining: []string{"vol-1"}, CheckedAt: t0}))
	require.ErrorIs(t, h.step(id, StateFencing, StateFenced), ErrBadTransition)
	// Invariant 1 over the footprint: a read-back that shows the array
	// fenced but the node still reaching a footprint volume is not enough.
	stillReaches := fencedRead("a2", "n1", t0)
	stillReaches.Volumes[0].NodeAccess = true
	require.NoError(t, h.result(id, StateFencing, "a2", OpVerify, stillReaches))
	err = h.step(id, StateFencing, StateFenced)
	require.ErrorIs(t, err, ErrBadTransition)
	assert.Contains(t, err.Error(), "pv-n1-a2")
	require.NoError(t, h.result(id, StateFencing, "a2", OpVerify, fencedRead("a2", "n1", t0)))

	for _, s := range [][2]FenceState{{StateFencing, StateFenced}, {StateFenced, StateTainted}, {StateTainted, StateEvicted}} {
		require.NoError(t, h.step(id, s[0], s[1]))
	}

	// Recovery: undo must be verified on every plan before restored.
	require.NoError(t, h.apply(&FenceStep{Meta: h.meta(), Cluster: "c1", Node: "n1", FenceID: id,
		From: StateEvicted, To: StateUnfenceIntent, BootID: "boot-2", Note: "rebooted"}))
	assert.Equal(t, KindUnfence, h.fence().Kind)
	assert.Equal(t, "boot-2", h.fence().UnfenceBootID)
	require.ErrorIs(t, h.result(id, StateFencing, "a1", OpUndo, nil), ErrInvalid)
	require.NoError(t, h.result(id, StateUnfenceIntent, "a1", OpUndo, nil))
	require.NoError(t, h.result(id, StateUnfenceIntent, "a1", OpVerifyRestore,
		&arrayclients.Verification{Restored: true, CheckedAt: t0}))
	require.ErrorIs(t, h.step(id, StateUnfenceIntent, StateRestored), ErrBadTransition)
	require.NoError(t, h.result(id, StateUnfenceIntent, "a2", OpVerifyRestore,
		&arrayclients.Verification{Restored: true, CheckedAt: t0}))
	for _, s := range [][2]FenceState{{StateUnfenceIntent, StateRestored}, {StateRestored, StateUntainted}, {StateUntainted, StateClosed}} {
		require.NoError(t, h.step(id, s[0], s[1]))
	}

	assert.Nil(t, h.fence())
	h.fsm.Read(func(s *State) {
		n := s.Node("c1", "n1")
		require.Len(t, n.History, 1)
		closed := n.History[0]
		assert.Equal(t, StateClosed, closed.State)
		var path []string
		for _, st := range closed.Steps {
			path = append(path, string(st.To))
		}
		assert.Equal(t, "intent fencing fenced tainted evicted unfence-intent restored untainted closed",
			strings.Join(path, " "))
		assert.Len(t, closed.Plans, 2)
		assert.True(t, closed.Results["a1"].Verified && closed.Results["a1"].RestoreVerified)
		assert.Same(t, closed, s.Fence("c1", "n1", id))
	})
	// The closed record cannot be changed any more.
	require.ErrorIs(t, h.step(id, StateClosed, StateFencing), ErrConflict)
}

func TestFenceCompareAndSet(t *testing.T) {
	tcs := []struct {
		name  string
		cmd   func(h *harness, id string) Command
		want  error
		match string
	}{
		{"wrong expected state", func(h *harness, id string) Command {
			return &FenceStep{Meta: h.meta(), Cluster: "c1", Node: "n1", FenceID: id, From: StateFencing, To: StateFenced}
		}, ErrConflict, "is intent, expected fencing"},
		{"term of a deposed leader", func(h *harness, id string) Command {
			m := h.meta()
			m.Term = h.term - 1
			return &FenceStep{Meta: m, Cluster: "c1", Node: "n1", FenceID: id, From: StateIntent, To: StateFencing}
		}, ErrStaleTerm, "written in term 1, committed in term 2"},
		{"unknown fence", func(h *harness, id string) Command {
			return &FenceStep{Meta: h.meta(), Cluster: "c1", Node: "n1", FenceID: "fence-99", From: StateIntent, To: StateFencing}
		}, ErrNotFound, "fence-99"},
		{"step not allowed", func(h *harness, id string) Command {
			return &FenceStep{Meta: h.meta(), Cluster: "c1", Node: "n1", FenceID: id, From: StateIntent, To: StateEvicted}
		}, ErrBadTransition, "from intent to evicted"},
		{"second open fence", func(h *harness, id string) Command {
			return &OpenFence{Meta: h.meta(), Cluster: "c1", Node: "n1", Origin: OriginVerdict, Reason: "again", FootprintRecorded: true}
		}, ErrConflict, "already has fence"},
		{"result for an array without plan", func(h *harness, id string) Command {
			return &RecordArrayResult{Meta: h.meta(), Cluster: "c1", Node: "n1", FenceID: id, Expect: StateIntent,
				Array: "a9", Op: OpApply, OK: true}
		}, ErrInvalid, "recorded in fencing"},
		{"failed without reason", func(h *harness, id string) Command {
			return &FenceStep{Meta: h.meta(), Cluster: "c1", Node: "n1", FenceID: id, From: StateIntent, To: StateAborted}
		}, ErrInvalid, "note is required"},
	}
	for _, tc := range tcs {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.learn()
			h.must(&OpenFence{Meta: h.meta(), Cluster: "c1", Node: "n1", Origin: OriginVerdict, Reason: "dead", FootprintRecorded: true})
			id := h.fence().ID
			h.term = 2
			h.must(&LeaderEpoch{Meta: h.meta(), LedgerVersion: Version})
			before := h.fsm.Copy()
			err := h.apply(tc.cmd(h, id))
			require.ErrorIs(t, err, tc.want)
			assert.Contains(t, err.Error(), tc.match)

			// A refusal changes nothing but the applied index and the rejection record.
			after := h.fsm.Copy()
			assert.Equal(t, before.Rejected+1, after.Rejected)
			assert.Equal(t, err.Error(), after.Rejections[len(after.Rejections)-1].Error)
			after.Index, after.Term, after.Rejected, after.Rejections = before.Index, before.Term, before.Rejected, before.Rejections
			assert.Equal(t, before, after)
		})
	}
}

func TestFenceGuards(t *testing.T) {
	t.Run("identities never learned", func(t *testing.T) {
		h := newHarness(t)
		h.must(&OpenFence{Meta: h.meta(), Cluster: "c1", Node: "n1", Origin: OriginOperator, Operator: "alice", Reason: "manual", FootprintRecorded: true})
		id := h.fence().ID
		require.NoError(t, h.step(id, StateIntent, StateFencing))
		err := h.step(id, StateFencing, StateFenced)
		require.ErrorIs(t, err, ErrBadTransition)
		assert.Contains(t, err.Error(), "never learned")
	})
	t.Run("learned with no identity anywhere", func(t *testing.T) {
		h := newHarness(t)
		h.must(&SetIdentities{Meta: h.meta(), Cluster: "c1", Node: "n1", BootID: "b"})
		h.must(&OpenFence{Meta: h.meta(), Cluster: "c1", Node: "n1", Origin: OriginVerdict, Reason: "dead", FootprintRecorded: true})
		id := h.fence().ID
		require.NoError(t, h.step(id, StateIntent, StateFencing))
		require.NoError(t, h.step(id, StateFencing, StateFenced))
	})
	t.Run("pause stops verdicts, not operators or recovery", func(t *testing.T) {
		h := newHarness(t)
		h.learn()
		h.must(&OpenFence{Meta: h.meta(), Cluster: "c1", Node: "n1", Origin: OriginVerdict, Reason: "dead", FootprintRecorded: true})
		id := h.fence().ID
		h.must(&SetPause{Meta: h.meta(), Cluster: "c1", Paused: true, Operator: "bob", Reason: "maintenance"})
		require.ErrorIs(t, h.step(id, StateIntent, StateFencing), ErrPaused)
		require.NoError(t, h.apply(&FenceStep{Meta: h.meta(), Cluster: "c1", Node: "n1", FenceID: id,
			From: StateIntent, To: StateFencing, Operator: "bob", Note: "fence it anyway"}))
		require.NoError(t, h.step(id, StateFencing, StateUnfenceIntent))
		h.must(&SetPause{Meta: h.meta(), Paused: true, Operator: "bob", Reason: "global"})
		require.ErrorIs(t, h.apply(&OpenFence{Meta: h.meta(), Cluster: "c2", Node: "n1", Origin: OriginVerdict, Reason: "dead", FootprintRecorded: true}), ErrPaused)
		require.NoError(t, h.apply(&OpenFence{Meta: h.meta(), Cluster: "c2", Node: "n1", Origin: OriginOperator, Operator: "bob", Reason: "manual", FootprintRecorded: true}))
		h.fsm.Read(func(s *State) {
			assert.True(t, s.Paused("c3"))
			require.Len(t, s.Actions, 2)
			assert.Equal(t, "pause", s.Actions[0].Action)
			assert.Equal(t, "bob", s.Actions[0].Operator)
			assert.Equal(t, "maintenance", s.Actions[0].Reason)
			assert.Len(t, s.Node("c1", "n1").Actions, 1)
		})
	})
	t.Run("failed fence closes only by an operator; retry re-verifies", func(t *testing.T) {
		h := newHarness(t)
		h.learn()
		h.must(&OpenFence{Meta: h.meta(), Cluster: "c1", Node: "n1", Origin: OriginVerdict, Reason: "dead", FootprintRecorded: true,
			Plans: []arrayclients.Plan{plan("a1", "n1"), plan("a2", "n1")}})
		id := h.fence().ID
		require.NoError(t, h.step(id, StateIntent, StateFencing))
		require.NoError(t, h.result(id, StateFencing, "a1", OpVerify, &arrayclients.Verification{Fenced: true}))
		require.NoError(t, h.step(id, StateFencing, StateFailed))
		assert.Equal(t, "test failed", h.fence().FailReason)
		require.ErrorIs(t, h.step(id, StateFailed, StateClosed), ErrBadTransition)
		require.ErrorIs(t, h.step(id, StateFailed, StateAborted), ErrBadTransition)
		require.NoError(t, h.step(id, StateFailed, StateFencing))
		assert.False(t, h.fence().Results["a1"].Verified)
		// Plans of arrays already operated on cannot be replaced.
		require.ErrorIs(t, h.apply(&AmendFence{Meta: h.meta(), Cluster: "c1", Node: "n1", FenceID: id,
			Expect: StateFencing, Plans: []arrayclients.Plan{plan("a1", "n1")}}), ErrConflict)
		require.NoError(t, h.step(id, StateFencing, StateFailed))
		require.NoError(t, h.apply(&FenceStep{Meta: h.meta(), Cluster: "c1", Node: "n1", FenceID: id,
			From: StateFailed, To: StateClosed, Operator: "carol", Note: "array replaced; node decommissioned"}))
		assert.Nil(t, h.fence())
	})
}

func TestAllowedSteps(t *testing.T) {
	allowed := rules[Version]
	for from := range allowed {
		for to := range allowed {
			want := false
			for _, s := range allowed[from] {
				want = want || s == to
			}
			assert.Equal(t, want, Allowed(from, to), "%s -> %s", from, to)
		}
	}
	assert.False(t, Allowed(StateIntent, StateEvicted), "no path around the fence")
	assert.False(t, Allowed(StateFencing, StateTainted), "no taint before verified")
	assert.False(t, Allowed(StateFenced, StateEvicted), "no eviction before taint")
	for s := range allowed {
		assert.Equal(t, len(allowed[s]) == 0, Terminal(s), "%s", s)
	}
}

func TestObservationsChangesOnly(t *testing.T) {
	h := newHarness(t)
	obs := func(ok bool, sec int) Command {
		m := h.meta()
		return &Observe{Meta: m, Replica: "r2", Cluster: "c1", Node: "n1", Probe: "kubelet", OK: ok,
			Since: t0.Add(timeSeconds(sec))}
	}
	h.must(obs(true, 1))
	h.must(obs(true, 5))
	h.fsm.Read(func(s *State) {
		o := s.Observations("c1", "n1", "kubelet")["r2"]
		assert.True(t, o.OK)
		assert.Equal(t, t0.Add(timeSeconds(1)), o.Since, "an unchanged value keeps its first time")
	})
	h.must(obs(false, 9))
	h.fsm.Read(func(s *State) {
		o := s.Observations("c1", "n1", "kubelet")["r2"]
		assert.False(t, o.OK)
		assert.Equal(t, t0.Add(timeSeconds(9)), o.Since)
	})
	h.must(&SetIdentities{Meta: h.meta(), Cluster: "c1", Node: "n1"})
	h.must(&ForgetNode{Meta: h.meta(), Cluster: "c1", Node: "n1", Reason: "node deleted"})
	h.fsm.Read(func(s *State) {
		assert.Empty(t, s.Observations("c1", "n1", "kubelet"))
		assert.Nil(t, s.Node("c1", "n1"))
	})
}

func TestUnknownAndMalformedEntries(t *testing.T) {
	h := newHarness(t)
	require.NoError(t, h.raw([]byte{byte(IgnorableFlag | 0x33), '{', '}'}))
	require.ErrorIs(t, h.raw([]byte{byte(TypeSetPause), '{'}), ErrInvalid)
	require.ErrorIs(t, h.raw(nil), ErrInvalid)
	require.ErrorIs(t, h.apply(&SetPause{Meta: Meta{V: 1, Term: 1, By: "r1"}, Operator: "x", Reason: "y"}), ErrInvalid)
	s := h.fsm.Copy()
	assert.Equal(t, uint64(1), s.Skipped)
	assert.Equal(t, uint64(3), s.Rejected)
	assert.Equal(t, uint64(4), s.Index)
	assert.Len(t, s.Rejections, 3)
	assert.Nil(t, h.fsm.Halted(), "a refusal every replica makes alike does not halt")
}
