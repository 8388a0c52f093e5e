package stonith

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/cluster/ledger"
	"github.com/fenced-project/fenced/detector"
)

func TestRegressedVolumesReadTheNote(t *testing.T) {
	note := RegressionNote + " (was evicted): pflex-1: sdc 0a1b mapping of vol-9, volume pv-db-0, volume pv-db-1; " +
		"pstore-1: initiator iqn.n1, volume pv-web-0"
	assert.Equal(t, map[string][]string{"pflex-1": {"pv-db-0", "pv-db-1"}, "pstore-1": {"pv-web-0"}}, regressedVolumes(note))
	assert.Empty(t, regressedVolumes(RegressionNote+" (was fenced): a1: v1"), "no volume named")
	assert.Empty(t, regressedVolumes("footprint grew after the eviction: pv-late"))
	assert.Equal(t, map[string][]string{"a1": {"pv-a"}}, regressedVolumes(RegressionNote+" (was evicted): a1: volume pv-a, volume pv-trunc..."),
		"a volume cut short by the note's bound is not guessed")
}

// TestRepeatedRegressionGapsCountOverFences: RepeatedRegressions
// regressions of one volume on one array within the window, over the
// node's fences, make a gap; fewer, older ones, or the same volume on
// another array do not.
func TestRepeatedRegressionGapsCountOverFences(t *testing.T) {
	now := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	back := func(ago time.Duration, what string) ledger.Step {
		return ledger.Step{To: ledger.StateFencing, At: now.Add(-ago), Note: RegressionNote + " (was evicted): " + what}
	}
	first := &ledger.Fence{ID: "fence-1", Steps: []ledger.Step{
		{To: ledger.StateFencing, At: now.Add(-50 * time.Minute), Note: "plans committed"},
		back(40*time.Minute, "a1: volume pv-x"),
		back(30*time.Minute, "a1: volume pv-x; a2: volume pv-y"),
		back(2*time.Hour, "a2: volume pv-y"),
	}}
	second := &ledger.Fence{ID: "fence-7", Steps: []ledger.Step{back(time.Minute, "a1: v1, volume pv-x; a3: volume pv-y")}}
	gaps := repeatedRegressionGaps([]*ledger.Fence{first, second}, now)
	require.Len(t, gaps, 1, "%+v", gaps)
	g := gaps[0]
	assert.Equal(t, "pv-x", g.Volume)
	assert.Equal(t, "a1", g.Array)
	assert.Equal(t, arrayclients.GapRepeatedRegression, g.Reason)
	assert.Contains(t, g.Detail, "again 3 times within 1h0m0s")
	assert.Contains(t, g.Detail, "fence fence-1, fence-7")
	assert.False(t, g.Reason.Blocking())

	assert.Empty(t, repeatedRegressionGaps([]*ledger.Fence{first, second}, now.Add(41*time.Minute)),
		"the gap leaves once the regressions are older than the window")
	assert.Empty(t, repeatedRegressionGaps([]*ledger.Fence{first}, now))
}

// TestRepeatedRegressionIsAGapNotAHold: a volume whose access held checks
// find again three times is, once its fence is undone, a
// repeated-regression gap of the node in /status, the metric, an Event
// and `fenced plan`; the node is still fenced when it fails again.
func TestRepeatedRegressionIsAGapNotAHold(t *testing.T) {
	w := newWorld(t, heldPeriod(20*time.Millisecond))
	_, stop := w.lead()
	defer stop()
	w.verdict("n1", detector.Failed)
	w.waitState(ledger.StateEvicted)
	for i := 1; i <= RepeatedRegressions; i++ {
		w.regrant("a1")
		w.waitRegressions(i)
	}
	ctx := context.Background()
	w.ctrl.sweepProtection(ctx)
	assert.Empty(t, w.ctrl.Status().Unprotected, "a node with an open fence is left to the pipeline")

	w.reboot("boot-2")
	w.waitClosed()
	w.ctrl.sweepProtection(ctx)
	st := w.ctrl.Status()
	require.Len(t, st.Unprotected, 1, "%+v", st.Unprotected)
	u := st.Unprotected[0]
	assert.Equal(t, "n1", u.Node)
	require.Len(t, u.Gaps, 1, "%+v", u.Gaps)
	assert.Equal(t, "pv-a1", u.Gaps[0].Volume)
	assert.Equal(t, "a1", u.Gaps[0].Array)
	assert.Equal(t, arrayclients.GapRepeatedRegression, u.Gaps[0].Reason)
	assert.Contains(t, u.Gaps[0].Detail, fmt.Sprintf("again %d times", RepeatedRegressions))
	assert.InDelta(t, 1.0, value(w.ctrl.metrics.unprotected.WithLabelValues("c1", string(arrayclients.GapRepeatedRegression))), 0)
	assert.Equal(t, 1, w.kube.eventReasons()["FenceUnprotected"])
	plan, err := w.ctrl.PlanNode(ctx, PlanRequest{Cluster: "c1", Node: "n1"})
	require.NoError(t, err)
	assert.False(t, plan.Protected)
	assert.Contains(t, plan.Gaps, u.Gaps[0])

	// It fails again: fenced fences it (the volume can be cut).
	w.verdict("n1", detector.Failed)
	require.Eventually(t, func() bool {
		f := w.group.fence("c1", "n1")
		return f != nil && f.State == ledger.StateEvicted
	}, 10*time.Second, 2*time.Millisecond, "the node was not fenced again; status %+v", w.ctrl.Status())
	assert.False(t, w.arrays["a1"].hasAccess("n1"))
}
