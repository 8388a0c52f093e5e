package cluster

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/cluster/ledger"
)

func TestThreeReplicasFormOneGroup(t *testing.T) {
	g := newGroup(t, 3)
	g.startAll()
	leader, l := waitLeader(t, g.running(), waitLong)

	for _, n := range g.running() {
		st := n.Status()
		require.NotNil(t, st.Leader, "replica %s", n.ID())
		assert.Equal(t, leader.ID(), st.Leader.ID, "replica %s", n.ID())
		assert.Equal(t, g.peers[indexOf(g, leader.ID())].HTTPAddr, st.Leader.HTTPAddr)
		assert.Len(t, st.Peers, 3)
		if n == leader {
			assert.Equal(t, "leader", st.State)
			require.NotNil(t, st.LeaderSince)
		} else {
			assert.Equal(t, "follower", st.State)
			assert.GreaterOrEqual(t, st.LastContactSeconds, 0.0)
		}
	}

	index := applyNotes(t, leader, l, "hello", 3)
	want := waitSameLedger(t, g.running(), index)
	assert.Contains(t, want, "hello-2")

	// The leadership is recorded in the ledger with its term.
	epoch, ok := leader.Ledger().Copy().CurrentEpoch()
	require.True(t, ok)
	assert.Equal(t, leader.ID(), epoch.Replica)
	assert.Equal(t, l.Term, epoch.Term)
	assert.Equal(t, l.EpochIndex, epoch.Index)

	// Followers refuse writes and leader-only reads.
	for _, n := range g.running() {
		if n == leader {
			require.NoError(t, n.VerifyLeader(context.Background()))
			require.NoError(t, n.ConsistentRead(context.Background(), func(s *ledger.State) {
				assert.True(t, hasNote(s, "hello-0"))
			}))
			continue
		}
		_, err := n.Apply(context.Background(), note(l, "from a follower"))
		require.ErrorIs(t, err, ErrNotLeader)
		require.ErrorIs(t, n.VerifyLeader(context.Background()), ErrNotLeader)
		require.ErrorIs(t, n.ConsistentRead(context.Background(), func(*ledger.State) {}), ErrNotLeader)
	}

	// Metrics on the registry each replica was given.
	_, err := leader.Apply(context.Background(), &ledger.OperatorNote{Meta: l.Meta(), Operator: "x", Action: "note"})
	require.ErrorIs(t, err, ledger.ErrInvalid)
	m := gather(t, g.regs[leader.ID()])
	assert.InDelta(t, 1.0, m[`fenced_raft_state{state="leader"}`], 0)
	assert.InDelta(t, 0.0, m[`fenced_raft_state{state="follower"}`], 0)
	assert.InDelta(t, float64(l.Term), m["fenced_raft_term"], 0)
	assert.Positive(t, m["fenced_raft_commit_index"])
	assert.Positive(t, m["fenced_raft_applied_index"])
	assert.InDelta(t, 1.0, m[`fenced_raft_applies_failed_total{reason="invalid"}`], 0)
	for _, id := range g.ids() {
		if id != leader.ID() {
			assert.InDelta(t, 1.0, m[`fenced_raft_peer_reachable{peer="`+id+`"}`], 0, id)
		}
	}
	f := gather(t, g.regs[other(g, leader.ID())])
	assert.InDelta(t, 1.0, f[`fenced_raft_state{state="follower"}`], 0)
	assert.Contains(t, f, "fenced_raft_last_contact_seconds")
}

// gather returns every sample on reg keyed by name{labels}.
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			if len(m.GetLabel()) > 0 {
				var parts []string
				for _, lp := range m.GetLabel() {
					parts = append(parts, lp.GetName()+`="`+lp.GetValue()+`"`)
				}
				key += "{" + strings.Join(parts, ",") + "}"
			}
			switch {
			case m.GetGauge() != nil:
				out[key] = m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				out[key] = m.GetCounter().GetValue()
			}
		}
	}
	return out
}

