package main

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/cluster/ledger"
)

var t0 = time.Date(2026, 11, 22, 6, 54, 0, 0, time.UTC)

// at is t0 plus s seconds.
func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

func TestSecondsAfter(t *testing.T) {
	assert.InDelta(t, 2.5, secondsAfter(at(1), at(3.5)), 1e-9)
	assert.InDelta(t, -1, secondsAfter(at(2), at(1)), 1e-9)
	assert.Zero(t, secondsAfter(time.Time{}, at(3)), "no reference recorded")
	assert.Zero(t, secondsAfter(at(3), time.Time{}), "milestone not reached")
}

// trialFence is a ledger record of a fence opened at 46 s, fenced at
// 46.3 s and evicted at 46.9 s.
func trialFence() *ledger.Fence {
	return &ledger.Fence{ID: "fence-7", Node: "worker-1", Kind: ledger.KindFence, OpenedAt: at(46),
		Reason: "heartbeat lost, corroborated by kubelet",
		Steps: []ledger.Step{
			{To: ledger.StateIntent, At: at(46), By: "a"},
			{To: ledger.StateFencing, At: at(46.1), By: "a"},
			{To: ledger.StateFenced, At: at(46.3), By: "a"},
			{To: ledger.StateTainted, At: at(46.5), By: "a"},
			{To: ledger.StateEvicted, At: at(46.9), By: "a"},
		}}
}

func TestTrialFillFromPowerOffAndRenewal(t *testing.T) {
	// Renewed at 0, powered off at 6, verdict at 45.9, replacements
	// Running at 47.5.
	tr := Trial{Node: "worker-1", LastRenew: at(0), Killed: at(6), Recovered: at(47.5), FenceID: "fence-7"}
	verdicts := map[string]map[string][]time.Time{"a": {"worker-1": {at(3), at(45.9)}}}
	tr.fill(trialFence(), verdicts)

	require.NotNil(t, tr.FromPowerOff)
	require.NotNil(t, tr.FromRenewal)
	off, ren := *tr.FromPowerOff, *tr.FromRenewal
	assert.InDelta(t, 39.9, off.Verdict, 1e-6, "the verdict logged before the power-off is not this death's")
	assert.InDelta(t, 40, off.Opened, 1e-6)
	assert.InDelta(t, 40.3, off.Fenced, 1e-6)
	assert.InDelta(t, 40.9, off.Evicted, 1e-6)
	assert.InDelta(t, 41.5, off.Running, 1e-6)
	assert.InDelta(t, 45.9, ren.Verdict, 1e-6)
	assert.InDelta(t, 46, ren.Opened, 1e-6)
	assert.InDelta(t, 46.3, ren.Fenced, 1e-6)
	assert.InDelta(t, 46.9, ren.Evicted, 1e-6)
	assert.InDelta(t, 47.5, ren.Running, 1e-6)
	// The figures every run has recorded are unchanged.
	assert.InDelta(t, 47.5, tr.TotalRecovery, 1e-6)
	assert.InDelta(t, 5.9, tr.DetectionOverhead, 1e-6)
	assert.InDelta(t, 6, tr.leaseAge(), 1e-6)
	assert.Equal(t, "kubelet", tr.Corroboration)
}

func TestTrialFiguresOfAnOlderRun(t *testing.T) {
	// An older run recorded the timestamps but not the new figures: they
	// are derived from the timestamps.
	old := Trial{LastRenew: at(0), Killed: at(4), Verdict: at(40), Intent: at(40.1), Fenced: at(40.4), Evicted: at(41), Recovered: at(41.2)}
	assert.InDelta(t, 37.2, old.fromPowerOff().Running, 1e-6)
	assert.InDelta(t, 36.0, old.fromPowerOff().Verdict, 1e-6)
	assert.InDelta(t, 41.2, old.fromRenewal().Running, 1e-6)
	// Without a power-off there is nothing to count from.
	old.Killed = time.Time{}
	assert.Equal(t, Since{}, old.fromPowerOff())
	// Recorded figures win over the timestamps.
	old.FromPowerOff = &Since{Running: 9}
	assert.InDelta(t, 9, old.fromPowerOff().Running, 1e-9)
}

