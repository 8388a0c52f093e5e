package ledger

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGroupVersion: a ledger that never committed a version runs
// LegacyVersion and encodes as builds before version 3 did; SetLedgerVersion
// raises it, never lowers it, and is refused below version 3.
func TestGroupVersion(t *testing.T) {
	h := newHarness(t)
	assert.Equal(t, LegacyVersion, h.fsm.Copy().GroupVersion())
	assert.NotContains(t, h.dump(), "ledgerVersion", "no version field before one is committed")

	m := h.meta()
	m.V = 2
	err := h.apply(&SetLedgerVersion{Meta: m, LedgerVersion: 2})
	require.ErrorIs(t, err, ErrInvalid)
	assert.Contains(t, err.Error(), "needs v 3")
	require.ErrorIs(t, h.apply(&SetLedgerVersion{Meta: h.meta(), LedgerVersion: 2}), ErrInvalid, "ledgerVersion must equal v")
	err = h.apply(&SetLedgerVersion{Meta: h.metaV(3), LedgerVersion: 3, Voters: map[string]int{"r1": 3, "r2": 2}})
	require.ErrorIs(t, err, ErrInvalid)
	assert.Contains(t, err.Error(), "voter r2 applies up to version 2")

	h.must(&SetLedgerVersion{Meta: h.metaV(3), LedgerVersion: 3, Voters: map[string]int{"r1": 3, "r2": 3, "r3": 3}})
	st := h.fsm.Copy()
	assert.Equal(t, 3, st.GroupVersion())
	h.must(&SetLedgerVersion{Meta: h.metaV(3), LedgerVersion: 3}) // again: harmless

	// Version 4 once every voter applies it.
	err = h.apply(&SetLedgerVersion{Meta: h.metaV(4), LedgerVersion: 4, Voters: map[string]int{"r1": 4, "r2": 3}})
	require.ErrorIs(t, err, ErrInvalid)
	assert.Contains(t, err.Error(), "voter r2 applies up to version 3")
	assert.Equal(t, 3, h.fsm.Copy().GroupVersion())
	h.must(&SetLedgerVersion{Meta: h.metaV(4), LedgerVersion: 4, Voters: map[string]int{"r1": 4, "r2": 4, "r3": 4}})
	assert.Equal(t, 4, h.fsm.Copy().GroupVersion())

	// Lowering is a refusal every replica makes alike.
	require.ErrorIs(t, h.apply(&SetLedgerVersion{Meta: h.metaV(3), LedgerVersion: 3}), ErrConflict)
	lower := &SetLedgerVersion{Meta: h.meta(), LedgerVersion: Version}
	h.fsm.mu.Lock()
	h.fsm.state.LedgerVersion = Version + 1 // as if a newer build had raised it
	h.fsm.mu.Unlock()
	require.ErrorIs(t, h.apply(lower), ErrConflict)
}

// TestRulesByEntryVersion: every entry keeps the steps of its own version.
// A version 1 entry may not take a record back to fencing; a version 2
// entry may, from fenced, tainted or evicted (written only by builds that
// had the rule, and applied as they applied it); so may versions 3 and 4.
func TestRulesByEntryVersion(t *testing.T) {
	for _, from := range []FenceState{StateFenced, StateTainted, StateEvicted} {
		assert.False(t, AllowedIn(1, from, StateFencing), "v1 %s -> fencing", from)
		assert.True(t, AllowedIn(2, from, StateFencing), "v2 %s -> fencing", from)
		assert.True(t, AllowedIn(3, from, StateFencing), "v3 %s -> fencing", from)
		assert.True(t, AllowedIn(4, from, StateFencing), "v4 %s -> fencing", from)
	}
	for v := MinVersion; v <= Version; v++ {
		require.Contains(t, rules, v, "version %d has no rules", v)
	}
	assert.False(t, AllowedIn(Version+1, StateIntent, StateFencing), "no rules for an unknown version")
}

