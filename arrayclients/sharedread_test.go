package arrayclients

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// gatedReads is a read whose rounds end only when the test releases them.
type gatedReads struct {
	started atomic.Int64
	begin   chan int64    // a round's number, when it starts
	release chan struct{} // one per round to end
}

func newGatedReads() *gatedReads {
	return &gatedReads{begin: make(chan int64, 16), release: make(chan struct{}, 16)}
}

func (g *gatedReads) read(ctx context.Context) (int64, error) {
	n := g.started.Add(1)
	g.begin <- n
	select {
	case <-g.release:
		return n, nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

func waitRound(t *testing.T, g *gatedReads) int64 {
	t.Helper()
	select {
	case n := <-g.begin:
		return n
	case <-time.After(10 * time.Second):
		t.Fatal("no read started")
		return 0
	}
}

func TestSharedReadCallersArrivingDuringAReadShareTheNext(t *testing.T) {
	g := newGatedReads()
	s := newSharedRead(g.read)
	ctx := context.Background()

	first := make(chan int64, 1)
	go func() { v, _ := s.do(ctx); first <- v }()
	require.Equal(t, int64(1), waitRound(t, g))

	// Five callers arrive while round 1 runs: none may get round 1.
	var wg sync.WaitGroup
	got := make([]int64, 5)
	for i := range got {
		wg.Go(func() {
			v, err := s.do(ctx)
			assert.NoError(t, err)
			got[i] = v
		})
	}
	// Let them all queue behind round 1 before it ends.
	require.Eventually(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.next != nil && s.next.waiters == 5
	}, 10*time.Second, time.Millisecond)
	g.release <- struct{}{}
	require.Equal(t, int64(1), <-first)

	require.Equal(t, int64(2), waitRound(t, g), "the waiting callers share one new read")
	g.release <- struct{}{}
	wg.Wait()
	for i, v := range got {
		assert.Equal(t, int64(2), v, "caller %d", i)
	}
	assert.Equal(t, int64(2), g.started.Load(), "six callers, two reads")
}

func TestSharedReadNeverReturnsAReadOlderThanTheCall(t *testing.T) {
	var started atomic.Int64
	s := newSharedRead(func(context.Context) (int64, error) {
		n := started.Add(1)
		time.Sleep(time.Millisecond)
		return n, nil
	})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				before := started.Load()
				v, err := s.do(context.Background())
				if err != nil {
					t.Errorf("read: %v", err) // not require: this is not the test's goroutine
					return
				}
				assert.Greater(t, v, before, "a read that started before the call was returned")
			}
		})
	}
	wg.Wait()
	assert.Less(t, started.Load(), int64(8*50), "concurrent callers shared reads")
}

func TestSharedReadCallerThatGivesUpReturnsAtOnce(t *testing.T) {
	g := newGatedReads()
	s := newSharedRead(g.read)

	stay := make(chan error, 1)
	go func() { _, err := s.do(context.Background()); stay <- err }()
	waitRound(t, g)

	ctx, cancel := context.WithCancel(context.Background())
	left := make(chan error, 1)
	go func() { _, err := s.do(ctx); left <- err }()
	require.Eventually(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.next != nil
	}, 10*time.Second, time.Millisecond)
	cancel()
	require.ErrorIs(t, <-left, context.Canceled)

	// Its pending round has no caller left: it is never started.
	g.release <- struct{}{}
	require.NoError(t, <-stay)
	time.Sleep(50 * time.Millisecond)
	assert.Equal(t, int64(1), g.started.Load())
}

func TestSharedReadIsCancelledOnlyWhenEveryCallerLeft(t *testing.T) {
	var cancelled atomic.Int64
	g := newGatedReads()
	s := newSharedRead(func(ctx context.Context) (int64, error) {
		v, err := g.read(ctx)
		if err != nil {
			cancelled.Add(1)
		}
		return v, err
	})

	// A runs round 1; B and C queue for round 2.
	a := make(chan error, 1)
	go func() { _, err := s.do(context.Background()); a <- err }()
	waitRound(t, g)
	ctxB, cancelB := context.WithCancel(context.Background())
	b := make(chan error, 1)
	c := make(chan int64, 1)
	go func() { _, err := s.do(ctxB); b <- err }()
	go func() { v, _ := s.do(context.Background()); c <- v }()
	require.Eventually(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.next != nil && s.next.waiters == 2
	}, 10*time.Second, time.Millisecond)
	g.release <- struct{}{}
	require.NoError(t, <-a)
	require.Equal(t, int64(2), waitRound(t, g))

	// B leaves round 2; C still waits, so round 2 goes on.
	cancelB()
	require.ErrorIs(t, <-b, context.Canceled)
	g.release <- struct{}{}
	require.Equal(t, int64(2), <-c)
	require.Zero(t, cancelled.Load())

	// D alone on round 3 leaves: round 3 is cancelled.
	ctxD, cancelD := context.WithCancel(context.Background())
	d := make(chan error, 1)
	go func() { _, err := s.do(ctxD); d <- err }()
	require.Equal(t, int64(3), waitRound(t, g))
	cancelD()
	require.ErrorIs(t, <-d, context.Canceled)
	require.Eventually(t, func() bool { return cancelled.Load() == 1 }, 10*time.Second, time.Millisecond)
}

func TestSharedReadPassesTheReadError(t *testing.T) {
	boom := errors.New("boom")
	s := newSharedRead(func(context.Context) (int, error) { return 0, boom })
	_, err := s.do(context.Background())
	require.ErrorIs(t, err, boom)
	_, err = s.do(context.Background())
	require.ErrorIs(t, err, boom, "an error is not cached: the next call reads again")
}