func other(g *testGroup, id string) string {
	for _, p := range g.peers {
		if p.ID != id {
			return p.ID
		}
	}
	return ""
}

func indexOf(g *testGroup, id string) int {
	for i, p := range g.peers {
		if p.ID == id {
			return i
		}
	}
	return -1
}

// TestLeaderFailover stops the leader abruptly three times and measures how
// long the others take to establish a new leader.
func TestLeaderFailover(t *testing.T) {
	g := newGroup(t, 3)
	g.startAll()
	leader, l := waitLeader(t, g.running(), waitLong)
	applyNotes(t, leader, l, "before", 2)

	var figures []time.Duration
	for round := range 3 {
		old := leader.ID()
		oldLead := l
		start := time.Now()
		g.stop(old)
		require.Error(t, oldLead.Ctx.Err(), "the old leadership's context is cancelled")

		leader, l = waitLeader(t, g.running(), waitLong)
		elapsed := time.Since(start)
		figures = append(figures, elapsed)
		t.Logf("round %d: %s stopped, %s established leadership (term %d) after %s", round, old, leader.ID(), l.Term, elapsed)
		require.NotEqual(t, old, leader.ID())
		require.Greater(t, l.Term, oldLead.Term)

		// The new leader commits; a command composed under the old term is refused.
		index := applyNotes(t, leader, l, "after-"+old, 2)
		_, err := leader.Apply(context.Background(), note(oldLead, "stale"))
		require.ErrorIs(t, err, ledger.ErrStaleTerm)

		// The old leader rejoins from its data directory as a follower.
		g.start(old)
		want := waitSameLedger(t, g.running(), index+1)
		assert.Contains(t, want, "after-"+old+"-1")
		_, _ = waitLeader(t, g.running(), waitLong)
		assert.NotEqual(t, "leader", g.node(old).Status().State)
	}
	sort.Slice(figures, func(i, j int) bool { return figures[i] < figures[j] })
	t.Logf("FAILOVER: leader stopped -> new leader established: min %s, median %s, max %s (heartbeat %s, election %s)",
		figures[0], figures[1], figures[2], DefaultTimings().HeartbeatTimeout, DefaultTimings().ElectionTimeout)
}

func TestRestartAllKeepsTheLedger(t *testing.T) {
	g := newGroup(t, 3)
	for id, cfg := range g.cfgs {
		cfg.Timings.TrailingLogs = 8 // keep little log after a snapshot so restart reads one
		g.cfgs[id] = cfg
	}
	g.startAll()
	leader, l := waitLeader(t, g.running(), waitLong)
	index := applyNotes(t, leader, l, "first", 10)
	require.NoError(t, leader.raft.Snapshot().Error())
	index = max(index, applyFence(t, leader, l))
	before := waitSameLedger(t, g.running(), index)
	beforeState := leader.Ledger().Copy()

	for _, id := range g.ids() {
		g.stop(id)
	}
	g.startAll()
	leader, l = waitLeader(t, g.running(), waitLong)
	after := waitSameLedger(t, g.running(), l.EpochIndex)

	// Identical on every replica, and equal to the ledger before the restart
	// but for the new leadership's epoch.
	s := leader.Ledger().Copy()
	require.Len(t, s.Leaders, len(beforeState.Leaders)+1)
	assert.Equal(t, l.Term, s.Leaders[len(s.Leaders)-1].Term)
	s.Leaders = s.Leaders[:len(s.Leaders)-1]
	s.Index, s.Term = beforeState.Index, beforeState.Term
	assert.Equal(t, beforeState, s)
	assert.NotEqual(t, before, after)

	// Commands continue.
	index = applyNotes(t, leader, l, "second", 3)
	final := waitSameLedger(t, g.running(), index)
	assert.Contains(t, final, "second-2")
	assert.Contains(t, final, "first-9")
}

