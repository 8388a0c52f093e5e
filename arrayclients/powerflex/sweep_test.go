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
	assert.True(t, strings.HasSuffix(audit[1].Path, "/action/querySelectedStatistics"), audit[1].Path)
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

// TestPowerFlexSweepStatisticsTakeTurns: when many SDCs are disconnected
// at once and a sweep's time allows only some statistics reads, the reads
// run side by side on at most half the pool's clients, and the next sweep
// reads those not read yet before reading any again, so every gone node's
// I/O is sampled within a few sweeps instead of the same few every time.
func TestPowerFlexSweepStatisticsTakeTurns(t *testing.T) {
	ctx := context.Background()
	const nodes = 12
	e := startPowerFlex(t, pflexManyNodes(nodes, 1), arrayclients.Options{}, 10*time.Second)
	sw, ok := e.adapter.(arrayclients.Sweeper)
	require.True(t, ok)
	ids := pflexSweepNodes(t, e, nodes, func(int) bool { return false }, func(int) bool { return false })
	// A gateway without the bulk read (querySelectedStatistics).
	e.srv.AddFault(simcore.Fault{Kind: simcore.FaultError, Status: 400, Path: "/action/querySelectedStatistics$"})
	// Each statistics read takes a second; a sweep has 1.6 s: one round of
	// reads side by side fits, a second does not.
	e.srv.AddFault(simcore.Fault{Kind: simcore.FaultLatency, Path: "/relationships/Statistics$", Latency: time.Second})
	read := map[string]int{}
	for sweep := 1; len(read) < nodes; sweep++ {
		require.LessOrEqual(t, sweep, nodes, "every SDC's statistics read within %d sweeps; read: %v", nodes, read)
		sctx, cancel := context.WithTimeout(ctx, 1600*time.Millisecond)
		hs, err := sw.Sweep(sctx, ids, true)
		cancel()
		require.NoError(t, err, "a sweep out of time keeps its listing")
		var now []string
		for _, h := range hs {
			assert.Equal(t, arrayclients.Disconnected, h.Connectivity, h.Node)
			if h.IO == arrayclients.IOUnknown {
				assert.Contains(t, h.Reason, "not read within the sweep's time", h.Node)
				continue
			}
			assert.Equal(t, arrayclients.IOIdle, h.IO, h.Node)
			now = append(now, h.Node)
		}
		require.NotEmpty(t, now, "sweep %d read no statistics in 1.6 s", sweep)
		assert.LessOrEqual(t, len(now), 4, "sweep %d: at most half the pool's 8 clients read statistics at once: %v", sweep, now)
		for _, n := range now {
			assert.Zero(t, read[n], "sweep %d read %s again while others were never read: %v", sweep, n, read)
			read[n]++
		}
	}
}

// TestPowerFlexSweepReadsStatisticsTogether: a sweep that lists many SDCs
// disconnected reads all their statistics in one querySelectedStatistics
// request, judged as Health judges them; a failed bulk read falls back to
// one read each for that sweep only, and a gateway that refuses the
// action (a client error) is not asked for it again.
func TestPowerFlexSweepReadsStatisticsTogether(t *testing.T) {
	ctx := context.Background()
	const nodes = 12
	e := startPowerFlex(t, pflexManyNodes(nodes, 1), arrayclients.Options{}, 10*time.Second)
	sw := e.adapter.(arrayclients.Sweeper)
	ids := pflexSweepNodes(t, e, nodes, func(int) bool { return false }, func(i int) bool { return i == 3 })
	// A connected node's statistics are not asked for.
	require.NoError(t, e.sim.SetSignals("node-11", simcore.Signals{Connected: simcore.Bool(true), IOActive: simcore.Bool(true)}))
	// sweep sweeps and counts its requests by kind: the listing, bulk
	// statistics reads and single statistics reads. The simulator records
	// a request when its handler returns, which for a listing can come
	// after the client has decoded it: the count waits for all of them.
	type reads struct{ list, bulk, single int }
	sweep := func(want reads) {
		t.Helper()
		seq := e.srv.LastSeq()
		hs, err := sw.Sweep(ctx, ids, true)
		require.NoError(t, err)
		for i, h := range hs {
			switch i {
			case 3:
				assert.Equal(t, arrayclients.IOActive, h.IO, h.Node)
			case 11:
				assert.Equal(t, arrayclients.Connected, h.Connectivity, h.Node)
				assert.Equal(t, arrayclients.IOUnknown, h.IO, h.Node)
			default:
				assert.Equal(t, arrayclients.Disconnected, h.Connectivity, h.Node)
				assert.Equal(t, arrayclients.IOIdle, h.IO, h.Node)
				assert.Contains(t, h.Reason, "read+write I/Os", h.Node)
			}
		}
		count := func() (r reads) {
			for _, a := range pflexReads(e, seq) {
				switch {
				case strings.HasSuffix(a.Path, "/relationships/Sdc"):
					r.list++
				case a.Path == "/api/types/Sdc/instances/action/querySelectedStatistics":
					r.bulk++
				case strings.HasSuffix(a.Path, "/relationships/Statistics"):
					r.single++
				default:
					t.Errorf("unexpected request %s %s", a.Method, a.Path)
				}
			}
			return r
		}
		require.EventuallyWithT(t, func(c *assert.CollectT) { assert.Equal(c, want, count()) }, 5*time.Second, 10*time.Millisecond)
	}
	sweep(reads{list: 1, bulk: 1})

	// A bulk read that fails (the gateway is busy) is read one by one,
	// this sweep only.
	e.srv.AddFault(simcore.Fault{Kind: simcore.FaultError, Status: 503, Path: "/action/querySelectedStatistics$", Count: 1})
	sweep(reads{list: 1, bulk: 1, single: nodes - 1})
	sweep(reads{list: 1, bulk: 1})

	// A gateway that refuses the action is not asked for it again.
	e.srv.AddFault(simcore.Fault{Kind: simcore.FaultError, Status: 400, Path: "/action/querySelectedStatistics$", Count: 1})
	sweep(reads{list: 1, bulk: 1, single: nodes - 1})
	sweep(reads{list: 1, single: nodes - 1})
	arraytest.RequireReadOnlyProbes(t, e.srv)
}

