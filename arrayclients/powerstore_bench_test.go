package arrayclients_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/tests/arraysim/simcore"
)

// benchLatency is the latency injected on every request in the fence
// benchmarks.
const benchLatency = 20 * time.Millisecond

// benchConcurrency bounds how many nodes are fenced at once.
const benchConcurrency = 8

// benchNodes writes n fixture nodes.
func benchNodes(n int) string {
	var b strings.Builder
	b.WriteString("nodes:\n")
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "  - {name: node-%02d, ip: 127.0.11.%d, fqdn: node-%02d.cluster.local, machineID: %032x, iqn: \"iqn.1994-05.com.redhat:node-%02d\", wwpns: [\"%016x\"]}\n",
			i, i, i, 0xabc000+i, i, 0x10000000c9a00000+i)
	}
	return b.String()
}

// fenceAll fences every node with at most benchConcurrency at once
// (Plan, Apply, Verify), then undoes them outside the timer. It returns
// the sum of the per-node fence durations.
func fenceAll(b *testing.B, a arrayclients.Adapter, ids []arrayclients.Identity) time.Duration {
	b.Helper()
	ctx := context.Background()
	plans := make([]arrayclients.Plan, len(ids))
	sem := make(chan struct{}, benchConcurrency)
	var wg sync.WaitGroup
	errs := make(chan error, len(ids))
	var mu sync.Mutex
	var total time.Duration
	for i, id := range ids {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			start := time.Now()
			defer func() { mu.Lock(); total += time.Since(start); mu.Unlock() }()
			p, err := a.Plan(ctx, id, nil)
			if err == nil {
				err = a.Apply(ctx, p)
			}
			if err == nil {
				var v arrayclients.Verification
				v, err = a.Verify(ctx, p)
				if err == nil && !v.Fenced {
					err = fmt.Errorf("node %s not fenced: %v", id.Node, v.Remaining)
				}
			}
			plans[i] = p
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(b, err)
	}
	b.StopTimer()
	undoErrs := make(chan error, len(plans))
	for _, p := range plans {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			undoErrs <- a.Undo(ctx, p, arrayclients.RestoreScope{})
		}()
	}
	wg.Wait()
	close(undoErrs)
	for err := range undoErrs {
		require.NoError(b, err)
	}
	b.StartTimer()
	return total
}

func benchPowerStore(b *testing.B, nodes int) {
	fx := benchNodes(nodes) + `arrays:
  - name: pstore-1
    family: powerstore
    spec:
      perNode: {protocol: both, volumes: 3}
`
	e := newPSEnv(b, fx)
	a := e.adapter(b, nil)
	ctx := context.Background()
	var ids []arrayclients.Identity
	for i := 1; i <= nodes; i++ {
		id, err := a.Resolve(ctx, e.node(fmt.Sprintf("node-%02d", i)))
		require.NoError(b, err)
		ids = append(ids, id)
	}
	e.srv.AddFault(simcore.Fault{Kind: simcore.FaultLatency, Latency: benchLatency})
	reportFences(b, func() time.Duration { return fenceAll(b, a, ids) }, nodes)
}

// reportFences runs fence rounds and reports the mean latency of one
// node's fence and the wall time of a round.
func reportFences(b *testing.B, round func() time.Duration, nodes int) {
	b.Helper()
	var sum time.Duration
	rounds := 0
	for b.Loop() {
		sum += round()
		rounds++
	}
	b.ReportMetric(float64(sum.Milliseconds())/float64(rounds*nodes), "ms/fence")
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(rounds), "ms/round")
}

// BenchmarkPowerStoreFenceLatency measures Plan+Apply+Verify with 20 ms of
// injected latency per request, for one node and for 50 nodes at once
// (at most 8 in flight).
func BenchmarkPowerStoreFenceLatency(b *testing.B) {
	b.Run("nodes=1", func(b *testing.B) { benchPowerStore(b, 1) })
	b.Run("nodes=50", func(b *testing.B) { benchPowerStore(b, 50) })
}
