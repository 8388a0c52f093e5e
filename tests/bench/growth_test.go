package main

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLeastSquares(t *testing.T) {
	// Points on y = 2 + 0.5x: the line itself, R² 1.
	a, b, r2 := leastSquares([]float64{0, 2, 4, 6}, []float64{2, 3, 4, 5})
	assert.InDelta(t, 2, a, 1e-12)
	assert.InDelta(t, 0.5, b, 1e-12)
	assert.InDelta(t, 1, r2, 1e-12)

	// (1,1), (2,3), (3,2): mean x 2, mean y 2, Sxy 1, Sxx 2, so b 0.5,
	// a 1; residuals -0.5, 1, -0.5 (SSres 1.5) over SStot 2: R² 0.25.
	a, b, r2 = leastSquares([]float64{1, 2, 3}, []float64{1, 3, 2})
	assert.InDelta(t, 1, a, 1e-12)
	assert.InDelta(t, 0.5, b, 1e-12)
	assert.InDelta(t, 0.25, r2, 1e-12)

	// A figure that does not vary: a flat line, exact.
	a, b, r2 = leastSquares([]float64{250, 500}, []float64{7, 7})
	assert.InDelta(t, 7, a, 1e-12)
	assert.InDelta(t, 0, b, 1e-12)
	assert.InDelta(t, 1, r2, 1e-12)
}

// steadyAt is a steady run at n nodes whose figures lie on known lines:
// leader CPU 1 + 3 per 1,000 nodes, leader RSS 40 + 50 MB per 1,000,
// follower CPU 0.5 + 2 per 1,000, follower RSS 30 + 40 MB per 1,000.
func steadyAt(n int) SteadyResult {
	k := float64(n) / 1000
	return SteadyResult{Nodes: n, Window: "2m0s", Learned: 10 + 30*k,
		Leader:   Process{Replica: "a", CPUPercent: 1 + 3*k, RSSBytes: int64((40 + 50*k) * 1e6)},
		Follower: Process{Replica: "b", CPUPercent: 0.5 + 2*k, RSSBytes: int64((30 + 40*k) * 1e6)}}
}

func TestFitGrowth(t *testing.T) {
	failed := SteadyResult{Nodes: 2000, Window: "2m0s", Error: "kwok lagged"}
	fit := fitGrowth([]SteadyResult{steadyAt(250), steadyAt(500), steadyAt(1000), failed})
	require.NotNil(t, fit)
	assert.Equal(t, []int{250, 500, 1000}, fit.Sizes, "a size that failed is left out")
	want := map[string][2]float64{ // intercept, per 1,000 nodes
		figLeaderCPU: {1, 3}, figLeaderRSS: {40, 50}, figFollowerCPU: {0.5, 2}, figFollowerRSS: {30, 40},
	}
	require.Len(t, fit.Figures, len(want))
	for _, f := range fit.Figures {
		w, ok := want[f.Figure]
		require.True(t, ok, f.Figure)
		assert.InDelta(t, w[0], f.Intercept, 1e-6, f.Figure)
		assert.InDelta(t, w[1], f.SlopePer1000, 1e-6, f.Figure)
		assert.InDelta(t, 1, f.R2, 1e-9, f.Figure)
		assert.InDelta(t, w[0]+2*w[1], f.At2000, 1e-6, f.Figure)
		assert.InDelta(t, w[0]+10*w[1], f.At10000, 1e-6, f.Figure)
	}
	assert.InDelta(t, 16, fit.figure(figLeaderCPU).at(5000), 1e-6)

	assert.Nil(t, fitGrowth([]SteadyResult{steadyAt(500)}), "one size: no fit")
	assert.Nil(t, fitGrowth([]SteadyResult{steadyAt(500), failed}), "one completed size: no fit")
	assert.Nil(t, fitGrowth([]SteadyResult{steadyAt(500), steadyAt(500)}), "one distinct size: no fit")
	assert.Nil(t, fitGrowth(nil))
}

func TestSizesFlag(t *testing.T) {
	var s sizes
	require.NoError(t, s.Set("2000"))
	assert.Equal(t, sizes{2000}, s, "a single number still works")
	require.NoError(t, s.Set("1000, 250,500,250"))
	assert.Equal(t, sizes{250, 500, 1000}, s, "ascending, without repeats")
	assert.Equal(t, "250,500,1000", s.String())
	require.NoError(t, s.Set("0"))
	assert.Empty(t, s, "0: skip")
	require.Error(t, s.Set("250,many"))
	require.Error(t, s.Set("-5"))

	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	var p params
	fs.Var(&p.SteadySizes, "steady-nodes", "")
	require.NoError(t, fs.Parse([]string{"-steady-nodes", "250,500,1000,2000"}))
	assert.Equal(t, sizes{250, 500, 1000, 2000}, p.SteadySizes)
}