func TestStormFiguresFromPowerOff(t *testing.T) {
	s := &StormResult{LastRenew: at(2), PowerOff: at(5), PowerOffDone: at(7),
		At: StormInstants{FirstOpened: at(45), AllOpened: at(50), AllFenced: at(60), AllEvicted: at(61), AllRunning: at(65)}}
	off := s.At.since(s.PowerOff)
	assert.Equal(t, StormSince{FirstOpened: 40, AllOpened: 45, AllFenced: 55, AllEvicted: 56, AllRunning: 60}, off)
	ren := s.At.since(s.LastRenew)
	assert.Equal(t, StormSince{FirstOpened: 43, AllOpened: 48, AllFenced: 58, AllEvicted: 59, AllRunning: 63}, ren)
	assert.Equal(t, off, s.fromPowerOff(), "derived from the instants when not recorded")

	// An unreached milestone stays 0 (shown as —).
	s.At.AllRunning = time.Time{}
	assert.Zero(t, s.At.since(s.PowerOff).AllRunning)

	// An older run: figures from the last renewal only.
	old := &StormResult{AllFenced: 669.9, AllEvicted: 671.7}
	assert.Equal(t, StormSince{}, old.fromPowerOff())
	assert.InDelta(t, 671.7, old.fromRenewal().AllEvicted, 1e-9)
}

// stormFence is a fence of node opened at open; fenced and evicted are
// offsets from it (negative: not reached).
func stormFence(id, node string, open, fenced, evicted float64) *ledger.Fence {
	f := &ledger.Fence{ID: id, Node: node, Kind: ledger.KindFence, OpenedAt: at(open), Steps: []ledger.Step{{To: ledger.StateIntent, At: at(open)}}}
	if fenced >= 0 {
		f.Steps = append(f.Steps, ledger.Step{To: ledger.StateFenced, At: at(open + fenced)})
	}
	if evicted >= 0 {
		f.Steps = append(f.Steps, ledger.Step{To: ledger.StateEvicted, At: at(open + evicted)})
	}
	return f
}

func TestStormNodeSteps(t *testing.T) {
	nodes := []StormNode{
		{Node: "worker-1", PowerOff: at(10), LastRenew: at(5)},
		{Node: "worker-2", PowerOff: at(10.5), LastRenew: at(8)},
		{Node: "worker-3", PowerOff: at(11)},
	}
	fences := []*ledger.Fence{
		stormFence("fence-1", "worker-1", 2, 0.5, 1),   // before the power-off: an earlier death
		stormFence("fence-2", "worker-1", 50, -1, -1),  // aborted
		stormFence("fence-3", "worker-1", 60, 3, 4),    // the one that evicted
		stormFence("fence-4", "worker-2", 55, 2, 2.5),  // evicted
		stormFence("fence-5", "worker-2", 120, 1, 1.5), // a later fence that also evicted
		stormFence("fence-6", "worker-3", 70, 5, -1),   // still open
		{ID: "fence-7", Node: "worker-3", Kind: ledger.KindUnfence, OpenedAt: at(90)},
		nil,
	}
	stormNodeSteps(nodes, fences)
	assert.Equal(t, "fence-3", nodes[0].FenceID)
	assert.Equal(t, at(60), nodes[0].Intent)
	assert.Equal(t, at(63), nodes[0].Fenced)
	assert.Equal(t, at(64), nodes[0].Evicted)
	assert.Equal(t, "fence-4", nodes[1].FenceID, "the first fence after the power-off that evicted")
	assert.Equal(t, "fence-6", nodes[2].FenceID, "an unfence is not the node's fence")
	assert.Equal(t, at(75), nodes[2].Fenced)
	assert.True(t, nodes[2].Evicted.IsZero())
}

