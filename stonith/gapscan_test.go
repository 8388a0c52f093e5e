package stonith

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
)

// TestGapScanShowsArrayReadGapsOnTheLeader: a gap only the array's plan
// finds makes a healthy node unprotected on the leader (status, metric)
// within a scan period and leaves once fixed; a follower reads no array
// and drops what it read while it led.
func TestGapScanShowsArrayReadGapsOnTheLeader(t *testing.T) {
	w := newWorld(t, func(cfg *Config) { cfg.Clusters[0].GapScanPeriod = 50 * time.Millisecond })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.ctrl.WatchProtection(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	gapsOf := func() []VolumeGap {
		for _, u := range w.ctrl.unprotectedList() {
			if u.Node == "n1" {
				return u.Gaps
			}
		}
		return nil
	}
	metric := func() float64 {
		return testutil.ToFloat64(w.ctrl.metrics.unprotected.WithLabelValues("c1", string(arrayclients.GapOtherIdentity)))
	}
	other := &arrayclients.Gap{Reason: arrayclients.GapOtherIdentity, Detail: "given to sdc-n2 only"}
	w.arrays["a2"].mu.Lock()
	w.arrays["a2"].planGaps = map[string]*arrayclients.Gap{"pv-a2": other}
	w.arrays["a2"].mu.Unlock()
	plans := func() int {
		a := w.arrays["a2"]
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.plans
	}

	// Following: no array is read, the node looks protected.
	require.Never(t, func() bool { return plans() > 0 || len(gapsOf()) > 0 }, 300*time.Millisecond, 10*time.Millisecond)

	_, stop := w.lead()
	require.Eventually(t, func() bool { return len(gapsOf()) == 1 }, 5*time.Second, 5*time.Millisecond)
	g := gapsOf()[0]
	assert.Equal(t, VolumeGap{Volume: "pv-a2", Array: "a2", Reason: arrayclients.GapOtherIdentity, Detail: "given to sdc-n2 only"}, g)
	assert.InDelta(t, 1.0, metric(), 0)
	plan, err := w.ctrl.PlanNode(context.Background(), PlanRequest{Cluster: "c1", Node: "n1"})
	require.NoError(t, err)
	assert.False(t, plan.Protected)
	assert.Equal(t, []VolumeGap{g}, plan.Gaps, "fenced plan and /status agree")

	// Fixed on the array: protected again within a period.
	w.arrays["a2"].mu.Lock()
	w.arrays["a2"].planGaps = nil
	w.arrays["a2"].mu.Unlock()
	require.Eventually(t, func() bool { return len(gapsOf()) == 0 && metric() == 0 }, 5*time.Second, 5*time.Millisecond)

	// Broken again, then leadership lost: the follower drops the read.
	w.arrays["a2"].mu.Lock()
	w.arrays["a2"].planGaps = map[string]*arrayclients.Gap{"pv-a2": other}
	w.arrays["a2"].mu.Unlock()
	require.Eventually(t, func() bool { return len(gapsOf()) == 1 }, 5*time.Second, 5*time.Millisecond)
	stop()
	require.Eventually(t, func() bool { return len(gapsOf()) == 0 && metric() == 0 }, 5*time.Second, 5*time.Millisecond)
	n := plans()
	require.Never(t, func() bool { return plans() > n }, 300*time.Millisecond, 10*time.Millisecond, "a follower read an array")
}

// TestScanRankIsAfterEveryFence: the scan's plans wait behind any fence
// for an array's call slots.
func TestScanRankIsAfterEveryFence(t *testing.T) {
	assert.True(t, scanRank().After(time.Now().AddDate(1000, 0, 0)))
}

// TestAttachmentChangeScansTheNodeOutOfTurn: with a gap scan period far
// longer than the test, a change of one of the node's VolumeAttachments
// reads its plans at once, so a gap only an array read finds shows without
// waiting for the node's turn; a burst of changes reads it once.
func TestAttachmentChangeScansTheNodeOutOfTurn(t *testing.T) {
	w := newWorld(t, func(cfg *Config) { cfg.Clusters[0].GapScanPeriod = time.Hour })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.ctrl.WatchProtection(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	_, stop := w.lead()
	defer stop()
	plans := func() int {
		a := w.arrays["a2"]
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.plans
	}
	// The round's first node is read at the start; nothing more for an hour.
	require.Eventually(t, func() bool { return plans() >= 1 }, 5*time.Second, 5*time.Millisecond)
	first := plans()

	w.arrays["a2"].mu.Lock()
	w.arrays["a2"].planGaps = map[string]*arrayclients.Gap{"pv-a2": {Reason: arrayclients.GapOtherIdentity, Detail: "given to sdc-n2 only"}}
	w.arrays["a2"].mu.Unlock()
	for range 5 {
		w.ctrl.FootprintChanged("c1", "n1")
	}
	require.Eventually(t, func() bool {
		for _, u := range w.ctrl.unprotectedList() {
			if u.Node == "n1" && len(u.Gaps) == 1 {
				return true
			}
		}
		return false
	}, 5*time.Second, 5*time.Millisecond, "the gap shows after the attachment change")
	assert.Equal(t, first+1, plans(), "five changes in a burst read the node once")
}
