package powerstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/dell/gopowerstore"
	"github.com/stretchr/testify/require"
)

// BenchmarkFenceRoundTrip drives one fence round trip per iteration with
// the real client over loopback HTTP: find the host by name, remove its
// initiators, read it back, add them back, read it back (5 requests).
func BenchmarkFenceRoundTrip(b *testing.B) {
	e := newEnvFrom(b, testFixture)
	ctx := context.Background()
	name := nodeHostName(e.nodes[0])
	requests := 0
	start := time.Now()
	for b.Loop() {
		h, err := e.client.GetHostByName(ctx, name)
		require.NoError(b, err)
		var ports []string
		var add []gopowerstore.InitiatorCreateModify
		for _, in := range h.Initiators {
			p, pt := in.PortName, in.PortType
			ports = append(ports, p)
			add = append(add, gopowerstore.InitiatorCreateModify{PortName: &p, PortType: &pt})
		}
		_, err = e.client.ModifyHost(ctx, &gopowerstore.HostModify{RemoveInitiators: &ports}, h.ID)
		require.NoError(b, err)
		_, err = e.client.GetHost(ctx, h.ID)
		require.NoError(b, err)
		_, err = e.client.ModifyHost(ctx, &gopowerstore.HostModify{AddInitiators: &add}, h.ID)
		require.NoError(b, err)
		_, err = e.client.GetHost(ctx, h.ID)
		require.NoError(b, err)
		requests += 5
	}
	b.ReportMetric(float64(requests)/time.Since(start).Seconds(), "req/s")
}
