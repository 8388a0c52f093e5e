package arrayclients

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestListingsAreSharedOnlyWhenFreshEnough: a call joins a listing (of
// every host, say) in flight only when that listing began at or after the
// call's own start; a call that began later makes its own, and a listing
// that failed is not handed on.
func TestListingsAreSharedOnlyWhenFreshEnough(t *testing.T) {
	var l Listings[string]
	var fetches atomic.Int32
	release := make(chan struct{})
	fetch := func(context.Context) ([]string, error) {
		n := fetches.Add(1)
		<-release
		return []string{"listing-" + strconv.Itoa(int(n))}, nil
	}
	ctx := t.Context()
	before := time.Now()
	first := make(chan []string)
	go func() {
		hosts, err := l.List(ctx, before, fetch)
		assert.NoError(t, err)
		first <- hosts
	}()
	require.Eventually(t, func() bool { return fetches.Load() == 1 }, 5*time.Second, time.Millisecond)

	joined := make(chan []string)
	go func() {
		hosts, err := l.List(ctx, before, fetch) // began before the listing in flight
		assert.NoError(t, err)
		joined <- hosts
	}()
	close(release)
	a, b := <-first, <-joined
	assert.Equal(t, a, b, "the earlier call shares the listing")
	assert.EqualValues(t, 1, fetches.Load())

	own, err := l.List(ctx, time.Now(), fetch) // began after that listing
	require.NoError(t, err)
	assert.EqualValues(t, 2, fetches.Load(), "a call that began later lists again")
	assert.NotEqual(t, a, own)

	failed := errors.New("deadline of the listing's caller")
	since := time.Now()
	_, err = l.List(ctx, since, func(context.Context) ([]string, error) { return nil, failed })
	require.ErrorIs(t, err, failed)
	hosts, err := l.List(ctx, since, fetch)
	require.NoError(t, err, "a failed listing is not handed on")
	assert.Len(t, hosts, 1)
	assert.EqualValues(t, 3, fetches.Load())
}
