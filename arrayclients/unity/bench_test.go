package unity_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/arrayclients/internal/arraytest"
	"github.com/fenced-project/fenced/arrayclients/unity"
	"github.com/fenced-project/fenced/tests/arraysim/simcore"
)

// BenchmarkUnityFenceLatency measures fence latency (Plan, Apply, Verify) with
// 20 ms injected on every request, for one node and for 50 nodes at once
// (3 LUNs each) with at most arraytest.BenchConcurrency in flight, without
// footprint volumes and with each node's LUNs as its footprint (as in a
// cluster where every LUN is a Kubernetes volume), on an array of 150 LUNs
// and, for 50 nodes, of 2,001 (a storm-sized array). Undo runs untimed.
func BenchmarkUnityFenceLatency(b *testing.B) {
	doc := func(nodes int) string {
		var doc strings.Builder
		doc.WriteString("nodes:\n")
		for i := range nodes {
			fmt.Fprintf(&doc, "  - {name: n%03d.cluster.local, ip: 127.0.%d.%d, fqdn: n%03d.cluster.local, iqn: \"iqn.1994-05.com.redhat:n%03d\"}\n", i, 13+i/250, i%250+1, i, i)
		}
		doc.WriteString("arrays:\n  - {name: unity-1, family: unity, spec: {username: admin, password: secret, generate: {lunsPerNode: 3}}}\n")
		return doc.String()
	}
	for _, tc := range []struct{ luns, n int }{{150, 1}, {150, 50}, {2001, 50}} {
		fixture := doc(tc.luns / 3)
		for _, footprint := range []bool{false, true} {
			b.Run(fmt.Sprintf("luns=%d/nodes=%d/footprint=%t", tc.luns, tc.n, footprint), func(b *testing.B) {
				e := startUnity(b, fixture, 10*time.Second)
				ctx := context.Background()
				ids := make([]arrayclients.Identity, tc.n)
				vols := make([][]arrayclients.VolumeRef, tc.n)
				for i := range tc.n {
					var err error
					ids[i], err = e.adapter.Resolve(ctx, arrayclients.Node{Cluster: "c1", Name: fmt.Sprintf("n%03d", i),
						CSINodeIDs: map[string]string{arrayclients.DriverUnity: fmt.Sprintf("n%03d,n%03d.cluster.local", i, i)}})
					require.NoError(b, err)
					if !footprint {
						continue
					}
					p, err := e.adapter.Plan(ctx, ids[i], nil)
					require.NoError(b, err)
					var entries unity.UnityEntries
					require.NoError(b, json.Unmarshal(p.Entries, &entries))
					for _, l := range entries.LUNs {
						vols[i] = append(vols[i], arrayclients.VolumeRef{Volume: "pv-" + l.LUN, Object: l.LUN, Protocol: arrayclients.ProtocolBlock, Attached: true})
					}
				}
				e.srv.AddFault(simcore.Fault{Kind: simcore.FaultLatency, Latency: 20 * time.Millisecond})
				benchFenceFootprint(b, e.srv, ids, vols, e.adapter)
			})
		}
	}
}

// benchFenceFootprint is benchFence with footprint volumes per node.
func benchFenceFootprint(b *testing.B, srv *simcore.Server, ids []arrayclients.Identity, vols [][]arrayclients.VolumeRef, a arrayclients.Adapter) {
	ctx := context.Background()
	plans := make([]arrayclients.Plan, len(ids))
	var requests int64
	b.ResetTimer()
	for range b.N {
		seq := srv.LastSeq()
		arraytest.ForEachBounded(len(ids), arraytest.BenchConcurrency, func(i int) {
			p, err := a.Plan(ctx, ids[i], vols[i])
			require.NoError(b, err)
			require.NoError(b, a.Apply(ctx, p))
			v, err := a.Verify(ctx, p)
			require.NoError(b, err)
			require.True(b, v.Fenced)
			plans[i] = p
		})
		b.StopTimer()
		requests += srv.LastSeq() - seq
		arraytest.ForEachBounded(len(ids), arraytest.BenchConcurrency, func(i int) {
			var scope arrayclients.RestoreScope
			for _, v := range vols[i] {
				scope.Wanted = append(scope.Wanted, v.Volume)
			}
			require.NoError(b, a.Undo(ctx, plans[i], scope))
		})
		b.StartTimer()
	}
	b.ReportMetric(float64(requests)/float64(b.N*len(ids)), "req/node")
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/batch")
}
