package cluster

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/cluster/ledger"
)

// versionServers serve each replica's LedgerVersionsHandler on its HTTP
// address; a replica marked old answers 404, as a build from before ledger
// versions does.
type versionServers struct {
	mu  sync.Mutex
	old map[string]bool
}

func (v *versionServers) setOld(id string, old bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.old[id] = old
}

func serveVersions(t *testing.T, g *testGroup) *versionServers {
	vs := &versionServers{old: map[string]bool{}}
	for _, p := range g.peers {
		addr := strings.TrimPrefix(p.HTTPAddr, "http://")
		ln, err := net.Listen("tcp", addr)
		require.NoError(t, err)
		id := p.ID
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			vs.mu.Lock()
			old := vs.old[id]
			vs.mu.Unlock()
			n := g.node(id)
			if old || n == nil || r.URL.Path != LedgerVersionsPath {
				http.NotFound(w, r)
				return
			}
			n.LedgerVersionsHandler().ServeHTTP(w, r)
		}), ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		t.Cleanup(func() { srv.Close() })
	}
	return vs
}

// TestGroupLedgerVersionNegotiated: with a voter that advertises no ledger
// versions (a build before them), the group stays at version 2, commands
// are written in it and one of version 3 is refused on the write path; once
// that voter advertises this build's versions the leader commits the group
// version (ledger.Version) and every replica holds it, with identical
// ledgers.
func TestGroupLedgerVersionNegotiated(t *testing.T) {
	g := newGroup(t, 3)
	for id, cfg := range g.cfgs {
		cfg.Timings.ReconcileInterval = 100 * time.Millisecond
		g.cfgs[id] = cfg
	}
	vs := serveVersions(t, g)
	g.startAll()
	// The old voter is a follower: a leader applies its own version. No
	// probe yet, so nothing is negotiated before it is chosen.
	leader, l := waitLeader(t, g.running(), waitLong)
	var old string
	for _, id := range []string{"r1", "r2", "r3"} {
		if id != leader.cfg.ID {
			old = id
		}
	}
	vs.setOld(old, true)
	probe := HTTPVersionProbe(&http.Client{Timeout: 5 * time.Second})
	for _, n := range g.running() {
		n.SetVersionProbe(probe)
	}
	require.Eventually(t, func() bool { return len(leader.Status().VoterLedgerVersions) == 3 }, waitLong, 10*time.Millisecond)
	st := leader.Status()
	v := ledger.Version
	want := map[string]int{"r1": v, "r2": v, "r3": v}
	want[old] = 2
	assert.Equal(t, want, st.VoterLedgerVersions)
	assert.Equal(t, 2, st.GroupLedgerVersion)
	assert.Equal(t, fmt.Sprintf("1..%d", v), st.LedgerVersions)
	assert.Equal(t, 2, l.Meta().V)

	m := l.Meta()
	m.V = 3
	_, err := leader.Apply(l.Ctx, &ledger.OperatorNote{Meta: m, Operator: "test", Action: "note", Reason: "too new"})
	require.ErrorIs(t, err, ErrLedgerVersion)
	index := applyNotes(t, leader, l, "at-v2", 3)
	waitSameLedger(t, g.running(), index)

	vs.setOld(old, false) // upgraded
	require.Eventually(t, func() bool {
		for _, n := range g.running() {
			if n.Status().GroupLedgerVersion != v {
				return false
			}
		}
		return true
	}, waitLong, 10*time.Millisecond, "the group ledger version never reached %d", v)
	assert.Equal(t, v, l.Meta().V)
	index = applyNotes(t, leader, l, "at-new", 3)
	same := waitSameLedger(t, g.running(), index)
	assert.Contains(t, same, fmt.Sprintf(`"ledgerVersion": %d`, v))
}

