package arrayclients_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/tests/arraysim/simcore"
)

// BenchmarkUnityFenceLatency measures fence latency (Plan, Apply, Verify) with
// 20 ms injected on every request, for one node and for 50 nodes at once
// (3 LUNs each, 150 LUNs on the array) with at most benchFenceConcurrency
// in flight. Undo runs untimed.
func BenchmarkUnityFenceLatency(b *testing.B) {
	var doc strings.Builder
	doc.WriteString("nodes:\n")
	for i := range 50 {
		fmt.Fprintf(&doc, "  - {name: n%02d, ip: 127.0.13.%d, fqdn: n%02d.cluster.local, iqn: \"iqn.1994-05.com.redhat:n%02d\"}\n", i, i+1, i, i)
	}
	doc.WriteString("arrays:\n  - {name: unity-1, family: unity, spec: {username: admin, password: secret, generate: {lunsPerNode: 3}}}\n")
	for _, n := range []int{1, 50} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			e := startUnity(b, doc.String(), 10*time.Second)
			ctx := context.Background()
			ids := make([]arrayclients.Identity, n)
			for i := range n {
				var err error
				ids[i], err = e.adapter.Resolve(ctx, unityNode(fmt.Sprintf("n%02d", i)))
				require.NoError(b, err)
			}
			e.srv.AddFault(simcore.Fault{Kind: simcore.FaultLatency, Latency: 20 * time.Millisecond})
			benchFence(b, e.srv, ids, e.adapter)
		})
	}
}