// applyFence walks a fence to tainted so the ledger holds a real record.
func applyFence(t *testing.T, leader *Node, l Leadership) uint64 {
	ctx := l.Ctx
	plan := planFor("a1", "n1")
	_, err := leader.Apply(ctx, &ledger.SetIdentities{Meta: l.Meta(), Cluster: "c1", Node: "n1", BootID: "b1",
		Identities: map[string]arrayclients.Identity{"a1": plan.Identity}})
	require.NoError(t, err)
	open, err := leader.Apply(ctx, &ledger.OpenFence{Meta: l.Meta(), Cluster: "c1", Node: "n1",
		Origin: ledger.OriginVerdict, Reason: "test", Plans: []arrayclients.Plan{plan},
		FootprintRecorded: true}) // a node without volumes
	require.NoError(t, err)
	id := ledger.FenceID(open)
	step := func(from, to ledger.FenceState) uint64 {
		i, err := leader.Apply(ctx, &ledger.FenceStep{Meta: l.Meta(), Cluster: "c1", Node: "n1", FenceID: id, From: from, To: to})
		require.NoError(t, err)
		return i
	}
	step(ledger.StateIntent, ledger.StateFencing)
	_, err = leader.Apply(ctx, &ledger.RecordArrayResult{Meta: l.Meta(), Cluster: "c1", Node: "n1", FenceID: id,
		Expect: ledger.StateFencing, Array: "a1", Op: ledger.OpVerify, OK: true, Verification: &arrayclients.Verification{Fenced: true}})
	require.NoError(t, err)
	step(ledger.StateFencing, ledger.StateFenced)
	return step(ledger.StateFenced, ledger.StateTainted)
}

func TestSnapshotCatchUp(t *testing.T) {
	g := newGroup(t, 3)
	for id, cfg := range g.cfgs {
		cfg.Timings.TrailingLogs = 4
		cfg.Timings.SnapshotThreshold = 16
		g.cfgs[id] = cfg
	}
	g.startAll()
	leader, l := waitLeader(t, g.running(), waitLong)
	var follower string
	for _, id := range g.ids() {
		if id != leader.ID() {
			follower = id
		}
	}
	g.stop(follower)
	applyNotes(t, leader, l, "while-away", 40)
	require.NoError(t, leader.raft.Snapshot().Error())
	index := applyNotes(t, leader, l, "after-snapshot", 2)

	n := g.start(follower)
	waitSameLedger(t, g.running(), index)
	assert.Positive(t, n.Status().LastSnapshotIndex, "the follower caught up from a snapshot")
	assert.True(t, hasNote(n.Ledger().Copy(), "while-away-0"))
}

func TestSingleReplica(t *testing.T) {
	t.Run("without TLS", func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.ID, cfg.DataDir, cfg.BindAddr = "dev", t.TempDir(), "127.0.0.1:7441"
		n, err := Open(cfg, newTestLogger(t), nil)
		require.NoError(t, err)
		defer n.Close()
		leader, l := waitLeader(t, []*Node{n}, waitLong)
		index := applyNotes(t, leader, l, "dev", 2)
		assert.Equal(t, index, n.Ledger().AppliedIndex())
	})
	t.Run("with TLS, restarted", func(t *testing.T) {
		g := newGroup(t, 1)
		g.start("r1")
		leader, l := waitLeader(t, g.running(), waitLong)
		applyNotes(t, leader, l, "one", 1)
		g.stop("r1")
		n := g.start("r1")
		_, l = waitLeader(t, g.running(), waitLong)
		assert.True(t, hasNote(n.Ledger().Copy(), "one-0"))
		applyNotes(t, n, l, "two", 1)
	})
}

func TestFiveReplicas(t *testing.T) {
	g := newGroup(t, 5)
	g.startAll()
	leader, l := waitLeader(t, g.running(), waitLong)
	applyNotes(t, leader, l, "five", 2)
	start := time.Now()
	g.stop(leader.ID())
	// A second replica fails too: three of five are still a quorum.
	other := g.running()[0]
	g.stop(other.ID())
	leader, l = waitLeader(t, g.running(), waitLong)
	t.Logf("five replicas, leader and one more stopped: new leader after %s", time.Since(start))
	index := applyNotes(t, leader, l, "three-left", 2)
	waitSameLedger(t, g.running(), index)
}

