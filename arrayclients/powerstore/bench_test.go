package powerstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/arrayclients/internal/arraytest"
	"github.com/fenced-project/fenced/tests/arraysim/simcore"
)

func benchPowerStore(b *testing.B, nodes int) {
	fx := arraytest.BenchNodes(nodes) + `arrays:
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
	e.srv.AddFault(simcore.Fault{Kind: simcore.FaultLatency, Latency: arraytest.BenchLatency})
	arraytest.ReportFences(b, func() time.Duration { return arraytest.FenceAll(b, a, ids) }, nodes)
}

// BenchmarkPowerStoreFenceLatency measures Plan+Apply+Verify with 20 ms of
// injected latency per request, for one node and for 50 nodes at once
// (at most 8 in flight).
func BenchmarkPowerStoreFenceLatency(b *testing.B) {
	b.Run("nodes=1", func(b *testing.B) { benchPowerStore(b, 1) })
	b.Run("nodes=50", func(b *testing.B) { benchPowerStore(b, 50) })
}
