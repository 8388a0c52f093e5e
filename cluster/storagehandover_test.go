package cluster

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A leader whose disk stays full hands its leadership over after
// timings.storageFullHandover: another replica leads and commits, the old
// leader says why (metric, /status) and does not lead again while its
// disk is full; once space is freed it catches up.
func TestFullDiskLeaderHandsOver(t *testing.T) {
	const bound = 2 * time.Second
	g := newGroup(t, 3)
	full := map[string]*atomic.Bool{}
	for _, id := range g.ids() {
		f := &atomic.Bool{}
		full[id] = f
		cfg := g.cfgs[id]
		cfg.wrapStore = func(s raftStore) raftStore { return fullDisk{s, f} }
		cfg.storeRetry = 100 * time.Millisecond
		cfg.Timings.StorageFullHandover = bound
		g.cfgs[id] = cfg
	}
	g.startAll()
	old, l := waitLeader(t, g.running(), waitLong)
	index := applyNotes(t, old, l, "before", 2)
	waitSameLedger(t, g.running(), index)

	full[old.ID()].Store(true)
	// A write is held on the full disk: Raft's leader loop waits in it.
	ctx, cancel := context.WithTimeout(context.Background(), bound+waitLong)
	defer cancel()
	applied := make(chan error, 1)
	go func() {
		_, err := old.Apply(ctx, note(l, "during"))
		applied <- err
	}()
	require.Eventually(t, func() bool { return old.StorageFull() != nil }, waitLong, 20*time.Millisecond)
	fullAt := time.Now()

	// Another replica leads within the bound plus an election.
	var next *Node
	require.Eventually(t, func() bool {
		for _, n := range g.running() {
			if n != old && n.Status().State == "leader" {
				next = n
				return true
			}
		}
		return false
	}, bound+waitLong, 20*time.Millisecond, "leadership moves off the full-disk leader")
	t.Logf("leadership moved %s after the disk filled (bound %s)", time.Since(fullAt).Round(time.Millisecond), bound)
	require.Error(t, <-applied, "the held write did not commit on the old leader")
	assert.InDelta(t, 1, testutil.ToFloat64(old.metrics.fullHandovers), 0)
	assert.Contains(t, old.Status().StorageHandover, "full for over 2s")

	// The new leader commits with the other healthy replica.
	var healthy []*Node
	for _, n := range g.running() {
		if n != old {
			healthy = append(healthy, n)
		}
	}
	next, l2 := waitLeader(t, healthy, waitLong)
	index = applyNotes(t, next, l2, "after-handover", 2)
	waitSameLedger(t, healthy, index)
	// The old leader does not lead while its disk is full: its term
	// writes are held, so it never stands.
	assert.NotEqual(t, "leader", old.Status().State)
	li, ok := next.Leader()
	require.True(t, ok)
	assert.Equal(t, next.ID(), li.ID)

	// Space freed: it catches up and follows.
	full[old.ID()].Store(false)
	require.Eventually(t, func() bool { return old.StorageFull() == nil }, waitLong, 20*time.Millisecond)
	st := waitSameLedger(t, g.running(), index)
	assert.Contains(t, st, "after-handover-1")
}