func TestMergeGrowthAndLargest(t *testing.T) {
	old := []SteadyResult{steadyAt(1000), {Nodes: 2000, Error: "kwok lagged"}}
	now := []SteadyResult{steadyAt(250), steadyAt(2000)}
	got := mergeGrowth(old, now)
	require.Len(t, got, 3)
	assert.Equal(t, []int{250, 1000, 2000}, []int{got[0].Nodes, got[1].Nodes, got[2].Nodes})
	assert.Empty(t, got[2].Error, "a size measured again replaces the earlier figures")

	l := largest(old)
	require.NotNil(t, l)
	assert.Equal(t, 1000, l.Nodes, "the largest size that completed")
	assert.Nil(t, largest([]SteadyResult{{Nodes: 500, Error: "x"}}))
}

// A run whose nodes renewed less often than the kubelet's default is kept
// beside the same size at the default pace, stays out of the fit and the
// steady section, and says its pace in the table and the notes.
func TestGrowthKeepsTheRenewalPaceApart(t *testing.T) {
	slow := steadyAt(2000)
	slow.RenewalSeconds, slow.Leader.CPUPercent = 25, 99
	slow.Writer = writerLight
	fiveK := steadyAt(5000)
	fiveK.RenewalSeconds = 25
	old := []SteadyResult{steadyAt(1000), steadyAt(2000)}
	got := mergeGrowth(old, []SteadyResult{fiveK, slow})
	require.Len(t, got, 4, "a size at another pace is kept beside the earlier one")
	assert.Equal(t, []float64{10, 10, 25, 25}, []float64{got[0].Renewal(), got[1].Renewal(), got[2].Renewal(), got[3].Renewal()})
	assert.Equal(t, []int{1000, 2000, 2000, 5000}, []int{got[0].Nodes, got[1].Nodes, got[2].Nodes, got[3].Nodes})

	l := largest(got)
	require.NotNil(t, l)
	assert.Equal(t, 2000, l.Nodes, "the steady section is the largest run at the kubelet's pace")
	assert.InDelta(t, 10, l.Renewal(), 0)
	fit := fitGrowth(got)
	require.NotNil(t, fit)
	assert.Equal(t, []int{1000, 2000}, fit.Sizes, "the fit is made of the kubelet-paced runs only")

	r := fabricated()
	r.Growth = got
	r.Steady = largest(got)
	md := markdown(r)
	assert.Contains(t, md, "| 2000 | 25 | 99.0 |")
	assert.Contains(t, md, "**Leader at 2,000 nodes ≤ 3 % of a core and ≤ 150 MB RSS**: CPU missed (7.0 %), memory met (140 MB)")
	assert.Contains(t, md, "At 5000 nodes renewed every 25 s: leader 16.0 % and 290 MB")
	assert.Contains(t, md, "renews every Lease every 25 s (a quarter of a 100 s Lease")
}

// fabricated is a run with three sizes (the largest failed) and a
// multi-cluster run.
func fabricated() *Results {
	return &Results{StartedAt: t0, Duration: "1h0m0s", Host: Host{CPUs: 2, CPUModel: "test CPU", GoVersion: "go1.26"},
		Params: params{SteadyNodes: 2000, SteadySizes: sizes{250, 500, 1000, 2000}, SteadyWindow: 2 * time.Minute, Clusters: 5, ClusterNodes: 200},
		Growth: []SteadyResult{steadyAt(250), steadyAt(500), steadyAt(1000), {Nodes: 2000, Window: "2m0s", Error: "identities never learned"}},
		MultiCluster: &MultiClusterResult{Clusters: 5, NodesPerCluster: 200, Window: "2m0s", Learned: 95,
			Leader:   Process{Replica: "c", CPUPercent: 4.5, RSSBytes: 110e6},
			Follower: Process{Replica: "a", CPUPercent: 3.25, RSSBytes: 90e6}},
	}
}

