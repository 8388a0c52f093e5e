package ledger

import (
	"bytes"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
)

// toUnfence takes the fence openWithFootprint opened to unfence-intent
// with a step of body version v whose scope wants both footprint volumes,
// and records a verified restore on a1 and a2.
func toUnfence(t *testing.T, h *harness, id string, v int) {
	t.Helper()
	require.NoError(t, h.apply(&FenceStep{Meta: h.metaV(v), Cluster: "c1", Node: "n1", FenceID: id,
		From: StateFencing, To: StateUnfenceIntent, Note: "rebooted", BootID: "boot-2",
		Restore: map[string]arrayclients.RestoreScope{
			"a1": {Wanted: []string{"pv-n1-a1"}}, "a2": {Wanted: []string{"pv-n1-a2"}}}}))
	for _, a := range []string{"a1", "a2"} {
		require.NoError(t, h.result(id, StateUnfenceIntent, a, OpUndo, nil))
		require.NoError(t, h.result(id, StateUnfenceIntent, a, OpVerifyRestore,
			&arrayclients.Verification{Restored: true, CheckedAt: t0}))
	}
}

// TestRescopeRule (ledger version 4): a restore scope computed again is
// recorded in unfence-intent; it replaces the record's scope, is kept
// with the first one in Scopes, and takes the restore read-back away from
// each array whose scope changed, so the record steps to restored only
// once that array was restored and read back under the new scope.
func TestRescopeRule(t *testing.T) {
	h := newHarness(t)
	id := openWithFootprint(t, h, footVolume("a1", "n1"), footVolume("a2", "n1"))
	toUnfence(t, h, id, 4)
	f := h.fence()
	require.Len(t, f.Scopes, 1, "the scope of the unfence-intent step is recorded")
	assert.Equal(t, f.Restore, f.Scopes[0].Restore)
	assert.Equal(t, "unfence intent", f.Scopes[0].Note)

	// pv-n1-a2's VolumeAttachment moved to another node.
	require.NoError(t, h.apply(&Rescope{Meta: h.meta(), Cluster: "c1", Node: "n1", FenceID: id,
		Restore: map[string]arrayclients.RestoreScope{"a1": {Wanted: []string{"pv-n1-a1"}}},
		Note:    "no longer wanted: pv-n1-a2"}))
	f = h.fence()
	assert.Equal(t, map[string]arrayclients.RestoreScope{"a1": {Wanted: []string{"pv-n1-a1"}}}, f.Restore)
	require.Len(t, f.Scopes, 2)
	assert.Equal(t, f.Restore, f.Scopes[1].Restore)
	assert.Equal(t, "no longer wanted: pv-n1-a2", f.Scopes[1].Note)
	assert.Equal(t, h.index, f.Scopes[1].Index)
	assert.True(t, f.Results["a1"].RestoreVerified, "a1's scope did not change")
	assert.False(t, f.Results["a2"].RestoreVerified, "a2's scope changed: it is restored again")

	err := h.step(id, StateUnfenceIntent, StateRestored)
	require.ErrorIs(t, err, ErrBadTransition)
	assert.Contains(t, err.Error(), "not verified restored on array a2")
	require.NoError(t, h.result(id, StateUnfenceIntent, "a2", OpVerifyRestore,
		&arrayclients.Verification{Restored: true, CheckedAt: t0}))

	// The same volumes in another order are the same scope.
	require.NoError(t, h.apply(&Rescope{Meta: h.meta(), Cluster: "c1", Node: "n1", FenceID: id,
		Restore: map[string]arrayclients.RestoreScope{"a1": {Wanted: []string{"pv-n1-a1", "pv-n1-a1"}}}}))
	assert.True(t, h.fence().Results["a2"].RestoreVerified)
	assert.True(t, h.fence().Results["a1"].RestoreVerified)
	require.NoError(t, h.step(id, StateUnfenceIntent, StateRestored))

	// Only in unfence-intent.
	err = h.apply(&Rescope{Meta: h.meta(), Cluster: "c1", Node: "n1", FenceID: id})
	require.ErrorIs(t, err, ErrConflict)
	assert.Contains(t, err.Error(), "is restored, expected unfence-intent")

	// A snapshot keeps the scopes.
	buf := snapshotBytes(t, h.fsm)
	restored := New()
	require.NoError(t, restored.Restore(io.NopCloser(bytes.NewReader(buf))))
	d, err := restored.Dump()
	require.NoError(t, err)
	assert.Equal(t, h.dump(), string(d))
}

// TestRescopeNeedsVersion4: a Rescope of an older body version is refused
// as invalid, the same on every replica; a version 3 step to
// unfence-intent records no scope list, so a state of version 3 entries
// is what a version 3 build makes of them.
func TestRescopeNeedsVersion4(t *testing.T) {
	h := newHarness(t)
	id := openWithFootprint(t, h, footVolume("a1", "n1"), footVolume("a2", "n1"))
	toUnfence(t, h, id, 3)
	f := h.fence()
	assert.Empty(t, f.Scopes)
	assert.NotContains(t, h.dump(), `"scopes"`)

	err := h.apply(&Rescope{Meta: h.metaV(3), Cluster: "c1", Node: "n1", FenceID: id,
		Restore: map[string]arrayclients.RestoreScope{"a1": {Wanted: []string{"pv-n1-a1"}}}})
	require.ErrorIs(t, err, ErrInvalid)
	assert.Contains(t, err.Error(), "needs v 4, got v 3")
	f = h.fence()
	assert.Len(t, f.Restore, 2, "the refused entry changed nothing")
	assert.True(t, f.Results["a2"].RestoreVerified)

	// A version 4 Rescope on a record whose unfence began in version 3
	// starts its scope list.
	require.NoError(t, h.apply(&Rescope{Meta: h.meta(), Cluster: "c1", Node: "n1", FenceID: id,
		Restore: map[string]arrayclients.RestoreScope{"a1": {Wanted: []string{"pv-n1-a1"}}}}))
	assert.Len(t, h.fence().Scopes, 1)

	// Bad fields are named.
	bad := &Rescope{Meta: h.meta(), Cluster: "c1", Node: "n1", FenceID: id,
		Restore: map[string]arrayclients.RestoreScope{"a1": {Wanted: []string{""}}}}
	require.ErrorContains(t, bad.Validate(), "restore[a1].wanted[0] is required")
	bad = &Rescope{Meta: h.meta(), Cluster: "c1", Node: "n1"}
	require.ErrorContains(t, bad.Validate(), "fenceID is required")
}
