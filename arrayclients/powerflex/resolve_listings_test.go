package powerflex_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
)

// sdcListings counts the array's SDC listings (GET .../relationships/Sdc).
func sdcListings(e pflexEnv) int {
	n := 0
	for _, a := range e.srv.Audit() {
		if a.Method == "GET" && strings.Contains(a.Path, "/relationships/Sdc") {
			n++
		}
	}
	return n
}

// TestResolvesShareSDCListings: identity learning resolves every node of a
// cold start on every array; on PowerFlex each resolve listed every SDC,
// so learning thousands of nodes cost thousands of listings of thousands
// of SDCs. Resolves side by side and shortly after one another now share
// a listing, and each still finds its own SDC.
func TestResolvesShareSDCListings(t *testing.T) {
	const n = 40
	var doc strings.Builder
	doc.WriteString("nodes:\n")
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&doc, "  - {name: worker-%d, ip: 127.0.11.%d, sdcGUID: 6A1B%04X-0000-4000-8000-%012X}\n", i, i, i, i)
	}
	doc.WriteString(`arrays:
  - name: pflex-1
    family: powerflex
    spec:
      username: admin
      password: s3cret-pw
      systems: [{id: 1a2b3c4d5e6f7a8b, name: sys-1}]
      perNode: {volumes: 1}
`)
	e := startPowerFlex(t, doc.String(), arrayclients.Options{}, 5*time.Second)
	ctx := context.Background()
	before := sdcListings(e)
	var wg sync.WaitGroup
	next := make(chan int, n)
	for i := 1; i <= n; i++ {
		next <- i
	}
	close(next)
	ids := make([]arrayclients.Identity, n+1)
	errs := make([]error, n+1)
	for range 8 { // the learner's workers
		wg.Go(func() {
			for i := range next {
				node := pflexNode(fmt.Sprintf("worker-%d", i), fmt.Sprintf("6A1B%04X-0000-4000-8000-%012X", i, i))
				ids[i], errs[i] = e.adapter.Resolve(ctx, node)
			}
		})
	}
	wg.Wait()
	for i := 1; i <= n; i++ {
		name := fmt.Sprintf("worker-%d", i)
		require.NoError(t, errs[i], name)
		want, _ := e.sim.SDCID(name)
		assert.Equal(t, want, ids[i].ObjectID, "%s resolves to its own SDC", name)
	}
	listings := sdcListings(e) - before
	assert.Less(t, listings, n/2, "resolves share SDC listings: %d listings for %d nodes", listings, n)
	t.Logf("%d SDC listings for %d resolves", listings, n)
}

// TestResolveWithoutAMatchListsAgain: a resolve that finds no SDC (or
// more than one) in a shared listing decides on a listing begun after its
// own start, so an SDC registered after the shared listing is not missed
// (a node without one would get an NFS-client identity).
func TestResolveWithoutAMatchListsAgain(t *testing.T) {
	e := startPowerFlex(t, pflexFixture, arrayclients.Options{}, 5*time.Second)
	ctx := context.Background()
	_, err := e.adapter.Resolve(ctx, pflexW1)
	require.NoError(t, err)
	after1 := sdcListings(e)

	_, err = e.adapter.Resolve(ctx, pflexNode("worker-9", "6A1B0009-0000-4000-8000-000000000009"))
	require.ErrorIs(t, err, arrayclients.ErrNoIdentity)
	assert.Equal(t, after1+1, sdcListings(e), "no match in the shared listing: one fresh listing")

	_, err = e.adapter.Resolve(ctx, pflexW2)
	require.NoError(t, err)
	assert.Equal(t, after1+1, sdcListings(e), "a match in the listing just made: no listing")
}
