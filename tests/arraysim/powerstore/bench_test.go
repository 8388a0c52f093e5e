package powerstore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dell/gopowerstore"
	"github.com/stretchr/testify/require"
)

// BenchmarkFenceRoundTrip drives one fence round trip per iteration with
// the real client over loopback HTTP: remove the host's initiators, read
// it back, add them back, read it back (4 requests).
func BenchmarkFenceRoundTrip(b *testing.B) {
	e := newEnvFrom(b, testFixture)
	benchFence(b, e, nodeHostName(e.nodes[0]))
}

// benchFence drives fence round trips of one host with the real client:
// remove its initiators, read it back, add them back, read it back.
func benchFence(b *testing.B, e *env, name string) {
	ctx := context.Background()
	h, err := e.client.GetHostByName(ctx, name)
	require.NoError(b, err)
	var ports []string
	var add []gopowerstore.InitiatorCreateModify
	for _, in := range h.Initiators {
		p, pt := in.PortName, in.PortType
		ports = append(ports, p)
		add = append(add, gopowerstore.InitiatorCreateModify{PortName: &p, PortType: &pt})
	}
	requests := 0
	start := time.Now()
	for b.Loop() {
		_, err = e.client.ModifyHost(ctx, &gopowerstore.HostModify{RemoveInitiators: &ports}, h.ID)
		require.NoError(b, err)
		_, err = e.client.GetHost(ctx, h.ID)
		require.NoError(b, err)
		_, err = e.client.ModifyHost(ctx, &gopowerstore.HostModify{AddInitiators: &add}, h.ID)
		require.NoError(b, err)
		_, err = e.client.GetHost(ctx, h.ID)
		require.NoError(b, err)
		requests += 4
	}
	b.ReportMetric(float64(requests)/time.Since(start).Seconds(), "req/s")
}

// scaleEnv is an array of 1,000 generated hosts with two volumes each, as
// the storm benchmark has.
func scaleEnv(b *testing.B) *env {
	var doc strings.Builder
	doc.WriteString("nodes:\n")
	for i := range 1000 {
		fmt.Fprintf(&doc, "  - {name: w%d, ip: 127.1.%d.%d, machineID: %032x, iqn: \"iqn.1994-05.com.redhat:w%d\"}\n",
			i, i/250, i%250+1, i+1, i)
	}
	doc.WriteString("arrays:\n  - {name: pstore-1, family: powerstore, spec: {username: admin, password: Password123!, perNode: {volumes: 2}}}\n")
	return newEnvFrom(b, doc.String())
}

// BenchmarkFenceAtScale is BenchmarkFenceRoundTrip on a 1,000-host array:
// host reads and writes must not cost in proportion to the array's size.
func BenchmarkFenceAtScale(b *testing.B) {
	e := scaleEnv(b)
	benchFence(b, e, nodeHostName(e.nodes[500]))
}

// BenchmarkProbeAtScale is what a health probe asks a 1,000-host array
// for: the host's mappings, then each mapped volume's metrics.
func BenchmarkProbeAtScale(b *testing.B) {
	e := scaleEnv(b)
	ctx := context.Background()
	h, err := e.client.GetHostByName(ctx, nodeHostName(e.nodes[500]))
	require.NoError(b, err)
	requests := 0
	start := time.Now()
	for b.Loop() {
		maps, err := e.client.GetHostVolumeMappingByHostID(ctx, h.ID)
		require.NoError(b, err)
		require.Len(b, maps, 2)
		for _, m := range maps {
			_, err := e.client.PerformanceMetricsByVolume(ctx, m.VolumeID, gopowerstore.TwentySec)
			require.NoError(b, err)
		}
		requests += 1 + len(maps)
	}
	b.ReportMetric(float64(requests)/time.Since(start).Seconds(), "req/s")
}
