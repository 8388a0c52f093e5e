package powerflex_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/arrayclients/internal/arraytest"
	"github.com/fenced-project/fenced/tests/arraysim/simcore"
)

// BenchmarkPowerFlexFootprintFence measures the plan and the read-back of
// a node whose twelve volumes are its footprint (the bench's single-node
// death), with 20 ms of injected latency per request: each footprint
// volume is read by its ID in both.
func BenchmarkPowerFlexFootprintFence(b *testing.B) {
	ctx := context.Background()
	e := startPowerFlex(b, pflexManyNodes(1, 12), arrayclients.Options{}, 10*time.Second)
	e.srv.SetAuditLimit(10000)
	id, err := e.adapter.Resolve(ctx, pflexNode("node-00", pflexGUID(0)))
	require.NoError(b, err)
	var vols []arrayclients.VolumeRef
	var wanted []string
	for i := range 12 {
		name := fmt.Sprintf("node-00-vol-%d", i)
		vols = append(vols, arraytest.BlockRef("pv-"+name, pflexVolumeID(b, e, name), true))
		wanted = append(wanted, "pv-"+name)
	}
	var warm sync.WaitGroup
	for range 16 {
		warm.Go(func() { require.True(b, e.adapter.Check(ctx).Reachable) })
	}
	warm.Wait()
	e.srv.AddFault(simcore.Fault{Kind: simcore.FaultLatency, Latency: 20 * time.Millisecond})
	var plan, verify time.Duration
	for b.Loop() {
		start := time.Now()
		p, err := e.adapter.Plan(ctx, id, vols)
		require.NoError(b, err)
		plan += time.Since(start)
		require.NoError(b, e.adapter.Apply(ctx, p))
		start = time.Now()
		v, err := e.adapter.Verify(ctx, p)
		require.NoError(b, err)
		require.True(b, v.Fenced)
		verify += time.Since(start)
		b.StopTimer()
		require.NoError(b, e.adapter.Undo(ctx, p, arrayclients.RestoreScope{Wanted: wanted}))
		b.StartTimer()
	}
	b.ReportMetric(float64(plan.Milliseconds())/float64(b.N), "ms/plan")
	b.ReportMetric(float64(verify.Milliseconds())/float64(b.N), "ms/verify")
}
