package ledger

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
)

func holderIDs(hs []PauseHolder) []string {
	out := []string{}
	for _, h := range hs {
		out = append(out, h.ID)
	}
	return out
}

// TestPauseHolders (ledger version 5): two pauses are two holders; ending
// one leaves the other in effect; the same operator pausing the same scope
// again updates its reason and keeps its time.
func TestPauseHolders(t *testing.T) {
	h := newHarness(t)
	h.must(&AddPause{Meta: h.meta(), Cluster: "c1", Operator: "alice", Reason: "array upgrade"})
	alice := h.index
	h.must(&AddPause{Meta: h.meta(), Operator: "bob", Reason: "network change"})
	h.must(&AddPause{Meta: h.meta(), Cluster: "c1", Operator: "alice", Reason: "array upgrade, step 2"})
	h.fsm.Read(func(s *State) {
		hs := s.Holders()
		require.Len(t, hs, 2)
		assert.Equal(t, fmt.Sprintf("pause-%d", alice), hs[0].ID)
		assert.Equal(t, "c1", hs[0].Cluster)
		assert.Equal(t, "alice", hs[0].Operator)
		assert.Equal(t, "array upgrade, step 2", hs[0].Reason, "the same operator and scope update the reason")
		assert.Equal(t, t0.Add(timeSeconds(int(alice))), hs[0].At, "the pause keeps its time")
		assert.False(t, hs[0].UpdatedAt.IsZero())
		assert.Equal(t, "bob", hs[1].Operator)
		assert.Empty(t, hs[1].Cluster)
		assert.True(t, s.Paused("c1"))
		assert.True(t, s.Paused("c2"), "bob paused every cluster")
		assert.Len(t, s.HoldersOf("c2"), 1)
	})
	var bob string
	h.fsm.Read(func(s *State) { bob = s.Holders()[1].ID })

	require.NoError(t, h.apply(&EndPauses{Meta: h.meta(), IDs: []string{bob}, Operator: "bob", Reason: "done"}))
	h.fsm.Read(func(s *State) {
		assert.Equal(t, []string{"pause-1"}, holderIDs(s.Holders()), "alice's pause stays")
		assert.True(t, s.Paused("c1"))
		assert.False(t, s.Paused("c2"))
		last := s.Actions[len(s.Actions)-1]
		assert.Equal(t, "resume", last.Action)
		assert.Equal(t, "bob", last.Operator)
	})

	err := h.apply(&EndPauses{Meta: h.meta(), IDs: []string{"pause-1", bob}, Operator: "carol", Reason: "all"})
	require.ErrorIs(t, err, ErrNotFound, "a pause ended meanwhile refuses the whole command")
	h.fsm.Read(func(s *State) { assert.True(t, s.Paused("c1")) })
	require.NoError(t, h.apply(&EndPauses{Meta: h.meta(), IDs: []string{"pause-1"}, Operator: "carol", Reason: "all"}))
	h.fsm.Read(func(s *State) {
		assert.Empty(t, s.Holders())
		assert.False(t, s.Paused("c1"))
	})
}

// TestPauseHoldersNeedVersion5: the new commands are refused in an older
// body version, and a version 4 single pause slot still applies as before
// and is shown and ended as a holder.
func TestPauseHoldersNeedVersion5(t *testing.T) {
	h := newHarness(t)
	require.ErrorIs(t, h.apply(&AddPause{Meta: h.metaV(4), Operator: "x", Reason: "y"}), ErrInvalid)
	require.ErrorIs(t, h.apply(&EndPauses{Meta: h.metaV(4), IDs: []string{"pause-1"}, Operator: "x", Reason: "y"}), ErrInvalid)

	h.must(&SetPause{Meta: h.metaV(4), Cluster: "c1", Paused: true, Operator: "old", Reason: "v4 pause"})
	h.must(&SetPause{Meta: h.metaV(4), Paused: true, Operator: "old", Reason: "v4 global"})
	h.must(&AddPause{Meta: h.meta(), Cluster: "c1", Operator: "new", Reason: "v5 pause"})
	added := fmt.Sprintf("pause-%d", h.index)
	h.fsm.Read(func(s *State) {
		assert.ElementsMatch(t, []string{LegacyPauseID + "-c1", LegacyPauseID, added}, holderIDs(s.Holders()))
		assert.True(t, s.Paused("c2"))
	})
	require.NoError(t, h.apply(&EndPauses{Meta: h.meta(), IDs: []string{LegacyPauseID, LegacyPauseID + "-c1"},
		Operator: "ops", Reason: "old pauses over"}))
	h.fsm.Read(func(s *State) {
		assert.Equal(t, []string{added}, holderIDs(s.Holders()))
		assert.False(t, s.Paused("c2"))
		assert.True(t, s.Paused("c1"))
	})
	require.ErrorIs(t, h.apply(&EndPauses{Meta: h.meta(), IDs: []string{LegacyPauseID}, Operator: "ops", Reason: "again"}),
		ErrNotFound)
	require.ErrorIs(t, h.apply(&EndPauses{Meta: h.meta(), IDs: []string{added, added}, Operator: "ops", Reason: "twice"}),
		ErrInvalid)
}