func TestConfigValidate(t *testing.T) {
	good := func() Config {
		c := DefaultConfig()
		c.ID, c.DataDir, c.BindAddr = "a", "/var/lib/fenced", "127.0.0.1:7441"
		c.Peers = []Peer{{ID: "a", RaftAddr: "127.0.0.1:7441", HTTPAddr: "https://127.0.0.1:7440"}, {ID: "b", RaftAddr: "127.0.0.2:7441"}}
		c.TLS = TLSConfig{CertFile: "a.crt", KeyFile: "a.key", CAFile: "ca.crt"}
		return c
	}
	require.NoError(t, func() error { c := good(); return c.Validate() }())
	tcs := []struct {
		name  string
		edit  func(c *Config)
		match string
	}{
		{"no id", func(c *Config) { c.ID = "" }, "id: is required"},
		{"not a peer", func(c *Config) { c.ID = "z" }, `peers: this replica "z" is not listed`},
		{"duplicate peer", func(c *Config) { c.Peers[1].ID = "a" }, `peers[1].id: "a" is listed twice`},
		{"bad raft address", func(c *Config) { c.Peers[1].RaftAddr = "nohost" }, "peers[1].raftAddr"},
		{"bad http address", func(c *Config) { c.Peers[0].HTTPAddr = "ftp://x" }, "peers[0].httpAddr"},
		{"no TLS with peers", func(c *Config) { c.TLS = TLSConfig{} }, "tls.certFile: is required"},
		{"lease above heartbeat", func(c *Config) { c.Timings.LeaderLeaseTimeout = 2 * time.Second }, "timings.leaderLeaseTimeout"},
		{"advertise differs", func(c *Config) { c.AdvertiseAddr = "127.0.0.9:1" }, "advertiseAddr"},
		{"zero timing", func(c *Config) { c.Timings.ForwardWait = 0 }, "timings.forwardWait"},
		{"no data dir", func(c *Config) { c.DataDir = "" }, "dataDir: is required"},
	}
	for _, tc := range tcs {
		t.Run(tc.name, func(t *testing.T) {
			c := good()
			tc.edit(&c)
			err := c.Validate()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.match)
		})
	}
	_, err := Open(Config{ID: "x"}, nil, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "dataDir")
}

// TestGrowFromOneToThree grows a running single replica into a group of
// three: the new replicas join instead of bootstrapping, the leader adds them
// when its peer list names them, and the ledger carries over.
func TestGrowFromOneToThree(t *testing.T) {
	g := newGroup(t, 3)
	solo := g.cfgs["r1"]
	solo.Peers = g.peers[:1]
	g.cfgs["r1"] = solo
	g.start("r1")
	leader, l := waitLeader(t, g.running(), waitLong)
	applyNotes(t, leader, l, "alone", 2)

	for _, id := range []string{"r2", "r3"} {
		cfg := g.cfgs[id]
		cfg.JoinExisting = true
		g.cfgs[id] = cfg
		g.start(id)
	}
	require.NoError(t, leader.SetPeers(g.peers))
	leader, l = waitLeader(t, g.running(), waitLong)
	assert.Equal(t, "r1", leader.ID())
	index := applyNotes(t, leader, l, "together", 1)
	final := waitSameLedger(t, g.running(), index)
	assert.Contains(t, final, "alone-1")
	for _, p := range leader.Status().Peers {
		assert.Equal(t, "voter", p.Suffrage, p.ID)
	}

	// The group of three now survives the loss of its first replica.
	g.stop("r1")
	leader, l = waitLeader(t, g.running(), waitLong)
	applyNotes(t, leader, l, "without-r1", 1)
}