func TestMarkdownGrowth(t *testing.T) {
	r := fabricated()
	r.Steady = largest(r.Growth)
	md := markdown(r)
	assert.Contains(t, md, "## Growth: steady state by cluster size")
	assert.NotContains(t, md, "## Steady state, 1000 nodes", "the growth section replaces the single-size one")
	assert.Contains(t, md, "| 250 | 10 | 1.8 | 52 | 1.0 | 40 | 18 |")
	assert.Contains(t, md, "| 1000 | 10 | 4.0 | 90 | 2.5 | 70 | 40 |")
	assert.Contains(t, md, "| 2000 | 10 | — | — | — | — | — |")
	assert.Contains(t, md, "- 2000 nodes (renewed every 10 s) did not complete: identities never learned")
	assert.Contains(t, md, "| leader CPU (% of a core) | 1.00 | 3.00 | 1.000 | 7.0 | 31.0 |")
	assert.Contains(t, md, "| follower RSS (MB) | 30.00 | 40.00 | 1.000 | 110.0 | 430.0 |")
	assert.Contains(t, md, "linear extrapolation from the sizes measured, 250, 500 and 1,000 nodes:")
	assert.Contains(t, md, "projects 7.0 % and 140 MB at 2,000 nodes, over the bound (a linear extrapolation")

	assert.Contains(t, md, "## One group, 5 clusters of 200 nodes")
	assert.Contains(t, md, "(1,000 nodes in all)")
	assert.Contains(t, md, "every node of every cluster 95 s after")
	assert.Contains(t, md, "| leader (c) | 4.5 | 110 |")
	assert.Contains(t, md, "| follower (a) | 3.2 | 90 |")
	assert.Contains(t, md, "gives the leader 4.0 % of a core and 90 MB at 1,000 nodes in one cluster")

	two := fabricated()
	two.Growth = []SteadyResult{steadyAt(10), steadyAt(20)}
	two.MultiCluster.Error = "the run stopped on a harness failure (logged above)"
	two.MultiCluster.Leader, two.MultiCluster.Follower = Process{}, Process{}
	md = markdown(two)
	assert.Contains(t, md, "10 and 20 nodes (with two sizes the line passes through both")
	assert.NotContains(t, md, "negative slope", "every figure grew")
	assert.Contains(t, md, "Incomplete: the run stopped on a harness failure")
	assert.NotContains(t, md, "| leader (", "no figures of a multi-cluster run that did not measure")

	falling := fabricated()
	falling.Growth[1].Follower.CPUPercent = 0.1
	falling.Growth[2].Follower.CPUPercent = 0.05
	assert.Contains(t, markdown(falling), "A negative slope or projection is where a falling line leads")

	one := fabricated()
	one.Growth = one.Growth[:1]
	assert.Contains(t, markdown(one), "No growth fit: it takes two sizes or more that complete.")
}

// TestRerenderOlderResults: a results.json from before the growth curve
// (only "steady") renders its steady section as before, and write puts the
// fit into results.json.
func TestRerenderOlderResults(t *testing.T) {
	dir := t.TempDir()
	older := `{"startedAt": "2026-11-22T06:54:00Z", "params": {"steadyNodes": 1000, "steadyWindow": 120000000000},
		"steady": {"nodes": 1000, "window": "2m0s", "identitiesLearnedSeconds": 42.6,
			"leader": {"replica": "c", "cpuPercentOfACore": 4.18, "rssBytes": 93204480},
			"follower": {"replica": "a", "cpuPercentOfACore": 3.15, "rssBytes": 84824064}}}`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "results.json"), []byte(older), 0o644))
	require.NoError(t, rerender(dir))
	md, err := os.ReadFile(filepath.Join(dir, "results.md"))
	require.NoError(t, err)
	assert.Contains(t, string(md), "## Steady state, 1000 nodes")
	assert.Contains(t, string(md), "| leader (c) | 4.2 | 93 | ≤ 3 %, ≤ 150 MB at 2,000 nodes |")
	assert.NotContains(t, string(md), "## Growth")
	assert.NotContains(t, string(md), "## One group")

	require.NoError(t, write(dir, fabricated()))
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	require.NoError(t, err)
	var got Results
	require.NoError(t, json.Unmarshal(b, &got))
	require.NotNil(t, got.GrowthFit)
	assert.Equal(t, []int{250, 500, 1000}, got.GrowthFit.Sizes)
	assert.InDelta(t, 3, got.GrowthFit.figure(figLeaderCPU).SlopePer1000, 1e-6)
	require.NotNil(t, got.MultiCluster)
	assert.Equal(t, 5, got.MultiCluster.Clusters)
	assert.Equal(t, sizes{250, 500, 1000, 2000}, got.Params.SteadySizes)
}

// The slower-renewal runs scale fenced's own defaults: at a 100 s Lease
// the grace, after and probeFrom are 2.5 times 40 s, 12 s and 11 s.
func TestScaledTiming(t *testing.T) {
	tm := scaledTiming(100)
	assert.Equal(t, 100*time.Second, tm.HeartbeatGrace)
	assert.Equal(t, 30*time.Second, tm.EarlyAfter)
	assert.Equal(t, 27500*time.Millisecond, tm.EarlyProbeFrom)
}