// TestConfirmArray (ledger version 5): an operator's confirmation that the
// node cannot write to a gone array lets the fence step to fenced without
// that array's plan or read-back, for that fence only.
func TestConfirmArray(t *testing.T) {
	h := newHarness(t)
	id := openWithFootprint(t, h, footVolume("a1", "n1"), footVolume("a2", "n1"))
	require.NoError(t, h.result(id, StateFencing, "a1", OpApply, nil))
	require.NoError(t, h.result(id, StateFencing, "a1", OpVerify, fencedRead("a1", "n1", t0)))
	err := h.step(id, StateFencing, StateFenced)
	require.ErrorIs(t, err, ErrBadTransition)
	assert.Contains(t, err.Error(), "array a2")

	require.ErrorIs(t, h.apply(&ConfirmArray{Meta: h.meta(), Cluster: "c1", Node: "n1", FenceID: id, Array: "a9",
		Operator: "alice", Reason: "gone"}), ErrNotFound, "an array not of the fence")
	require.ErrorIs(t, h.apply(&ConfirmArray{Meta: h.meta(), Cluster: "c1", Node: "n1", FenceID: id,
		Operator: "alice", Reason: "gone"}), ErrInvalid, "no array and not powered off")
	require.ErrorIs(t, h.apply(&ConfirmArray{Meta: h.metaV(4), Cluster: "c1", Node: "n1", FenceID: id, Array: "a2",
		Operator: "alice", Reason: "gone"}), ErrInvalid, "needs version 5")

	require.NoError(t, h.apply(&ConfirmArray{Meta: h.meta(), Cluster: "c1", Node: "n1", FenceID: id, Array: "a2",
		Operator: "alice", Reason: "array a2 destroyed in the fire of 2026-11-27"}))
	f := h.fence()
	require.Len(t, f.Confirmations, 1)
	assert.Equal(t, "alice", f.Confirmations[0].Operator)
	assert.Equal(t, h.index, f.Confirmations[0].Index)
	h.fsm.Read(func(s *State) {
		a := s.Node("c1", "n1").Actions
		assert.Equal(t, "confirm", a[len(a)-1].Action)
		assert.Equal(t, "alice", a[len(a)-1].Operator)
	})

	require.ErrorIs(t, h.apply(&FenceStep{Meta: h.metaV(4), Cluster: "c1", Node: "n1", FenceID: id,
		From: StateFencing, To: StateFenced, Note: "v4"}), ErrBadTransition, "a version 4 step keeps its rule")
	require.NoError(t, h.step(id, StateFencing, StateFenced))

	// The next fence of the node gets no confirmation from the last one.
	require.NoError(t, h.step(id, StateFenced, StateUnfenceIntent))
	for _, a := range []string{"a1", "a2"} {
		require.NoError(t, h.result(id, StateUnfenceIntent, a, OpVerifyRestore, &arrayclients.Verification{Restored: true}))
	}
	require.NoError(t, h.step(id, StateUnfenceIntent, StateRestored))
	require.NoError(t, h.step(id, StateRestored, StateUntainted))
	require.NoError(t, h.step(id, StateUntainted, StateClosed))
	id2 := openWithFootprint(t, h, footVolume("a1", "n1"), footVolume("a2", "n1"))
	require.NoError(t, h.result(id2, StateFencing, "a1", OpVerify, fencedRead("a1", "n1", t0)))
	require.ErrorIs(t, h.step(id2, StateFencing, StateFenced), ErrBadTransition)
	require.ErrorIs(t, h.apply(&ConfirmArray{Meta: h.meta(), Cluster: "c1", Node: "n1", FenceID: id, Array: "a2",
		Operator: "alice", Reason: "old fence"}), ErrConflict, "a closed fence")

	// A read-back of a confirmed array that shows the node's access voids
	// the confirmation: the array answered.
	require.NoError(t, h.apply(&ConfirmArray{Meta: h.meta(), Cluster: "c1", Node: "n1", FenceID: id2, Array: "a2",
		Operator: "alice", Reason: "gone again"}))
	require.NoError(t, h.result(id2, StateFencing, "a2", OpVerify, &arrayclients.Verification{Fenced: false, CheckedAt: t0}))
	_, ok := h.fence().Confirmed("a2")
	assert.False(t, ok)
	require.ErrorIs(t, h.step(id2, StateFencing, StateFenced), ErrBadTransition)

	// Powered off covers every array.
	require.NoError(t, h.apply(&ConfirmArray{Meta: h.meta(), Cluster: "c1", Node: "n1", FenceID: id2, PoweredOff: true,
		Operator: "bob", Reason: "PDU outlets 7 and 8 switched off, checked at the rack"}))
	require.NoError(t, h.step(id2, StateFencing, StateFenced))
}

