package powerflex_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/arrayclients/internal/arraytest"
	"github.com/fenced-project/fenced/tests/arraysim/simcore"
)

// TestPowerFlexSweep reads many SDCs' connection state in one listing and
// the statistics only of the disconnected ones, judged as Health judges
// them.
func TestPowerFlexSweep(t *testing.T) {
	ctx := context.Background()
	e := startPowerFlex(t, pflexFixture, arrayclients.Options{}, 2*time.Second)
	id1, err := e.adapter.Resolve(ctx, pflexW1)
	require.NoError(t, err)
	id2, err := e.adapter.Resolve(ctx, pflexW2)
	require.NoError(t, err)
	sw, ok := e.adapter.(arrayclients.Sweeper)
	require.True(t, ok, "the adapter sweeps")
	other := arrayclients.Identity{Array: "elsewhere", Family: arrayclients.PowerFlex, Node: "worker-9", ObjectID: "x"}

	seq := e.srv.LastSeq()
	hs, err := sw.Sweep(ctx, []arrayclients.Identity{id1, id2, other}, true)
	require.NoError(t, err)
	require.Len(t, hs, 3)
	for i, node := range []string{"worker-1", "worker-2"} {
		assert.Equal(t, node, hs[i].Node)
		assert.Equal(t, arrayclients.Connected, hs[i].Connectivity, node)
		assert.Equal(t, arrayclients.IOUnknown, hs[i].IO, "a connected SDC's statistics are not read")
		assert.False(t, hs[i].SampledAt.IsZero())
	}
	assert.Equal(t, arrayclients.ConnectivityUnknown, hs[2].Connectivity)
	assert.Equal(t, "worker-9", hs[2].Node)
	assert.Len(t, pflexReads(e, seq), 1, "one listing for every node")

	require.NoError(t, e.sim.SetSignals("worker-1", simcore.Signals{Connected: simcore.Bool(false), IOActive: simcore.Bool(false)}))
	seq = e.srv.LastSeq()
	hs, err = sw.Sweep(ctx, []arrayclients.Identity{id1, id2}, true)
	require.NoError(t, err)
	assert.Equal(t, arrayclients.Disconnected, hs[0].Connectivity)
	assert.Equal(t, arrayclients.IOIdle, hs[0].IO)
	assert.Contains(t, hs[0].Reason, "read+write I/Os")
	assert.Equal(t, arrayclients.Connected, hs[1].Connectivity)
	audit := pflexReads(e, seq)
	require.Len(t, audit, 2, "the listing and the disconnected SDC's statistics")
	assert.True(t, strings.HasSuffix(audit[1].Path, "/relationships/Statistics"), audit[1].Path)
	arraytest.RequireReadOnlyProbes(t, e.srv)

	// Without I/O the disconnected SDC's statistics are not read either.
	seq = e.srv.LastSeq()
	hs, err = sw.Sweep(ctx, []arrayclients.Identity{id1}, false)
	require.NoError(t, err)
	assert.Equal(t, arrayclients.Disconnected, hs[0].Connectivity)
	assert.Equal(t, arrayclients.IOUnknown, hs[0].IO)
	assert.Len(t, pflexReads(e, seq), 1)

	// A disconnected SDC that still moves data is active, as Health says.
	require.NoError(t, e.sim.SetSignals("worker-1", simcore.Signals{Connected: simcore.Bool(false), IOActive: simcore.Bool(true)}))
	hs, err = sw.Sweep(ctx, []arrayclients.Identity{id1}, true)
	require.NoError(t, err)
	assert.Equal(t, arrayclients.IOActive, hs[0].IO)

	e.srv.AddFault(simcore.Fault{Kind: simcore.FaultError, Status: 503})
	_, err = sw.Sweep(ctx, []arrayclients.Identity{id1}, true)
	require.ErrorIs(t, err, arrayclients.ErrUnreachable)
	e.srv.ClearFaults()
}

// pflexReads lists the requests after seq but the logins.
func pflexReads(e pflexEnv, seq int64) []simcore.AuditEntry {
	var out []simcore.AuditEntry
	for _, a := range e.srv.AuditSince(seq) {
		if a.Path != "/api/login" {
			out = append(out, a)
		}
	}
	return out
}

// BenchmarkPowerFlexSweep measures one sweep of every SDC of a system of
// 1,000 and 2,000 nodes (none disconnected: the cost at rest), the
// fenced side's CPU and allocations (the simulator runs in the same
// process: its time is in the figures too; ns/op is wall time of one
// listing).
func BenchmarkPowerFlexSweep(b *testing.B) {
	for _, nodes := range []int{1000, 2000} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			ctx := context.Background()
			e := startPowerFlex(b, pflexManyNodes(nodes, 0), arrayclients.Options{}, 10*time.Second)
			e.srv.SetAuditLimit(100)
			// The identities as the ledger holds them (resolving each would
			// list every SDC once per node).
			ids := make([]arrayclients.Identity, nodes)
			for i := range nodes {
				name := fmt.Sprintf("node-%02d", i)
				sdc, ok := e.sim.SDCID(name)
				require.True(b, ok, name)
				ids[i] = arrayclients.Identity{Array: e.cfg.Name, Family: arrayclients.PowerFlex, Node: name, ObjectID: sdc}
			}
			sw := e.adapter.(arrayclients.Sweeper)
			hs, err := sw.Sweep(ctx, ids, true)
			require.NoError(b, err)
			require.Equal(b, arrayclients.Connected, hs[nodes-1].Connectivity)
			b.ReportAllocs()
			for b.Loop() {
				hs, err := sw.Sweep(ctx, ids, true)
				require.NoError(b, err)
				require.Len(b, hs, nodes)
			}
		})
	}
}
