package stonith

import (
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/cluster/ledger"
	"github.com/fenced-project/fenced/detector"
)

// undoCall is one Undo an array was asked for, with what the ledger held
// when it was asked.
type undoCall struct {
	wanted []string
	// scopes is how many scopes the record held then.
	scopes int
	failed bool
	// changed: the test's change was made in this call.
	changed bool
}

// recordUndos makes array a record every Undo; while failing (until the
// returned clear), a's Undo fails after recording, and each failure asks
// change until it reports that it made the change a test makes meanwhile.
func (w *world) recordUndos(a string, change func() bool) (calls func() []undoCall, clear func()) {
	var (
		mu   sync.Mutex
		out  []undoCall
		fail = true
		done bool
	)
	w.arrays[a].set(func(fa *fakeArray) {
		fa.undoFn = func(_ arrayclients.Plan, scope arrayclients.RestoreScope) error {
			mu.Lock()
			defer mu.Unlock()
			c := undoCall{wanted: slices.Clone(scope.Wanted), failed: fail}
			if f := w.group.fence("c1", "n1"); f != nil {
				c.scopes = len(f.Scopes)
			}
			if fail && !done && change != nil && change() {
				done, c.changed = true, true
			}
			out = append(out, c)
			if !fail {
				return nil
			}
			return errors.New("injected: array busy")
		}
	})
	return func() []undoCall {
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(out)
		}, func() {
			mu.Lock()
			fail = false
			mu.Unlock()
		}
}

// setGone marks the node's attachment of pv as being deleted (gone) or
// not: Kubernetes no longer wants, or wants again, pv on n1.
func (w *world) setGone(pv string, gone bool) {
	w.fp.mu.Lock()
	defer w.fp.mu.Unlock()
	w.fp.gone[pv] = gone
}

// TestRestoreRecomputesScopeOnEveryAttempt (ledger version 4): the first
// restore attempt on a1 fails; meanwhile pv-a1's VolumeAttachment to the
// node goes away and pv-a2's comes back. The retry records the new scope
// before it writes, gives a1 back without pv-a1, and restores a2 (already
// read back under the old scope, without pv-a2) again with pv-a2. Both
// computed scopes are in the record.
func TestRestoreRecomputesScopeOnEveryAttempt(t *testing.T) {
	w := newWorld(t)
	_, stop := w.lead()
	defer stop()
	w.verdict("n1", detector.Failed)
	w.waitState(ledger.StateEvicted)

	w.setGone("pv-a2", true) // not wanted when the unfence begins
	calls, clear := w.recordUndos("a1", func() bool {
		// Once a2 is restored and read back under the first scope.
		f := w.group.fence("c1", "n1")
		if f == nil || f.Results["a2"] == nil || !f.Results["a2"].RestoreVerified {
			return false
		}
		w.setGone("pv-a1", true)
		w.setGone("pv-a2", false)
		return true
	})
	var a2Scopes [][]string
	var a2mu sync.Mutex
	w.arrays["a2"].set(func(fa *fakeArray) {
		fa.undoFn = func(_ arrayclients.Plan, scope arrayclients.RestoreScope) error {
			a2mu.Lock()
			defer a2mu.Unlock()
			a2Scopes = append(a2Scopes, slices.Clone(scope.Wanted))
			return nil
		}
	})
	w.reboot("boot-2")
	w.waitState(ledger.StateUnfenceIntent)

	require.Eventually(t, func() bool {
		f := w.group.fence("c1", "n1")
		return f != nil && len(f.Scopes) == 2
	}, 10*time.Second, 2*time.Millisecond, "the changed scope was never recorded")
	clear()
	w.waitClosed()

	h := w.group.history("c1", "n1")
	f := h[len(h)-1]
	require.Len(t, f.Scopes, 2, "%+v", f.Scopes)
	assert.Equal(t, map[string]arrayclients.RestoreScope{"a1": {Wanted: []string{"pv-a1"}}, "a3": {Wanted: []string{"pv-a3"}}},
		f.Scopes[0].Restore, "the scope of unfence-intent")
	assert.Equal(t, map[string]arrayclients.RestoreScope{"a2": {Wanted: []string{"pv-a2"}}, "a3": {Wanted: []string{"pv-a3"}}},
		f.Scopes[1].Restore, "the scope of the retry")
	assert.Contains(t, f.Scopes[1].Note, "no longer wanted on the node: pv-a1 (a1)")
	assert.Contains(t, f.Scopes[1].Note, "newly wanted: pv-a2 (a2)")
	assert.Equal(t, f.Scopes[1].Restore, f.Restore)

	cs := calls()
	k := slices.IndexFunc(cs, func(c undoCall) bool { return c.changed })
	require.GreaterOrEqual(t, k, 0, "%+v", cs)
	require.Greater(t, len(cs), k+1, "%+v", cs)
	for i, c := range cs[:k+1] {
		assert.Equal(t, undoCall{wanted: []string{"pv-a1"}, scopes: 1, failed: true, changed: i == k}, c, "a1's attempt %d", i+1)
	}
	for i, c := range cs[k+1:] {
		assert.Empty(t, c.wanted, "a1's attempt %d gave pv-a1 back after Kubernetes let it go: %+v", k+i+2, cs)
		assert.Equal(t, 2, c.scopes, "a1's attempt %d wrote before the new scope was recorded: %+v", k+i+2, cs)
	}
	assert.False(t, cs[len(cs)-1].failed)

	a2mu.Lock()
	defer a2mu.Unlock()
	require.GreaterOrEqual(t, len(a2Scopes), 2, "a2 is restored again under its new scope: %v", a2Scopes)
	assert.Empty(t, a2Scopes[0])
	assert.Equal(t, []string{"pv-a2"}, a2Scopes[len(a2Scopes)-1])
}

// TestRestoreKeepsRecordedScopeInAVersion3Group: a leader whose group
// still runs ledger version 3 (a replica of the previous build) cannot
// record a new scope. It restores with the one recorded at unfence-intent,
// as version 3 does, and says so in its log, once.
func TestRestoreKeepsRecordedScopeInAVersion3Group(t *testing.T) {
	g := newLegacyGroup()
	m := g.meta()
	m.V = 3
	g.must(t, &ledger.SetLedgerVersion{Meta: m, LedgerVersion: 3})
	logs := &lockedBuffer{}
	w := newWorldOn(t, g, func(cfg *Config) {
		cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	})
	_, stop := w.lead()
	defer stop()
	w.verdict("n1", detector.Failed)
	w.waitState(ledger.StateEvicted)
	calls, clear := w.recordUndos("a1", func() bool { w.setGone("pv-a1", true); return true })
	w.reboot("boot-2")
	w.waitState(ledger.StateUnfenceIntent)
	require.Eventually(t, func() bool { return len(calls()) >= 3 }, 10*time.Second, 2*time.Millisecond)
	clear()
	w.waitClosed()

	h := w.group.history("c1", "n1")
	f := h[len(h)-1]
	assert.Empty(t, f.Scopes, "version 3 records no scope list")
	assert.Equal(t, []string{"pv-a1"}, f.Restore["a1"].Wanted, "the recorded scope is kept")
	for i, c := range calls() {
		assert.Equal(t, []string{"pv-a1"}, c.wanted, "attempt %d", i+1)
	}
	st := w.group.fsm.Copy()
	assert.Zero(t, st.Rejected, "%v", st.Rejections)
	assert.Equal(t, 1, strings.Count(logs.String(), "the group runs ledger version 3, recomputed scopes need version 4"), logs.String())
}