// TestLedgerHaltsOnEntryItCannotApply: an entry of a ledger version no
// replica applies halts every ledger; none applies anything after it, none
// establishes a leadership, and each says so in its status.
func TestLedgerHaltsOnEntryItCannotApply(t *testing.T) {
	g := newGroup(t, 3)
	g.startAll()
	leader, l := waitLeader(t, g.running(), waitLong)
	index := applyNotes(t, leader, l, "before", 2)
	waitSameLedger(t, g.running(), index)

	m := l.Meta()
	body, err := json.Marshal(&ledger.OperatorNote{Meta: m, Operator: "test", Action: "note", Reason: "from the future"})
	require.NoError(t, err)
	newer := ledger.Version + 1
	body = []byte(strings.Replace(string(body), `"v":2`, fmt.Sprintf(`"v":%d`, newer), 1))
	f := leader.raft.Apply(append([]byte{byte(ledger.TypeOperatorNote)}, body...), waitLong)
	require.NoError(t, f.Error())
	require.ErrorIs(t, f.Response().(error), ledger.ErrHalted)

	require.Eventually(t, func() bool {
		for _, n := range g.running() {
			if n.Status().LedgerHalted == "" {
				return false
			}
		}
		return true
	}, waitLong, 10*time.Millisecond, "every replica halts")
	for _, n := range g.running() {
		h := n.Ledger().Halted()
		require.NotNil(t, h)
		assert.Equal(t, f.Index(), h.Index, n.ID())
		assert.Equal(t, newer, h.V)
		assert.Contains(t, n.Status().LedgerHalted, fmt.Sprintf("applies ledger versions 1..%d", ledger.Version))
		assert.Equal(t, index, n.Ledger().AppliedIndex(), "%s applied nothing after the halt", n.ID())
	}
	// The leader hands over; whoever Raft elects next does not establish.
	require.Eventually(t, func() bool {
		for _, n := range g.running() {
			if ld, _ := n.Leadership(); ld.Leader {
				return false
			}
		}
		return leader.raft.State() != raft.Leader || leader.Status().LedgerHalted != ""
	}, waitLong, 10*time.Millisecond)
	_, err = leader.Apply(t.Context(), note(l, "after"))
	require.Error(t, err)
}

// TestNewLeaderWaitsOutThePreviousLeadersArrayTimeout: the replicas'
// array timeouts differ (their configurations are their own). Every
// replica learns the others' from what they advertise, so when the leader
// with the longest timeout dies, the next leader's wait-out uses it, not
// its own shorter one.
func TestNewLeaderWaitsOutThePreviousLeadersArrayTimeout(t *testing.T) {
	g := newGroup(t, 3)
	for id, cfg := range g.cfgs {
		cfg.Timings.ReconcileInterval = 100 * time.Millisecond
		g.cfgs[id] = cfg
	}
	serveVersions(t, g)
	timeouts := map[string]time.Duration{"r1": 90 * time.Second, "r2": 30 * time.Second, "r3": 20 * time.Second}
	g.startAll()
	probe := HTTPVersionProbe(&http.Client{Timeout: 5 * time.Second})
	for _, n := range g.running() {
		n.SetArrayTimeout(timeouts[n.cfg.ID])
		n.SetVersionProbe(probe)
	}
	// Every replica, follower or leader, learns the others' timeouts.
	require.Eventually(t, func() bool {
		for _, n := range g.running() {
			want := 20 * time.Second
			for id, d := range timeouts {
				if id != n.cfg.ID {
					want = max(want, d)
				}
			}
			if n.peerArrayTimeout() != want {
				return false
			}
		}
		return true
	}, waitLong, 10*time.Millisecond)

	leader, _ := waitLeader(t, g.running(), waitLong)
	first := leader.cfg.ID
	g.stop(first)
	_, l := waitLeader(t, g.running(first), waitLong)
	assert.GreaterOrEqual(t, l.PeerArrayTimeout, timeouts[first], "the dead leader's timeout is waited out")
	assert.Equal(t, l.Since.Add(l.lease+max(timeouts[l.Replica], l.PeerArrayTimeout)), l.SafeAt(timeouts[l.Replica]))
	assert.Equal(t, l.Since.Add(l.lease), l.SafeAt(0), "SafeAt(0) is the lease alone")
}
