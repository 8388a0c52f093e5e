package powerflex_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/tests/arraysim/simcore"
)

// pflexBenchConcurrency bounds how many nodes are fenced at once.
const pflexBenchConcurrency = 8

// BenchmarkPowerFlexFenceLatency measures one fence (Plan, Apply, Verify of
// a node; the identity is resolved beforehand, as the ledger holds it)
// against the simulator with 20 ms of injected latency per request: one
// node with three volumes, one with twelve (the bench's single-node
// death), and 50 nodes of three at once with at most
// pflexBenchConcurrency fences in flight. Each iteration is undone outside
// the timer.
func BenchmarkPowerFlexFenceLatency(b *testing.B) {
	for _, c := range []struct{ nodes, vols int }{{1, 3}, {1, 12}, {50, 3}} {
		nodes := c.nodes
		b.Run(fmt.Sprintf("nodes=%d/vols=%d", nodes, c.vols), func(b *testing.B) {
			ctx := context.Background()
			e := startPowerFlex(b, pflexManyNodes(nodes, c.vols), arrayclients.Options{}, 10*time.Second)
			e.srv.SetAuditLimit(10000)
			ids := make([]arrayclients.Identity, nodes)
			for i := range nodes {
				id, err := e.adapter.Resolve(ctx, pflexNode(fmt.Sprintf("node-%02d", i), pflexGUID(i)))
				require.NoError(b, err)
				ids[i] = id
			}
			// Log every pooled client in before timing.
			var warm sync.WaitGroup
			for range 2 * pflexBenchConcurrency {
				warm.Go(func() { require.True(b, e.adapter.Check(ctx).Reachable) })
			}
			warm.Wait()
			e.srv.AddFault(simcore.Fault{Kind: simcore.FaultLatency, Latency: 20 * time.Millisecond})

			plans := make([]arrayclients.Plan, nodes)
			perFence := make([]time.Duration, nodes)
			var total time.Duration
			for b.Loop() {
				sem := make(chan struct{}, pflexBenchConcurrency)
				var wg sync.WaitGroup
				for i := range nodes {
					wg.Go(func() {
						sem <- struct{}{}
						defer func() { <-sem }()
						start := time.Now()
						p, err := e.adapter.Plan(ctx, ids[i], nil)
						require.NoError(b, err)
						require.NoError(b, e.adapter.Apply(ctx, p))
						v, err := e.adapter.Verify(ctx, p)
						require.NoError(b, err)
						require.True(b, v.Fenced)
						plans[i], perFence[i] = p, time.Since(start)
					})
				}
				wg.Wait()
				for _, d := range perFence {
					total += d
				}
				b.StopTimer()
				for i := range nodes {
					wg.Go(func() {
						sem <- struct{}{}
						defer func() { <-sem }()
						require.NoError(b, e.adapter.Undo(ctx, plans[i], arrayclients.RestoreScope{}))
					})
				}
				wg.Wait()
				b.StartTimer()
			}
			b.ReportMetric(float64(total.Milliseconds())/float64(b.N*nodes), "ms/fence")
		})
	}
}