// TestHaltOnEntryItCannotApply: an entry of a newer version or an unknown
// type that may not be skipped halts the ledger instead of being recorded
// as a refusal: the state stays as it was, later entries are not applied,
// Snapshot refuses, OnHalt is told once; a snapshot that covers the entry
// lifts the halt.
func TestHaltOnEntryItCannotApply(t *testing.T) {
	newer := Version + 1
	for name, entry := range map[string][]byte{
		"newer version": append([]byte{byte(TypeSetPause)},
			fmt.Sprintf(`{"v":%d,"term":1,"at":"2025-03-01T12:00:00Z","by":"r1","paused":true,"operator":"x","reason":"y","quota":7}`, newer)...),
		"newer version, new shape": append([]byte{byte(TypeSetPause)}, fmt.Sprintf(`{"v":%d,"term":1,"paused":"yes"}`, newer)...),
		"unknown type":             {0x33, '{', '}'},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			var told []Halt
			h.fsm.OnHalt(func(x Halt) { told = append(told, x) })
			h.must(&SetPause{Meta: h.meta(), Operator: "x", Reason: "y"})
			before := h.dump()
			err := h.raw(entry)
			require.ErrorIs(t, err, ErrHalted)
			halt := h.fsm.Halted()
			require.NotNil(t, halt)
			assert.Equal(t, uint64(2), halt.Index)
			assert.Contains(t, halt.String(), fmt.Sprintf("applies ledger versions 1..%d", Version))
			require.Len(t, told, 1)

			require.ErrorIs(t, h.apply(&SetPause{Meta: h.meta(), Operator: "x", Reason: "z"}), ErrHalted)
			assert.Equal(t, before, h.dump(), "nothing applied after the halt, nothing recorded as refused")
			assert.Zero(t, h.fsm.Copy().Rejected)
			_, err = h.fsm.Snapshot()
			require.ErrorIs(t, err, ErrHalted)
			assert.Len(t, told, 1)

			// A snapshot from a replica that applied the entry covers it.
			other := newHarness(t)
			other.index, other.term = 3, 1
			other.must(&SetPause{Meta: other.meta(), Operator: "x", Reason: "from a newer replica"})
			require.NoError(t, h.fsm.Restore(io.NopCloser(bytes.NewReader(snapshotBytes(t, other.fsm)))))
			assert.Nil(t, h.fsm.Halted())
		})
	}
}

// TestSnapshotCarriesLedgerVersion: a ledger that committed version 3
// writes layout 2 with its ledger version; one that did not writes layout
// 1, byte for byte what builds before version 3 wrote; both restore.
func TestSnapshotCarriesLedgerVersion(t *testing.T) {
	h := newHarness(t)
	h.must(&SetPause{Meta: h.meta(), Operator: "x", Reason: "y"})
	buf := snapshotBytes(t, h.fsm)
	assert.True(t, strings.HasPrefix(string(buf), `{"format":"fenced-ledger","version":1,"index":1,"term":1}`+"\n"), string(buf))

	h.must(&SetLedgerVersion{Meta: h.metaV(3), LedgerVersion: 3})
	buf = snapshotBytes(t, h.fsm)
	assert.True(t, strings.HasPrefix(string(buf), `{"format":"fenced-ledger","version":2,"index":2,"term":1,"ledgerVersion":3}`+"\n"), string(buf))
	restored := New()
	require.NoError(t, restored.Restore(io.NopCloser(bytes.NewReader(buf))))
	assert.Equal(t, h.dump(), func() string { d, _ := restored.Dump(); return string(d) }())

	// A header that disagrees with the state is refused.
	lines := strings.SplitN(string(buf), "\n", 2)
	bad := strings.Replace(lines[0], `"ledgerVersion":3`, `"ledgerVersion":3,"index2":1`, 1) + "\n" + lines[1]
	require.ErrorContains(t, New().Restore(io.NopCloser(strings.NewReader(bad))), `unknown field "index2"`)
	bad = strings.Replace(lines[0], `"version":2`, `"version":1`, 1) + "\n" + lines[1]
	require.ErrorContains(t, New().Restore(io.NopCloser(strings.NewReader(bad))), "layout version 1 with ledgerVersion 3")
	bad = lines[0] + "\n" + strings.Replace(lines[1], `"ledgerVersion":3`, `"ledgerVersion":4`, 1)
	require.ErrorContains(t, New().Restore(io.NopCloser(strings.NewReader(bad))), "header says ledger version 3, state says 4")
}
