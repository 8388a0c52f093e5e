package detector

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
)

var (
	gone   = arrayclients.Health{Connectivity: arrayclients.Disconnected, IO: arrayclients.IOIdle}
	alive  = arrayclients.Health{Connectivity: arrayclients.Connected, IO: arrayclients.IOActive}
	noConn = arrayclients.Health{Connectivity: arrayclients.Disconnected, IO: arrayclients.IOActive}
)

// episode drives a Machine through one node's death, with the time of
// every observation chosen by the test: the node renewed its Lease at t0
// and never again; sweeps sample its array every poll interval from 1 s
// after the renewal (sweep says what the array shows at an offset, ok
// false for no answer); when the machine asks for the node to be probed,
// its kubelet answers unreachable, its Lease read-back agrees and its
// array is sampled too, at most once per poll interval. A second node
// stays healthy. The machine is evaluated every 250 ms.
type episode struct {
	p     Policy
	sweep func(off time.Duration) (arrayclients.Health, bool)
	// kubeletFrom is the offset from which the kubelet is unreachable.
	kubeletFrom time.Duration

	// Results.
	failedAt    time.Duration // offset of the Failed verdict (0: none)
	verdict     Verdict       // the Failed verdict, or the last one
	firstProbe  time.Duration // offset of the first probe asked for
	unhealthy   int           // the most nodes the storm guard counted
	evaluations []time.Duration
}

func (e *episode) run(t *testing.T, until time.Duration) {
	t.Helper()
	m, err := NewMachine("c1", e.p)
	require.NoError(t, err)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const dead, live = "node-a", "node-b"
	for _, n := range []string{dead, live} {
		m.ObserveNode(NodeObservation{Node: n, Ready: "True", ObservedAt: t0.Add(-time.Minute)})
		m.ObserveIdentities(IdentityObservation{Node: n, Arrays: []string{"pflex"}, ObservedAt: t0.Add(-time.Minute)})
		m.ObserveLease(LeaseObservation{Node: n, RenewTime: t0, Holder: n, ObservedAt: t0})
	}
	sample := func(at time.Time) {
		if h, ok := e.sweep(at.Sub(t0)); ok {
			m.ObserveArray(ArrayObservation{Node: dead, Array: "pflex", Health: h, ObservedAt: at})
		}
		m.ObserveArray(ArrayObservation{Node: live, Array: "pflex", Health: alive, ObservedAt: at})
	}
	var lastProbe time.Time
	nextSweep := t0.Add(time.Second)
	for off := time.Duration(0); off <= until; off += 250 * time.Millisecond {
		now := t0.Add(off)
		if off > 0 && off%(10*time.Second) == 0 {
			m.ObserveLease(LeaseObservation{Node: live, RenewTime: now, Holder: live, ObservedAt: now})
		}
		if !now.Before(nextSweep) {
			sample(now)
			nextSweep = nextSweep.Add(e.p.PollInterval)
		}
		res := m.Evaluate(Self{APIReachable: true, APICheckedAt: now, WatchSynced: true, Quorum: true, Replicas: 1}, now)
		e.unhealthy = max(e.unhealthy, res.Storm.Unhealthy)
		e.evaluations = append(e.evaluations, off)
		for _, v := range res.Verdicts {
			if v.Node != dead {
				continue
			}
			e.verdict = v
			if v.State == Failed {
				e.failedAt = off
				return
			}
		}
		if slices.Contains(res.Probe, dead) && (lastProbe.IsZero() || now.Sub(lastProbe) >= e.p.PollInterval) {
			if lastProbe.IsZero() {
				e.firstProbe = off
			}
			lastProbe = now
			m.ObserveProbe(ProbeObservation{Cluster: "c1", Node: dead, Replica: "r1", Reachable: off < e.kubeletFrom, At: now})
			m.ObserveLease(LeaseObservation{Node: dead, RenewTime: t0, Holder: dead, ReadBack: true, ObservedAt: now})
			if h, ok := e.sweep(off); ok {
				m.ObserveArray(ArrayObservation{Node: dead, Array: "pflex", Health: h, ObservedAt: now})
			}
		}
	}
}

// quietFor returns the dead node's array's quiet run at the verdict.
func (e *episode) quietFor() time.Duration {
	for _, a := range e.verdict.Evidence.Arrays {
		if a.Array == "pflex" && !a.QuietSince.IsZero() {
			return e.verdict.EvaluatedAt.Sub(a.QuietSince)
		}
	}
	return 0
}

// deadFrom is a sweep of a node whose storage went at off.
func deadFrom(at time.Duration) func(time.Duration) (arrayclients.Health, bool) {
	return func(off time.Duration) (arrayclients.Health, bool) {
		if off < at {
			return alive, true
		}
		return gone, true
	}
}