func TestStepSpreads(t *testing.T) {
	nodes := []StormNode{
		{Node: "a", PowerOff: at(0), LastRenew: at(-5), Intent: at(40), Fenced: at(41), Evicted: at(42)},
		{Node: "b", PowerOff: at(1), LastRenew: at(-2), Intent: at(45), Fenced: at(50), Evicted: at(52)},
		{Node: "c", PowerOff: at(2), Intent: at(46)}, // lease not read, not fenced yet
	}
	got := stepSpreads(nodes)
	require.Len(t, got, 3)
	opened, fenced, evicted := got[0], got[1], got[2]
	assert.Equal(t, 3, opened.Nodes)
	assert.InDelta(t, 6, opened.Spread, 1e-9)
	assert.InDelta(t, 44, opened.PowerOffMedian, 1e-9)
	assert.InDelta(t, 44, opened.PowerOffMax, 1e-9)
	assert.InDelta(t, 47, opened.RenewalMax, 1e-9, "the node without a lease renewal is left out of the renewal figures")
	assert.Equal(t, 2, fenced.Nodes)
	assert.Equal(t, 2, evicted.Nodes)
	assert.InDelta(t, 10, evicted.Spread, 1e-9, "first to last eviction")
	assert.InDelta(t, 51, evicted.PowerOffMax, 1e-9)
	assert.InDelta(t, 54, evicted.RenewalMax, 1e-9)

	assert.Empty(t, stepSpreads([]StormNode{{Node: "a", PowerOff: at(0)}}), "no step reached")
}

func TestFamilyTimes(t *testing.T) {
	f1 := stormFence("fence-1", "a", 40, 1, 2)
	f1.Results = map[string]*ledger.ArrayResult{
		"pstore": {Array: "pstore", Attempts: 3, Failures: 1, Verified: true, LastAt: at(45)},
		"unity":  {Array: "unity", Attempts: 2, Verified: true, LastAt: at(41)},
	}
	f2 := stormFence("fence-2", "b", 50, 1, 2)
	f2.Results = map[string]*ledger.ArrayResult{
		"pstore":  {Array: "pstore", Attempts: 2, Verified: true, LastAt: at(51)},
		"pstore2": {Array: "pstore2", Attempts: 2, Verified: false, LastAt: at(52)},
	}
	nodes := []StormNode{{Node: "a", FenceID: "fence-1", Intent: at(40)}, {Node: "b", FenceID: "fence-2", Intent: at(50)}, {Node: "c"}}
	family := map[string]string{"pstore": "powerstore", "pstore2": "powerstore", "unity": "unity", "pmax": "powermax"}
	calls := map[arrayOp]OpTime{
		{"pstore", "verify"}:  {Count: 4, Seconds: 10},
		{"pstore2", "verify"}: {Count: 1, Seconds: 2},
		{"unity", "apply"}:    {Count: 2, Seconds: 1},
	}
	got := familyTimes(nodes, []*ledger.Fence{f1, f2}, family, calls)
	require.Len(t, got, 3)
	pmax, ps, un := got[0], got[1], got[2]
	assert.Equal(t, "powermax", pmax.Family)
	assert.Zero(t, pmax.Fences, "an array without fences is listed")
	assert.Equal(t, "powerstore", ps.Family)
	assert.Equal(t, []string{"pstore", "pstore2"}, ps.Arrays)
	assert.Equal(t, 2, ps.Fences, "only confirmed arrays count")
	assert.Equal(t, 7, ps.Attempts)
	assert.Equal(t, 1, ps.Failures)
	assert.InDelta(t, 5, ps.DoneMax, 1e-9)
	assert.Equal(t, OpTime{Count: 5, Seconds: 12}, ps.Calls["verify"])
	assert.InDelta(t, 2.4, ps.Calls["verify"].mean(), 1e-9)
	assert.Equal(t, "unity", un.Family)
	assert.InDelta(t, 1, un.DoneMedian, 1e-9)
	assert.InDelta(t, 0.5, un.Calls["apply"].mean(), 1e-9)
}

const metricsText = `# HELP fenced_array_request_duration_seconds Duration of array adapter operations in seconds.
# TYPE fenced_array_request_duration_seconds histogram
fenced_array_request_duration_seconds_bucket{array="pstore",op="verify",le="0.005"} 0
fenced_array_request_duration_seconds_bucket{array="pstore",op="verify",le="+Inf"} 357
fenced_array_request_duration_seconds_sum{array="pstore",op="verify"} 1660.05
fenced_array_request_duration_seconds_count{array="pstore",op="verify"} 357
fenced_array_request_duration_seconds_sum{op="apply",array="we\"ird"} 2.5
fenced_array_request_duration_seconds_count{op="apply",array="we\"ird"} 5
fenced_array_requests_total{array="pstore",op="verify",result="ok"} 300
`

