package arrayclients_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/tests/arraysim/simcore"
)

func benchPowerScale(b *testing.B, nodes int) {
	fx := benchNodes(nodes) + `arrays:
  - name: pscale-1
    family: powerscale
    spec:
      perNode: {exports: 2, shared: 2, lists: [clients, rootClients], forms: [fqdn, ip]}
`
	e := newSCEnv(b, fx, nil)
	a := e.adapter(b, nil)
	ctx := context.Background()
	var ids []arrayclients.Identity
	for i := 1; i <= nodes; i++ {
		id, err := a.Resolve(ctx, e.node(fmt.Sprintf("node-%02d", i)))
		require.NoError(b, err)
		ids = append(ids, id)
	}
	e.srv.AddFault(simcore.Fault{Kind: simcore.FaultLatency, Latency: benchLatency})
	b.ResetTimer()
	for b.Loop() {
		fenceAll(b, a, ids)
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/fence-round")
}

// BenchmarkPowerScaleFence measures Plan+Apply+Verify with 20 ms of
// injected latency per request, for one node and for 50 nodes at once
// (at most 8 in flight; nodes share two exports, whose updates the
// adapter serialises).
func BenchmarkPowerScaleFence(b *testing.B) {
	b.Run("nodes=1", func(b *testing.B) { benchPowerScale(b, 1) })
	b.Run("nodes=50", func(b *testing.B) { benchPowerScale(b, 50) })
}
