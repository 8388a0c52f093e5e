package powerflex

import (
	"context"
	"sync"
	"time"

	siotypes "github.com/dell/goscaleio/types/v1"
)

// resolveListingAge is how old a shared SDC listing may be for Resolve to
// take a match from it (see sdcLists). Learning the identities of
// thousands of nodes at a cold start resolved each one from a listing of
// its own, every listing carrying every SDC: quadratic in the nodes (at
// 2,000 nodes, four minutes of the leader and the array). A node's SDC ID
// for its GUID does not change while the SDC stays registered, and an
// identity is learned minutes to months before any fence uses it, so a
// match from a listing a few seconds old is as good as one from a fresh
// listing. No match, or more than one, is decided on a listing begun
// after the call's start (a newly registered SDC is not missed for it).
const resolveListingAge = 5 * time.Second

// sdcLists shares listings of the system's SDCs among the calls that need
// one at about the same time. A call takes a listing that began no
// earlier than the time it names (since): the one in flight or the last
// one done, else it makes a new one.
type sdcLists struct {
	mu  sync.Mutex
	cur *sdcList
}

// sdcList is one listing, in flight until done is closed.
type sdcList struct {
	start time.Time
	done  chan struct{}
	sdcs  []siotypes.Sdc
	err   error
}

// list returns every SDC from a listing begun at since or later: the one
// in flight or done when there is one, else a new one made with fetch.
// The SDCs returned may be shared with other calls: read only.
func (l *sdcLists) list(ctx context.Context, since time.Time,
	fetch func(context.Context) ([]siotypes.Sdc, error)) ([]siotypes.Sdc, error) {
	l.mu.Lock()
	if c := l.cur; c != nil && !c.start.Before(since) {
		l.mu.Unlock()
		select {
		case <-c.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if c.err == nil {
			return c.sdcs, nil
		}
		// That listing failed (perhaps only its caller's deadline
		// ended): this call makes its own.
		return fetch(ctx)
	}
	c := &sdcList{start: time.Now(), done: make(chan struct{})}
	l.cur = c
	l.mu.Unlock()
	c.sdcs, c.err = fetch(ctx)
	close(c.done)
	return c.sdcs, c.err
}