// TestAbandonRestore (ledger version 6): an operator abandons the restore
// of an array confirmed gone for the fence; the fence steps to restored
// without that array's read-back, and no restore is recorded for it.
func TestAbandonRestore(t *testing.T) {
	h := newHarness(t)
	id := openWithFootprint(t, h, footVolume("a1", "n1"), footVolume("a2", "n1"))
	require.NoError(t, h.result(id, StateFencing, "a1", OpApply, nil))
	require.NoError(t, h.result(id, StateFencing, "a1", OpVerify, fencedRead("a1", "n1", t0)))
	abandon := func(m Meta, array, reason string) error {
		return h.apply(&AbandonRestore{Meta: m, Cluster: "c1", Node: "n1", FenceID: id, Array: array,
			Operator: "alice", Reason: reason})
	}
	require.ErrorIs(t, abandon(h.meta(), "a2", "gone"), ErrConflict, "not in unfence-intent")
	require.NoError(t, h.apply(&ConfirmArray{Meta: h.meta(), Cluster: "c1", Node: "n1", FenceID: id, Array: "a2",
		Operator: "alice", Reason: "array a2 destroyed"}))
	require.NoError(t, h.step(id, StateFencing, StateFenced))
	require.NoError(t, h.step(id, StateFenced, StateUnfenceIntent))
	require.NoError(t, h.result(id, StateUnfenceIntent, "a1", OpVerifyRestore, &arrayclients.Verification{Restored: true}))
	require.ErrorIs(t, h.step(id, StateUnfenceIntent, StateRestored), ErrBadTransition, "a2 is not restored")

	require.ErrorIs(t, abandon(h.meta(), "a9", "gone"), ErrNotFound, "not a plan array")
	require.ErrorIs(t, abandon(h.meta(), "a1", "gone"), ErrConflict, "a1 was not confirmed gone")
	require.ErrorIs(t, abandon(h.metaV(5), "a2", "gone"), ErrInvalid, "needs version 6")
	require.ErrorIs(t, abandon(h.meta(), "a2", ""), ErrInvalid, "a reason")

	require.NoError(t, abandon(h.meta(), "a2", "a2 decommissioned, ticket 4711"))
	f := h.fence()
	require.Len(t, f.Abandoned, 1)
	a, ok := f.AbandonedRestore("a2")
	require.True(t, ok)
	assert.Equal(t, "alice", a.Operator)
	assert.Contains(t, a.Text(), "not restored: abandoned by alice")
	assert.Contains(t, a.Text(), "(a2 decommissioned, ticket 4711)")
	h.fsm.Read(func(s *State) {
		acts := s.Node("c1", "n1").Actions
		assert.Equal(t, "abandon-restore", acts[len(acts)-1].Action)
	})
	require.ErrorIs(t, abandon(h.meta(), "a2", "again"), ErrConflict, "already abandoned")
	require.ErrorIs(t, h.result(id, StateUnfenceIntent, "a2", OpUndo, nil), ErrConflict, "no restore on an abandoned array")

	require.ErrorIs(t, h.apply(&FenceStep{Meta: h.metaV(5), Cluster: "c1", Node: "n1", FenceID: id,
		From: StateUnfenceIntent, To: StateRestored, Note: "v5"}), ErrBadTransition, "a version 5 step keeps its rule")
	require.NoError(t, h.step(id, StateUnfenceIntent, StateRestored))
	require.NoError(t, h.step(id, StateRestored, StateUntainted))
	require.NoError(t, h.step(id, StateUntainted, StateClosed))
}
