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
	var mu sync.Mutex
	seen := map[int]int{}
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for range each {
				p, err := FreePort()
				if !assert.NoError(t, err) {
					return
				}
				mu.Lock()
				seen[p]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.Len(t, seen, callers*each)
	for p, n := range seen {
		assert.Equal(t, 1, n, "port %d handed out %d times", p, n)
	}
}
