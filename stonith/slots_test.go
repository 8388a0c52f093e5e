package stonith

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/cluster/ledger"
	"github.com/fenced-project/fenced/detector"
)

// gatedArray holds every Apply until release is closed and counts the
// calls in flight.
type gatedArray struct {
	*fakeArray
	entered chan string
	release chan struct{}

	mu             sync.Mutex
	inflight, peak int
}

func newGatedArray(a *fakeArray) *gatedArray {
	return &gatedArray{fakeArray: a, entered: make(chan string, 100), release: make(chan struct{})}
}

func (g *gatedArray) enter() func() {
	g.mu.Lock()
	g.inflight++
	g.peak = max(g.peak, g.inflight)
	g.mu.Unlock()
	return func() {
		g.mu.Lock()
		g.inflight--
		g.mu.Unlock()
	}
}

func (g *gatedArray) Plan(ctx context.Context, id arrayclients.Identity, vols []arrayclients.VolumeRef) (arrayclients.Plan, error) {
	defer g.enter()()
	return g.fakeArray.Plan(ctx, id, vols)
}

func (g *gatedArray) Apply(ctx context.Context, p arrayclients.Plan) error {
	defer g.enter()()
	g.entered <- p.Identity.Node
	select {
	case <-g.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return g.fakeArray.Apply(ctx, p)
}

func (g *gatedArray) Verify(ctx context.Context, p arrayclients.Plan) (arrayclients.Verification, error) {
	defer g.enter()()
	return g.fakeArray.Verify(ctx, p)
}

func (g *gatedArray) peakCalls() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.peak
}

// stormWorld is a world whose nodes n1..n<nodes> are known on a1..a3, with
// a1 gated.
func stormWorld(t *testing.T, nodes int, limit int) (*world, *gatedArray) {
	var gated *gatedArray
	w := newWorld(t, func(cfg *Config) {
		gated = newGatedArray(cfg.Arrays["a1"].(*fakeArray))
		cfg.Arrays["a1"] = gated
		cfg.ArrayCallLimits = map[string]int{"a1": limit}
		cfg.ArrayTimeout = time.Minute // a held apply must not time out
	})
	for i := 2; i <= nodes; i++ {
		n := fmt.Sprintf("n%d", i)
		w.kube.addNode(n, "boot-"+n)
		ids := map[string]arrayclients.Identity{}
		for _, a := range []string{"a1", "a2", "a3"} {
			w.arrays[a].set(func(fa *fakeArray) { fa.access[n] = true })
			ids[a] = arrayclients.Identity{Array: a, Family: arrayclients.PowerFlex, Node: n, ObjectID: "sdc-" + n}
		}
		w.group.must(t, &ledger.SetIdentities{Meta: w.group.meta(), Cluster: "c1", Node: n, BootID: "boot-" + n, Identities: ids})
	}
	return w, gated
}

func (w *world) fail(nodes int) {
	var vs []detector.Verdict
	for i := 1; i <= nodes; i++ {
		vs = append(vs, detector.Verdict{Cluster: "c1", Node: fmt.Sprintf("n%d", i), State: detector.Failed,
			Reason: detector.ReasonHeartbeatStale, Since: time.Now()})
	}
	w.ctrl.PublishVerdicts(context.Background(), vs)
}

func (w *world) queued(array string) float64 {
	return value(w.ctrl.metrics.callsQueued.WithLabelValues(array))
}

// Many nodes fenced at once: no more calls reach an array than its limit;
// the rest wait in fenced (and show in fenced_array_calls_queued) and go on
// as slots free up. Other arrays are not held back by it.
func TestArrayCallLimitQueuesCalls(t *testing.T) {
	const nodes = 6
	w, gated := stormWorld(t, nodes, 2)
	_, stop := w.lead()
	defer stop()
	w.fail(nodes)

	// Two applies hold a1's two slots; every other node's next a1 call
	// (its plan or its apply) waits in fenced.
	<-gated.entered
	<-gated.entered
	require.Eventually(t, func() bool { return w.queued("a1") == nodes-2 }, 10*time.Second, time.Millisecond,
		"queued on a1: %v", w.queued("a1"))
	assert.Empty(t, gated.entered, "no third apply reached a1 while both slots were held")

	close(gated.release)
	require.Eventually(t, func() bool {
		for i := 1; i <= nodes; i++ {
			f := w.group.fence("c1", fmt.Sprintf("n%d", i))
			if f == nil || f.State != ledger.StateEvicted {
				return false
			}
		}
		return true
	}, 10*time.Second, 2*time.Millisecond, "ops %v", w.log.list())
	assert.LessOrEqual(t, gated.peakCalls(), 2, "calls in flight to a1")
	assert.Zero(t, w.queued("a1"))
	for i := 1; i <= nodes; i++ {
		for _, a := range []string{"a1", "a2", "a3"} {
			assert.False(t, w.arrays[a].hasAccess(fmt.Sprintf("n%d", i)), "n%d on %s", i, a)
		}
	}
}

