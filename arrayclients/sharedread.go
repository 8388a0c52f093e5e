package arrayclients

import (
	"context"
	"sync"
)

// sharedRead lets concurrent callers share one expensive read of an array
// (such as a scan of every LUN) without ever handing a caller a result that
// is older than its request: a caller joins the next read to start, never
// one already running. While a read runs, every caller that arrives waits
// for it to end and then shares one new read. So N concurrent callers cost
// at most two reads, and a read-back that asks after its write still sees
// the write.
//
// The read runs with the first caller's context values but is cancelled
// only when every caller waiting for it has given up; a caller whose
// context ends returns at once with its context's error.
type sharedRead[T any] struct {
	read func(ctx context.Context) (T, error)

	mu      sync.Mutex
	running bool
	next    *readRound[T] // not started yet; new callers join it
}

type readRound[T any] struct {
	done    chan struct{}
	val     T
	err     error
	ctx     context.Context
	cancel  context.CancelFunc
	waiters int
}

func newSharedRead[T any](read func(ctx context.Context) (T, error)) *sharedRead[T] {
	return &sharedRead[T]{read: read}
}

// do returns the result of a read that started after do was called.
func (s *sharedRead[T]) do(ctx context.Context) (T, error) {
	if err := ctx.Err(); err != nil {
		var zero T
		return zero, err
	}
	s.mu.Lock()
	r := s.next
	if r == nil {
		rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		r = &readRound[T]{done: make(chan struct{}), ctx: rctx, cancel: cancel}
		s.next = r
	}
	r.waiters++
	if !s.running {
		s.startLocked()
	}
	s.mu.Unlock()
	select {
	case <-r.done:
		return r.val, r.err
	case <-ctx.Done():
		s.mu.Lock()
		r.waiters--
		if r.waiters == 0 {
			r.cancel()
			if s.next == r {
				s.next = nil // nobody wants it any more: never start it
			}
		}
		s.mu.Unlock()
		var zero T
		return zero, ctx.Err()
	}
}

// startLocked runs the pending round; s.mu is held.
func (s *sharedRead[T]) startLocked() {
	r := s.next
	s.next = nil
	s.running = true
	go func() {
		r.val, r.err = s.read(r.ctx)
		r.cancel()
		close(r.done)
		s.mu.Lock()
		defer s.mu.Unlock()
		s.running = false
		if s.next != nil {
			s.startLocked()
		}
	}()
}
