package arrayclients

import (
	"context"
	"sync"
	"time"
)

// Listings shares listings of an array's objects (every host, every SDC)
// among the calls that need one at about the same time: in a storm many
// read-backs run at once against one array, and at a cold start many
// resolves, and each listing carries every object. A call names how fresh
// its listing must be (since): it takes the listing in flight or the last
// one done when that began at since or later, else it makes a new one.
// A call that must see the array after its own write passes the write's
// end (or its own start), so what it reads is as fresh as a listing of
// its own. The zero value is ready to use.
type Listings[T any] struct {
	mu  sync.Mutex
	cur *listing[T]
}

// listing is one listing, in flight until done is closed.
type listing[T any] struct {
	start time.Time
	done  chan struct{}
	items []T
	err   error
}

// List returns every object from a listing begun at since or later: the
// one in flight or done when there is one, else a new one made with
// fetch. A listing that failed is not handed on: the call then makes its
// own. The items returned may be shared with other calls: read only.
func (l *Listings[T]) List(ctx context.Context, since time.Time, fetch func(context.Context) ([]T, error)) ([]T, error) {
	l.mu.Lock()
	if c := l.cur; c != nil && !c.start.Before(since) {
		l.mu.Unlock()
		select {
		case <-c.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if c.err == nil {
			return c.items, nil
		}
		// That listing failed (perhaps only its caller's deadline
		// ended): this call makes its own.
		return fetch(ctx)
	}
	c := &listing[T]{start: time.Now(), done: make(chan struct{})}
	l.cur = c
	l.mu.Unlock()
	c.items, c.err = fetch(ctx)
	close(c.done)
	return c.items, c.err
}
