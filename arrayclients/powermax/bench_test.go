package powermax_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/arrayclients/internal/arraytest"
	"github.com/fenced-project/fenced/tests/arraysim/simcore"
)

// BenchmarkPowerMaxFenceLatency measures fence latency (Plan, Apply, Verify) with
// 20 ms injected on every request, for one node and for 50 nodes at once
// with at most arraytest.BenchConcurrency in flight. Undo runs untimed.
func BenchmarkPowerMaxFenceLatency(b *testing.B) {
	var doc strings.Builder
	doc.WriteString("nodes:\n")
	for i := range 50 {
		fmt.Fprintf(&doc, "  - {name: n%02d, ip: 127.0.13.%d, wwpns: [\"10000000c9a1%04x\", \"10000000c9a2%04x\"]}\n", i, i+1, i, i)
	}
	doc.WriteString("arrays:\n  - {name: pmax-1, family: powermax, spec: {username: smc, password: secret, generate: {clusterPrefix: TST, protocol: FC, volumesPerNode: 3}}}\n")
	for _, n := range []int{1, 50} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			e := startPowerMax(b, doc.String(), 10*time.Second)
			ctx := context.Background()
			ids := make([]arrayclients.Identity, n)
			for i := range n {
				var err error
				ids[i], err = e.adapter.Resolve(ctx, pmaxNode(fmt.Sprintf("n%02d", i)))
				require.NoError(b, err)
			}
			e.srv.AddFault(simcore.Fault{Kind: simcore.FaultLatency, Latency: 20 * time.Millisecond})
			benchFence(b, e.srv, ids, e.adapter)
		})
	}
}

// benchFence fences every identity per op and undoes them untimed.
func benchFence(b *testing.B, srv *simcore.Server, ids []arrayclients.Identity, a arrayclients.Adapter) {
	ctx := context.Background()
	plans := make([]arrayclients.Plan, len(ids))
	var requests int64
	b.ResetTimer()
	for range b.N {
		seq := srv.LastSeq()
		arraytest.ForEachBounded(len(ids), arraytest.BenchConcurrency, func(i int) {
			p, err := a.Plan(ctx, ids[i], nil)
			require.NoError(b, err)
			require.NoError(b, a.Apply(ctx, p))
			v, err := a.Verify(ctx, p)
			require.NoError(b, err)
			require.True(b, v.Fenced)
			plans[i] = p
		})
		b.StopTimer()
		requests += srv.LastSeq() - seq
		arraytest.ForEachBounded(len(ids), arraytest.BenchConcurrency, func(i int) { require.NoError(b, a.Undo(ctx, plans[i], arrayclients.RestoreScope{})) })
		b.StartTimer()
	}
	b.ReportMetric(float64(requests)/float64(b.N*len(ids)), "req/node")
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/batch")
}