// With the arrays swept every poll interval, a node that died right after
// its last renewal has its I/O window and its kubelet run complete before
// its heartbeat is After old: the early verdict comes at After, not at
// ProbeFrom + IOWindow. Its kubelet is probed from the first sweep that
// showed it gone, well before ProbeFrom; it does not count towards the
// storm limit before After.
func TestHistoryMakesTheEvidenceReadyAtAfter(t *testing.T) {
	p := earlyPolicy()
	e := &episode{p: p, sweep: deadFrom(500 * time.Millisecond), kubeletFrom: 500 * time.Millisecond}
	e.run(t, 40*time.Second)
	require.NotZero(t, e.failedAt, "no verdict; last %+v", e.verdict)
	assert.True(t, e.verdict.Evidence.Early)
	assert.Equal(t, p.Early.After, e.failedAt, "the verdict when a renewal was missed, not before")
	assert.Less(t, e.firstProbe, p.Early.ProbeFrom, "the kubelet probed from the sweep that showed the node gone")
	assert.Equal(t, time.Second, e.firstProbe)
	assert.GreaterOrEqual(t, e.quietFor(), p.Early.IOWindow)
	assert.False(t, e.verdict.Evidence.LeaseConfirmedAt.IsZero())
	assert.Equal(t, 1, e.unhealthy, "counted from After only")

	// Without the history the same death waits for the probes from
	// ProbeFrom and a whole window after the first of them.
	e = &episode{p: p, sweep: func(off time.Duration) (arrayclients.Health, bool) {
		return gone, off >= p.Early.ProbeFrom // answers only when probed
	}, kubeletFrom: 500 * time.Millisecond}
	e.run(t, 40*time.Second)
	require.NotZero(t, e.failedAt)
	assert.GreaterOrEqual(t, e.failedAt, p.Early.ProbeFrom+p.Early.IOWindow)
}

// Evidence from the history counts only when it covers the whole window:
// a node whose storage went 8 s after its last renewal is Failed a whole
// I/O window after the first sweep that showed it quiet, later than
// After.
func TestHistoryCountsOnlyAWholeWindow(t *testing.T) {
	p := earlyPolicy()
	for _, at := range []time.Duration{4 * time.Second, 6 * time.Second, 8 * time.Second, 9500 * time.Millisecond} {
		e := &episode{p: p, sweep: deadFrom(at), kubeletFrom: at}
		e.run(t, 40*time.Second)
		require.NotZero(t, e.failedAt, "storage gone at %v: no verdict", at)
		assert.True(t, e.verdict.Evidence.Early)
		assert.GreaterOrEqual(t, e.failedAt, p.Early.After)
		assert.GreaterOrEqual(t, e.failedAt, at+p.Early.IOWindow, "storage gone at %v", at)
		assert.GreaterOrEqual(t, e.quietFor(), p.Early.IOWindow, "storage gone at %v", at)
		assert.Less(t, e.failedAt, max(p.Early.After, at+p.Early.IOWindow+p.PollInterval)+time.Second,
			"storage gone at %v: evidence complete, verdict late", at)
	}
}

// A gap in the history longer than the evidence age restarts the quiet
// run: a sample at 1 s, none until 13 s. Without the restart the run from
// 1 s would count as soon as a fresh sample came (at 13 s); with it the
// window starts again at 13 s.
func TestHistoryGapRestartsTheRun(t *testing.T) {
	p := earlyPolicy()
	const resumed = 13 * time.Second
	e := &episode{p: p, kubeletFrom: 0, sweep: func(off time.Duration) (arrayclients.Health, bool) {
		return gone, off < 2*time.Second || off >= resumed
	}}
	e.run(t, 40*time.Second)
	require.NotZero(t, e.failedAt)
	assert.True(t, e.verdict.Evidence.Early)
	assert.GreaterOrEqual(t, e.failedAt, resumed+p.Early.IOWindow)
	assert.GreaterOrEqual(t, e.quietFor(), p.Early.IOWindow)
	assert.LessOrEqual(t, e.quietFor(), e.failedAt-resumed)
}

// No verdict before After, however long the history has shown the node
// gone (a node whose storage went first and whose heartbeat stopped
// later): every evaluation before After leaves it Healthy.
func TestHistoryNoVerdictBeforeAfter(t *testing.T) {
	p := earlyPolicy()
	e := &episode{p: p, sweep: func(time.Duration) (arrayclients.Health, bool) { return gone, true }}
	e.run(t, 40*time.Second)
	require.NotZero(t, e.failedAt)
	assert.Equal(t, p.Early.After, e.failedAt)
	assert.GreaterOrEqual(t, e.quietFor(), p.Early.After-time.Second, "quiet since the first sweep")
}