func TestParseArrayRequests(t *testing.T) {
	got, err := parseArrayRequests(metricsText)
	require.NoError(t, err)
	assert.Equal(t, map[arrayOp]OpTime{
		{"pstore", "verify"}: {Count: 357, Seconds: 1660.05},
		{`we"ird`, "apply"}:  {Count: 5, Seconds: 2.5},
	}, got)

	_, err = parseArrayRequests("fenced_array_request_duration_seconds_sum{array=\"a\",op=\"plan\"} notanumber\n")
	assert.Error(t, err)
}

func TestRequestsDelta(t *testing.T) {
	before := []map[arrayOp]OpTime{
		{{"a", "plan"}: {Count: 10, Seconds: 1}, {"a", "health"}: {Count: 5, Seconds: 1}},
		{{"a", "plan"}: {Count: 50, Seconds: 9}},
	}
	after := []map[arrayOp]OpTime{
		{{"a", "plan"}: {Count: 14, Seconds: 3}, {"a", "health"}: {Count: 5, Seconds: 1}},
		{{"a", "plan"}: {Count: 2, Seconds: 1}}, // restarted: counts from zero
	}
	got := requestsDelta(before, after)
	assert.Equal(t, map[arrayOp]OpTime{{"a", "plan"}: {Count: 6, Seconds: 3}}, got, "no request: left out")
}

func TestBaselineFromRenewal(t *testing.T) {
	bl := &BaselineResult{PowerOff: at(6), LastRenew: at(1), NotReadyAfter: 47.7, TerminatingAfter: 348}
	got := bl.fromRenewal()
	assert.InDelta(t, 52.7, got.NotReady, 1e-6)
	assert.InDelta(t, 353, got.Terminating, 1e-6)
	assert.Zero(t, got.Running, "never replaced")

	old := &BaselineResult{NotReadyAfter: 47.7}
	assert.Equal(t, BaselineSince{}, old.fromRenewal(), "an older run recorded no renewal")
}

// olderRun is a results.json of a run from before the power-off figures:
// none of the new fields.
const olderRun = `{
  "startedAt": "2026-11-22T06:54:20Z", "duration": "19m12s",
  "host": {"cpus": 2, "cpuModel": "x", "goVersion": "go1.26.8", "loadAverageAtStart": "1 1 1"},
  "params": {"nodes": 100, "podsPerNode": 12, "trials": 1},
  "single": {"grace": "40s", "trials": [{
    "node": "worker-1", "lastRenew": "2026-11-22T06:54:43Z", "killed": "2026-11-22T06:54:48Z",
    "verdict": "2026-11-22T06:55:23.1Z", "intent": "2026-11-22T06:55:23.2Z", "fenced": "2026-11-22T06:55:23.5Z",
    "evicted": "2026-11-22T06:55:24Z", "recovered": "2026-11-22T06:55:24.5Z", "fenceID": "fence-1",
    "detectionOverheadSeconds": 0.1, "fenceSeconds": 0.3, "evictionSeconds": 0.5,
    "graceToAllDeletedSeconds": 1, "totalRecoverySeconds": 41.5}]},
  "baseline": {"nodes": 100, "pods": 12, "node": "worker-1", "watched": "10m0s",
    "notReadyAfterSeconds": 47.7, "terminatingAfterSeconds": 348.1, "final": {"Terminating on the dead node": 12}},
  "storm": {"nodes": 1000, "dying": 100, "stormLimit": 120, "firstOpenedSeconds": 306.1, "allOpenedSeconds": 332.6,
    "allFencedSeconds": 669.9, "allEvictedSeconds": 671.7, "allReplacementsRunningSeconds": 671.7}
}`

