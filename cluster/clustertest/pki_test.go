package clustertest

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Concurrent callers never get the same port.
func TestFreePortNeverRepeats(t *testing.T) {
	const callers, each = 8, 25
	ports := make([][]int, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			for range each {
				p, err := FreePort()
				if err != nil {
					errs[i] = err
					return
				}
				ports[i] = append(ports[i], p)
			}
		})
	}
	wg.Wait()
	seen := map[int]int{}
	for i := range callers {
		require.NoError(t, errs[i])
		for _, p := range ports[i] {
			seen[p]++
		}
	}
	require.Len(t, seen, callers*each)
	for p, n := range seen {
		assert.Equal(t, 1, n, "port %d handed out %d times", p, n)
	}
}
