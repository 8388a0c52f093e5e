package powerstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/dell/gopowerstore"
)

// psHostLists shares a listing of every host among the calls that need
// one at about the same time. A read-back lists every host (the node's
// initiators registered on another host would give it its paths back),
// and so do the held checks' session reads: in a storm many run at once
// against one array, and each listing carries every host with its
// initiators. A call joins a listing only when that listing began no
// earlier than the call's own start (for a read-back, after the write it
// reads back), so what it reads is as fresh as a listing of its own.
type psHostLists struct {
	mu  sync.Mutex
	cur *psHostList
}

// psHostList is one listing, in flight until done is closed.
type psHostList struct {
	start time.Time
	done  chan struct{}
	hosts []gopowerstore.Host
	err   error
}

// list returns every host, from a listing begun at since or later: the
// one in flight or just done when there is one, else a new one made with
// fetch. The hosts returned may be shared with other calls: read only.
func (l *psHostLists) list(ctx context.Context, since time.Time,
	fetch func(context.Context) ([]gopowerstore.Host, error)) ([]gopowerstore.Host, error) {
	l.mu.Lock()
	if c := l.cur; c != nil && !c.start.Before(since) {
		l.mu.Unlock()
		select {
		case <-c.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if c.err == nil {
			return c.hosts, nil
		}
		// That listing failed (perhaps only its caller's deadline
		// ended): this call makes its own.
		return fetch(ctx)
	}
	c := &psHostList{start: time.Now(), done: make(chan struct{})}
	l.cur = c
	l.mu.Unlock()
	c.hosts, c.err = fetch(ctx)
	close(c.done)
	return c.hosts, c.err
}

// listHosts lists every host of the array (gopowerstore GetHosts: GET
// host?select=*), sharing a listing begun at since or later with other
// calls (psHostLists).
func (a *PowerStoreAdapter) listHosts(ctx context.Context, c gopowerstore.Client, since time.Time) ([]gopowerstore.Host, error) {
	hosts, err := a.hostLists.list(ctx, since, func(ctx context.Context) ([]gopowerstore.Host, error) {
		rctx, cancel := context.WithTimeout(ctx, 4*a.timeout)
		defer cancel()
		return c.GetHosts(rctx)
	})
	if err != nil {
		return nil, fmt.Errorf("list hosts: %w", err)
	}
	return hosts, nil
}