func TestMarkdownOfAnOlderRun(t *testing.T) {
	var r Results
	require.NoError(t, json.Unmarshal([]byte(olderRun), &r))
	md := markdown(&r)
	// The storm's figures from the last renewal are kept; from power-off
	// there are none.
	assert.Contains(t, md, "| last renewal | 306.1 | 332.6 | 669.9 | 671.7 | 671.7 |")
	assert.Contains(t, md, "| power-off | — | — | — | — | — |")
	// The single trial's timestamps give its figures from power-off.
	assert.Contains(t, md, "| all replacement pods Running | 36.50 | 36.50 | 36.50 | 36.50 | 41.50 | 41.50 | 41.50 | 41.50 |")
	// The baseline counted from the power-off; the renewal was not read.
	assert.Contains(t, md, "| node marked NotReady | 47.7 | — |")
	assert.Contains(t, md, "| all replacements Running | — | — |")
	assert.NotContains(t, md, "first → last", "no per-node storm figures in an older run")
}

func TestResultsRoundTrip(t *testing.T) {
	s := &StormResult{Nodes: 1000, Dying: 2, LastRenew: at(0), PowerOff: at(3), PowerOffDone: at(3.5),
		At: StormInstants{FirstOpened: at(41), AllOpened: at(42), AllFenced: at(50), AllEvicted: at(51), AllRunning: at(53)}}
	fromPowerOff := s.At.since(s.PowerOff)
	s.FromPowerOff = &fromPowerOff
	s.AllEvicted = 51
	s.DyingNodes = []StormNode{
		{Node: "worker-1", PowerOff: at(3), LastRenew: at(0), Intent: at(41), Fenced: at(45), Evicted: at(46)},
		{Node: "worker-2", PowerOff: at(3.5), LastRenew: at(-1), Intent: at(42), Fenced: at(50), Evicted: at(51)},
	}
	s.Steps = stepSpreads(s.DyingNodes)
	s.Families = []FamilyTime{{Family: "powerstore", Arrays: []string{"pstore"}, Fences: 2, DoneMedian: 4, DoneP90: 8, DoneMax: 8,
		Attempts: 4, Calls: map[string]OpTime{"verify": {Count: 4, Seconds: 2}}}}
	in := &Results{Storm: s, Baseline: &BaselineResult{PowerOff: at(3), LastRenew: at(0), NotReadyAfter: 45, Watched: "10m0s"}}
	b, err := json.Marshal(in)
	require.NoError(t, err)
	var out Results
	require.NoError(t, json.Unmarshal(b, &out))
	assert.Equal(t, fromPowerOff, out.Storm.fromPowerOff())
	md := markdown(&out)
	assert.Contains(t, md, "| power-off | 38.0 | 39.0 | 47.0 | 48.0 | 50.0 |  |")
	assert.Contains(t, md, "The harness stopped the 2 nodes over 0.5 s; the last renewal of their Leases came 3.0 s before it began.")
	assert.Contains(t, md, "| evicted (pods force-deleted) | 2 | 5.0 |")
	assert.Contains(t, md, "| powerstore | 2 | 4.0 | 8.0 | 8.0 | 4 (0) | — | — | 4, 0.50 | — |")
	assert.Contains(t, md, "| node marked NotReady | 45.0 | 48.0 |")
	assert.Contains(t, md, "| all replacements Running | never (watched 10m0s) | never (watched 10m0s) |")
	assert.Contains(t, md, "(all fenced 0 s, all evicted 51 s; from power-off 47 s and 48 s; first to last eviction 5 s).")
	assert.Contains(t, md, "**From power-off**", "the header says what power-off means")
}

// TestKillPhasesSpreadOverTheRenewalCycle: the trials' power-offs cover
// the renewal cycle evenly, so the figures from the power-off average
// over where in its cycle a node dies.
func TestKillPhasesSpreadOverTheRenewalCycle(t *testing.T) {
	const n = 20
	var sum time.Duration
	prev := time.Duration(-1)
	for i := range n {
		ph := killPhase(i, n)
		assert.Greater(t, ph, prev, "phases ascend")
		assert.Positive(t, ph)
		assert.Less(t, ph, renewInterval)
		prev = ph
		sum += ph
	}
	assert.Equal(t, renewInterval/2, sum/n, "the mean phase is half the cycle")
	assert.Equal(t, renewInterval/2, killPhase(0, 1))
	assert.Equal(t, renewInterval/2, killPhase(0, 0), "no trials: no division by zero")
}