// A sweep whose session expired (the gateway answers 401) logs the leased
// client in again and lists once more, as goscaleio's own calls do.
func TestPowerFlexSweepLogsInAgain(t *testing.T) {
	ctx := context.Background()
	e := startPowerFlex(t, pflexFixture, arrayclients.Options{}, 2*time.Second)
	id, err := e.adapter.Resolve(ctx, pflexW1)
	require.NoError(t, err)
	sw := e.adapter.(arrayclients.Sweeper)
	e.srv.AddFault(simcore.Fault{Kind: simcore.FaultError, Status: 401, Path: "/relationships/Sdc$", Count: 1})
	seq := e.srv.LastSeq()
	hs, err := sw.Sweep(ctx, []arrayclients.Identity{id}, true)
	require.NoError(t, err)
	assert.Equal(t, arrayclients.Connected, hs[0].Connectivity)
	var paths []string
	for _, a := range e.srv.AuditSince(seq) {
		paths = append(paths, a.Path)
	}
	require.GreaterOrEqual(t, len(paths), 3)
	paths = paths[len(paths)-3:]
	assert.Equal(t, "/api/login", paths[1], "the listing, a login, the listing again: %v", paths)
	assert.Equal(t, paths[0], paths[2])
}

// TestPowerFlexSweepOutOfTime: a sweep whose time runs out during the
// bulk statistics read keeps its listing (connectivity for every SDC) and
// leaves the disconnected SDCs' I/O unknown with the reason, rather than
// failing the sweep or reading them one by one past its deadline.
func TestPowerFlexSweepOutOfTime(t *testing.T) {
	ctx := context.Background()
	const nodes = 4
	e := startPowerFlex(t, pflexManyNodes(nodes, 1), arrayclients.Options{}, 10*time.Second)
	sw := e.adapter.(arrayclients.Sweeper)
	ids := pflexSweepNodes(t, e, nodes, func(i int) bool { return i == 0 }, func(int) bool { return false })
	e.srv.AddFault(simcore.Fault{Kind: simcore.FaultLatency, Path: "/action/querySelectedStatistics$", Latency: 3 * time.Second})
	seq := e.srv.LastSeq()
	sctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	hs, err := sw.Sweep(sctx, ids, true)
	require.NoError(t, err, "a sweep out of time keeps its listing")
	require.Len(t, hs, nodes)
	assert.Equal(t, arrayclients.Connected, hs[0].Connectivity)
	for _, h := range hs[1:] {
		assert.Equal(t, arrayclients.Disconnected, h.Connectivity, h.Node)
		assert.Equal(t, arrayclients.IOUnknown, h.IO, h.Node)
		assert.Contains(t, h.Reason, "not read within the sweep's time", h.Node)
	}
	for _, a := range pflexReads(e, seq) {
		assert.False(t, strings.HasSuffix(a.Path, "/relationships/Statistics"), "no single read after the deadline: %s", a.Path)
	}

	// A timeout is no refusal: the next sweep asks for the bulk read again.
	e.srv.ClearFaults()
	seq = e.srv.LastSeq()
	hs, err = sw.Sweep(ctx, ids, true)
	require.NoError(t, err)
	assert.Equal(t, arrayclients.IOIdle, hs[1].IO)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var bulk int
		for _, a := range pflexReads(e, seq) {
			// The first sweep's bulk read, cancelled at its deadline,
			// may be recorded late: only unfaulted ones count.
			if strings.HasSuffix(a.Path, "/action/querySelectedStatistics") && a.Fault == "" {
				bulk++
			}
		}
		assert.Equal(c, 1, bulk)
	}, 5*time.Second, 10*time.Millisecond)
}

// pflexSweepNodes resolves nodes node-00… of a pflexManyNodes system and
// sets each one's SDC connection state and I/O by index, for the sweep
// tests.
func pflexSweepNodes(t *testing.T, e pflexEnv, nodes int, connected, active func(i int) bool) []arrayclients.Identity {
	t.Helper()
	ids := make([]arrayclients.Identity, 0, nodes)
	for i := range nodes {
		name := fmt.Sprintf("node-%02d", i)
		id, err := e.adapter.Resolve(context.Background(), pflexNode(name, pflexGUID(i)))
		require.NoError(t, err)
		ids = append(ids, id)
		require.NoError(t, e.sim.SetSignals(name, simcore.Signals{Connected: simcore.Bool(connected(i)), IOActive: simcore.Bool(active(i))}))
	}
	return ids
}
