package cluster

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/cluster/clustertest"
	"github.com/fenced-project/fenced/cluster/ledger"
)

// waitLong bounds waits for elections and replication in tests. Failover
// timings are measured and logged, not asserted tightly.
const waitLong = 10 * time.Second

// testLog writes slog records at warn and above to the test log until the
// test ends (Raft goroutines may still log while shutting down).
type testLog struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

func (w *testLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(string(bytes.TrimRight(p, "\n")))
	}
	return len(p), nil
}

func newTestLogger(t testing.TB) *slog.Logger {
	w := &testLog{t: t}
	t.Cleanup(func() { w.mu.Lock(); w.done = true; w.mu.Unlock() })
	level := slog.LevelWarn
	if os.Getenv("FENCED_TEST_DEBUG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

// testGroup is a Raft group of real replicas on loopback, with mutual TLS
// from a CA made for the test.
type testGroup struct {
	t     *testing.T
	ca    *clustertest.CA
	dir   string
	log   *slog.Logger
	peers []Peer
	cfgs  map[string]Config
	nodes map[string]*Node
	regs  map[string]*prometheus.Registry
	mu    sync.Mutex
}

// newGroup prepares n replicas r1..rn (not started).
func newGroup(t *testing.T, n int) *testGroup {
	ca, err := clustertest.NewCA("fenced test CA")
	require.NoError(t, err)
	g := &testGroup{t: t, ca: ca, dir: t.TempDir(), log: newTestLogger(t),
		cfgs: map[string]Config{}, nodes: map[string]*Node{}, regs: map[string]*prometheus.Registry{}}
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("r%d", i)
		raftAddr, err := clustertest.FreeAddr()
		require.NoError(t, err)
		httpAddr, err := clustertest.FreeAddr()
		require.NoError(t, err)
		g.peers = append(g.peers, Peer{ID: id, RaftAddr: raftAddr, HTTPAddr: "http://" + httpAddr})
	}
	for _, p := range g.peers {
		files, err := ca.WriteFiles(g.dir, p.ID)
		require.NoError(t, err)
		cfg := DefaultConfig()
		cfg.ID = p.ID
		cfg.DataDir = filepath.Join(g.dir, p.ID)
		cfg.BindAddr = p.RaftAddr
		cfg.Peers = g.peers
		cfg.TLS = TLSConfig{CertFile: files.CertFile, KeyFile: files.KeyFile, CAFile: files.CAFile}
		g.cfgs[p.ID] = cfg
	}
	t.Cleanup(g.closeAll)
	return g
}

func (g *testGroup) ids() []string {
	var ids []string
	for _, p := range g.peers {
		ids = append(ids, p.ID)
	}
	return ids
}

// start opens replica id from its configuration and data directory.
func (g *testGroup) start(id string) *Node {
	g.t.Helper()
	reg := prometheus.NewRegistry()
	n, err := Open(g.cfgs[id], g.log, reg)
	require.NoError(g.t, err, "open %s", id)
	g.mu.Lock()
	g.nodes[id], g.regs[id] = n, reg
	g.mu.Unlock()
	return n
}

func (g *testGroup) startAll() {
	for _, id := range g.ids() {
		g.start(id)
	}
}

// stop shuts replica id down abruptly: no leave, no leadership transfer.
func (g *testGroup) stop(id string) {
	g.t.Helper()
	g.mu.Lock()
	n := g.nodes[id]
	delete(g.nodes, id)
	g.mu.Unlock()
	if n != nil {
		require.NoError(g.t, n.Close())
	}
}

func (g *testGroup) closeAll() {
	for _, id := range g.ids() {
		g.mu.Lock()
		n := g.nodes[id]
		delete(g.nodes, id)
		g.mu.Unlock()
		if n != nil {
			n.Close()
		}
	}
}

func (g *testGroup) node(id string) *Node {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.nodes[id]
}

func (g *testGroup) running(except ...string) []*Node {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []*Node
	for _, id := range g.ids() {
		skip := false
		for _, e := range except {
			skip = skip || e == id
		}
		if n := g.nodes[id]; n != nil && !skip {
			out = append(out, n)
		}
	}
	return out
}

// waitLeader waits until one of nodes has established leadership and every
// one of nodes names it as leader. It returns the leader and its leadership.
func waitLeader(t *testing.T, nodes []*Node, within time.Duration) (*Node, Leadership) {
	t.Helper()
	var leader *Node
	var lead Leadership
	require.Eventually(t, func() bool {
		leader = nil
		for _, n := range nodes {
			if l, _ := n.Leadership(); l.Leader {
				leader, lead = n, l
			}
		}
		if leader == nil {
			return false
		}
		for _, n := range nodes {
			if li, ok := n.Leader(); !ok || li.ID != leader.ID() {
				return false
			}
		}
		return true
	}, within, 10*time.Millisecond, "no leader agreed on by %d replicas", len(nodes))
	return leader, lead
}

// note is a command that records an operator note with a recognisable reason.
func note(l Leadership, reason string) ledger.Command {
	return &ledger.OperatorNote{Meta: l.Meta(), Operator: "test", Action: "note", Reason: reason}
}

// applyNotes applies count notes "prefix-i" on the leader.
func applyNotes(t *testing.T, leader *Node, l Leadership, prefix string, count int) uint64 {
	t.Helper()
	var index uint64
	for i := range count {
		var err error
		index, err = leader.Apply(l.Ctx, note(l, fmt.Sprintf("%s-%d", prefix, i)))
		require.NoError(t, err)
	}
	return index
}

func dump(t *testing.T, n *Node) string {
	t.Helper()
	b, err := n.Ledger().Dump()
	require.NoError(t, err)
	return string(b)
}

// waitSameLedger waits until every node has applied index and all dumps are equal.
func waitSameLedger(t *testing.T, nodes []*Node, index uint64) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	for _, n := range nodes {
		require.NoError(t, n.WaitApplied(ctx, index), "replica %s", n.ID())
	}
	var want string
	require.Eventually(t, func() bool {
		want = dump(t, nodes[0])
		for _, n := range nodes[1:] {
			if dump(t, n) != want {
				return false
			}
		}
		return true
	}, waitLong, 20*time.Millisecond, "ledgers differ")
	return want
}

func hasNote(s *ledger.State, reason string) bool {
	for _, a := range s.Actions {
		if a.Reason == reason {
			return true
		}
	}
	return false
}

func planFor(array, node string) arrayclients.Plan {
	id := arrayclients.Identity{Array: array, Family: arrayclients.PowerFlex, Node: node, ObjectID: "sdc-" + node,
		Keys: []string{"guid-" + node}, ResolvedAt: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)}
	return arrayclients.Plan{Array: array, Family: arrayclients.PowerFlex, Identity: id,
		Entries: []byte(`[{"volume":"v1","accessMode":"ReadWrite","limits":{"iops":0}}]`), Summary: "unmap 1 volume",
		CreatedAt: id.ResolvedAt}
}
