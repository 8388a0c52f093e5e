package unity_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dell/gounity"
	"github.com/stretchr/testify/require"
)

// BenchmarkFenceRoundTrip measures the simulator with gounity: one op is a
// fence round trip of one LUN of one host (GET lun, POST modifyLun without
// the host, GET lun, POST modifyLun with it: 4 requests). Parallel
// goroutines each own a node and its LUN, and their own session. It runs
// at 64 and 1,000 hosts: each write costs the audit's whole-state diff.
func BenchmarkFenceRoundTrip(b *testing.B) {
	for _, nodes := range []int{64, 1000} {
		b.Run(fmt.Sprintf("hosts=%d", nodes), func(b *testing.B) { benchFenceRoundTrip(b, nodes) })
	}
}

func benchFenceRoundTrip(b *testing.B, nodes int) {
	var doc strings.Builder
	doc.WriteString("nodes:\n")
	for i := range nodes {
		fmt.Fprintf(&doc, "  - {name: n%02d.cluster.local, ip: 127.0.%d.%d, fqdn: n%02d.cluster.local, iqn: \"iqn.1994-05.com.redhat:n%02d\"}\n",
			i, 12+i/250, i%250+1, i, i)
	}
	doc.WriteString("arrays:\n  - {name: unity-1, family: unity, spec: {username: admin, password: secret, generate: {lunsPerNode: 3}}}\n")
	e := startDoc(b, doc.String(), false)
	clients := make([]gounity.UnityClient, 8)
	for i := range clients { // gounity clients must be built before any runs
		clients[i] = e.client(b)
	}
	var next atomic.Int32
	b.SetParallelism(4)
	b.ResetTimer()
	began := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		i := int(next.Add(1) - 1)
		c := clients[i%len(clients)]
		ctx := context.Background()
		h, err := c.FindHostByName(ctx, fmt.Sprintf("n%02d.cluster.local", i))
		require.NoError(b, err)
		lun := fmt.Sprintf("sv_%d", 3*i+1)
		for pb.Next() {
			_, err := c.FindVolumeByID(ctx, lun)
			require.NoError(b, err)
			require.NoError(b, c.ModifyVolumeExport(ctx, lun, nil))
			_, err = c.FindVolumeByID(ctx, lun)
			require.NoError(b, err)
			require.NoError(b, c.ModifyVolumeExport(ctx, lun, []string{h.HostContent.ID}))
		}
	})
	b.ReportMetric(float64(4*b.N)/time.Since(began).Seconds(), "req/s")
}
