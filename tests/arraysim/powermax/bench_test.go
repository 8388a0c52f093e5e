package powermax_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// BenchmarkFenceRoundTrip measures the simulator with gopowermax: one op is
// a fence round trip of one host (GET host, PUT remove initiators, GET
// host, PUT add initiators: 4 requests). Parallel goroutines each own a host.
func BenchmarkFenceRoundTrip(b *testing.B) {
	var doc strings.Builder
	doc.WriteString("nodes:\n")
	const hosts = 64
	for i := range hosts {
		fmt.Fprintf(&doc, "  - {name: n%02d, ip: 127.0.12.%d, iqn: \"iqn.1994-05.com.redhat:n%02d\"}\n", i, i+1, i)
	}
	doc.WriteString("arrays:\n  - {name: pmax-1, family: powermax, spec: {symmetrixID: \"000197900046\", username: smc, password: secret, generate: {clusterPrefix: TST, volumesPerNode: 3}}}\n")
	e := start(b, doc.String(), false)
	var next atomic.Int32
	b.SetParallelism(4)
	b.ResetTimer()
	began := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		i := int(next.Add(1)-1) % hosts
		c := e.client(b, "secret", 10*time.Second)
		id := fmt.Sprintf("csi-node-TST-n%02d", i)
		ctx := context.Background()
		for pb.Next() {
			h, err := c.GetHostByID(ctx, sym, id)
			require.NoError(b, err)
			orig := h.Initiators
			_, err = c.UpdateHostInitiators(ctx, sym, h, nil)
			require.NoError(b, err)
			h, err = c.GetHostByID(ctx, sym, id)
			require.NoError(b, err)
			_, err = c.UpdateHostInitiators(ctx, sym, h, orig)
			require.NoError(b, err)
		}
	})
	b.ReportMetric(float64(4*b.N)/time.Since(began).Seconds(), "req/s")
}