// A node whose array still sees I/O during the window is not Failed
// early: disconnected but moving data the whole time, it waits for the
// grace; I/O seen once in the middle of the window restarts the run.
func TestHistoryIOInTheWindowIsNotQuiet(t *testing.T) {
	p := earlyPolicy()
	e := &episode{p: p, sweep: func(time.Duration) (arrayclients.Health, bool) { return noConn, true }}
	e.run(t, 45*time.Second)
	if e.failedAt != 0 {
		assert.False(t, e.verdict.Evidence.Early, "verdict %+v", e.verdict)
		assert.GreaterOrEqual(t, e.failedAt, p.HeartbeatGrace)
	}

	e = &episode{p: p, sweep: func(off time.Duration) (arrayclients.Health, bool) {
		if off >= 8*time.Second && off < 10*time.Second {
			return noConn, true // the sweep at 9 s sees I/O
		}
		return gone, true
	}}
	e.run(t, 40*time.Second)
	require.NotZero(t, e.failedAt)
	assert.True(t, e.verdict.Evidence.Early)
	assert.GreaterOrEqual(t, e.failedAt, 11*time.Second+p.Early.IOWindow, "the window starts again at the first quiet sweep after the I/O")
}

// A live node whose witness shows its SDC disconnected (a storage path
// flap) has its kubelet probed before ProbeFrom, is never Failed and never
// counts towards the storm limit while its heartbeat is fresh.
func TestHistoryProbesAFlappingLiveNodeWithoutAVerdict(t *testing.T) {
	p := earlyPolicy()
	w := newWorld(t, p, 3)
	w.sweep = true
	w.run(30 * time.Second)
	w.arrays["node-01"]["pstore"] = gone // kubelet and Lease alive
	probed := false
	for range 60 {
		w.run(time.Second)
		probed = probed || slices.Contains(w.lastEval.Probe, "node-01")
		assert.Zero(t, w.lastEval.Storm.Unhealthy)
	}
	assert.True(t, probed)
	assert.Empty(t, w.ever(Failed))
	w.arrays["node-01"]["pstore"] = alive
	w.run(30 * time.Second)
	assert.NotContains(t, w.lastEval.Probe, "node-01", "no longer probed once the array sees it again")
}

// In the simulated world, with sweeps, a node killed at every phase of its
// renewal cycle is Failed early, never before After, never before a whole
// window of sweeps showed it quiet, and always by the later of After and
// the kill plus the window plus two polls (one to see it, one to evaluate).
func TestHistoryWorldEveryPhase(t *testing.T) {
	p := earlyPolicy()
	for phase := range 10 {
		w := newWorld(t, p, 5)
		w.replicas = []string{"r1", "r2", "r3"}
		w.sweep = true
		const node = "node-02"
		w.run(30 * time.Second)
		for w.lastRenewSeen[node] != w.now {
			w.run(time.Second)
		}
		renewed := w.now
		w.run(time.Duration(phase) * time.Second)
		w.kill(node)
		killed := w.now.Sub(renewed)
		w.run(40 * time.Second)
		lat := failedAfter(t, w, node)
		v := w.verdict(node)
		assert.True(t, v.Evidence.Early, "phase %d", phase)
		assert.GreaterOrEqual(t, lat, p.Early.After, "phase %d", phase)
		assert.GreaterOrEqual(t, lat, killed+p.Early.IOWindow, "phase %d", phase)
		assert.LessOrEqual(t, lat, max(p.Early.After, killed+p.Early.IOWindow)+2*p.PollInterval, "phase %d", phase)
	}
}

// When more nodes than the storm limit are shown gone at once (an
// array-wide event: an MDM failover, the storage network down), none is
// probed before ProbeFrom: the storm guard would hold their verdicts, and
// probing them all every poll would load the API server and the arrays.
// One node gone is probed.
func TestHistoryArrayWideEventProbesNobodyEarly(t *testing.T) {
	p := earlyPolicy()
	w := newWorld(t, p, 6) // storm limit 33%: 1 of 6
	w.sweep = true
	w.run(30 * time.Second)
	for _, n := range w.nodes[:2] {
		w.arrays[n]["pstore"] = gone // kubelets and Leases alive
	}
	for range 30 {
		w.run(time.Second)
		assert.Empty(t, w.lastEval.Probe)
	}
	w.arrays[w.nodes[1]]["pstore"] = alive
	probed := false
	for range 30 {
		w.run(time.Second)
		probed = probed || slices.Contains(w.lastEval.Probe, w.nodes[0])
	}
	assert.True(t, probed, "one node gone is probed")
	assert.Empty(t, w.ever(Failed))
}