// A write that waited for a slot checks leadership after it got the slot,
// not before it queued: a leader deposed while its write waited does not
// write.
func TestQueuedWriteChecksLeadershipAfterItsSlot(t *testing.T) {
	w, gated := stormWorld(t, 2, 1)
	_, stop := w.lead()
	defer stop()
	w.fail(2)

	first := <-gated.entered
	require.Eventually(t, func() bool { return w.queued("a1") == 1 }, 10*time.Second, time.Millisecond)
	w.group.mu.Lock()
	w.group.term++ // another replica now leads
	w.group.mu.Unlock()
	close(gated.release)

	// The held apply (checked while this replica led) completes; the
	// queued one finds the leadership gone and never reaches a1.
	other := "n1"
	if first == "n1" {
		other = "n2"
	}
	require.Eventually(t, func() bool { return !w.arrays["a1"].hasAccess(first) }, 10*time.Second, time.Millisecond)
	require.Eventually(t, func() bool { return w.queued("a1") == 0 }, 10*time.Second, time.Millisecond)
	assert.Empty(t, gated.entered, "the deposed leader's queued apply reached the array")
	assert.True(t, w.arrays["a1"].hasAccess(other), "%s was fenced on a1 by a deposed leader", other)
}

func TestArraySlotsWaitEndsWithContext(t *testing.T) {
	var mu sync.Mutex
	queued := map[string]int{}
	s := newArraySlots(map[string]int{"a1": 1}, func(array string, d int) {
		mu.Lock()
		queued[array] += d
		mu.Unlock()
	})
	hold := make(chan struct{})
	held := make(chan struct{})
	go func() {
		_ = s.do(context.Background(), "a1", time.Time{}, func() error {
			close(held)
			<-hold
			return nil
		})
	}()
	<-held
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- s.do(ctx, "a1", time.Time{}, func() error { return nil }) }()
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return queued["a1"] == 1
	}, 5*time.Second, time.Millisecond)
	cancel()
	err := <-errc
	require.ErrorIs(t, err, context.Canceled)
	assert.Contains(t, err.Error(), "array a1")
	close(hold)
	mu.Lock()
	assert.Zero(t, queued["a1"])
	mu.Unlock()

	assert.ErrorContains(t, s.do(context.Background(), "nope", time.Time{}, func() error { return nil }), "array nope is not configured")
}

// A freed slot goes to the waiting call of the oldest fence, whatever the
// order the calls queued in; calls of one rank go in the order they
// queued. A waiter that gives up leaves the others' order as it was, and
// after the last call every slot is free again.
func TestArraySlotsServeTheOldestFenceFirst(t *testing.T) {
	var mu sync.Mutex
	queued := 0
	s := newArraySlots(map[string]int{"a1": 1}, func(_ string, d int) {
		mu.Lock()
		queued += d
		mu.Unlock()
	})
	waitQueued := func(n int) {
		require.Eventually(t, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return queued == n
		}, 5*time.Second, time.Millisecond)
	}
	hold, held := make(chan struct{}), make(chan struct{})
	go func() {
		_ = s.do(context.Background(), "a1", time.Time{}, func() error {
			close(held)
			<-hold
			return nil
		})
	}()
	<-held
	t0 := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	var order []string
	var wg sync.WaitGroup
	call := func(ctx context.Context, name string, rank time.Time) {
		wg.Go(func() {
			_ = s.do(ctx, "a1", rank, func() error {
				mu.Lock()
				order = append(order, name)
				mu.Unlock()
				return nil
			})
		})
	}
	gone, giveUp := context.WithCancel(context.Background())
	for i, c := range []struct {
		name string
		rank time.Time
		ctx  context.Context
	}{
		{"newest", t0.Add(3 * time.Second), context.Background()},
		{"oldest", t0, context.Background()},
		{"gives-up", t0.Add(time.Second), gone},
		{"middle", t0.Add(2 * time.Second), context.Background()},
		{"middle-later", t0.Add(2 * time.Second), context.Background()},
	} {
		call(c.ctx, c.name, c.rank)
		waitQueued(i + 1)
	}
	giveUp()
	waitQueued(4)
	close(hold)
	wg.Wait()
	assert.Equal(t, []string{"oldest", "middle", "middle-later", "newest"}, order)
	waitQueued(0)

	// Every slot is free again: as many calls as the limit run at once
	// without waiting.
	ran := false
	require.NoError(t, s.do(context.Background(), "a1", t0, func() error { ran = true; return nil }))
	assert.True(t, ran)
	mu.Lock()
	assert.Zero(t, queued)
	mu.Unlock()
}

// A spare slot (for a part of a call run beside it) is taken only when
// one is free and no call waits; it never blocks, and released twice it
// frees one slot.
func TestArraySlotsSpareNeverOvertakesAWaitingCall(t *testing.T) {
	var mu sync.Mutex
	queued := 0
	s := newArraySlots(map[string]int{"a1": 2}, func(_ string, d int) {
		mu.Lock()
		queued += d
		mu.Unlock()
	})
	_, ok := s.spare("nope")
	assert.False(t, ok, "an array not configured has no spare")

	rel1, ok := s.spare("a1")
	require.True(t, ok)
	rel2, ok := s.spare("a1")
	require.True(t, ok)
	_, ok = s.spare("a1")
	assert.False(t, ok, "no slot is free")
	rel1()
	rel1()
	rel3, ok := s.spare("a1")
	require.True(t, ok, "released once, whatever the calls")
	_, ok = s.spare("a1")
	assert.False(t, ok, "a double release freed one slot only")

	// A call waits for a slot: a freed slot goes to it, not to a spare.
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.do(context.Background(), "a1", time.Time{}, func() error { return nil })
	}()
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return queued == 1
	}, 5*time.Second, time.Millisecond)
	_, ok = s.spare("a1")
	assert.False(t, ok, "a call waits")
	rel2()
	<-done
	rel4, ok := s.spare("a1")
	assert.True(t, ok, "the waiting call ran and gave its slot back")
	rel3()
	rel4()
}
