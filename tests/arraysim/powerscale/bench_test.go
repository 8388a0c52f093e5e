package powerscale_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/tests/arraysim/powerscale"
)

// BenchmarkFenceRoundTrip drives one fence round trip per iteration with
// the real client over loopback HTTP on one export: remove the node's
// strings (GET + PUT), read back, add the FQDN back to clients (GET + PUT),
// read back (6 requests).
func BenchmarkFenceRoundTrip(b *testing.B) {
	e := newEnv(b)
	ctx := context.Background()
	c, err := e.client(b, powerscale.DefaultPassword, 0, 5*time.Second)
	require.NoError(b, err)
	n := e.nodes[0]
	x, err := c.GetExportByIDWithZone(ctx, 2, "System")
	require.NoError(b, err)
	require.Contains(b, *x.Clients, n.FQDN)
	requests := 0
	start := time.Now()
	for b.Loop() {
		require.NoError(b, c.RemoveExportClientsByIDWithZone(ctx, 2, "System", []string{n.IP, n.Name, n.FQDN}, true))
		_, err := c.GetExportByIDWithZone(ctx, 2, "System")
		require.NoError(b, err)
		require.NoError(b, c.AddExportClientsByIDWithZone(ctx, 2, "System", []string{n.FQDN}, true))
		_, err = c.GetExportByIDWithZone(ctx, 2, "System")
		require.NoError(b, err)
		requests += 6
	}
	b.ReportMetric(float64(requests)/time.Since(start).Seconds(), "req/s")
}
