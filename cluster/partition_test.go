package cluster

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// faultNet routes every replica-to-replica connection through its own
// toxiproxy proxy (one per ordered pair), so a replica can be cut off from
// the others in both directions.
type faultNet struct {
	server  *toxiproxy.ApiServer
	proxies map[string]*toxiproxy.Proxy // "from>to"
	byAddr  map[string]string           // raft address -> replica ID
}

func newFaultNet(t *testing.T, g *testGroup) *faultNet {
	fn := &faultNet{
		server:  toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop()),
		proxies: map[string]*toxiproxy.Proxy{},
		byAddr:  map[string]string{},
	}
	for _, to := range g.peers {
		fn.byAddr[to.RaftAddr] = to.ID
		for _, from := range g.peers {
			if from.ID == to.ID {
				continue
			}
			name := from.ID + ">" + to.ID
			p := toxiproxy.NewProxy(fn.server, name, "127.0.0.1:0", to.RaftAddr)
			require.NoError(t, fn.server.Collection.Add(p, true))
			fn.proxies[name] = p
		}
	}
	t.Cleanup(func() { assert.NoError(t, fn.server.Collection.Clear()) })
	for id, cfg := range g.cfgs {
		from := id
		cfg.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			if to, ok := fn.byAddr[addr]; ok {
				addr = fn.proxies[from+">"+to].Listen
			}
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}
		g.cfgs[id] = cfg
	}
	return fn
}

// isolate black-holes all traffic between id and every other replica: bytes
// are dropped, connections stay open, as in a real partition.
func (fn *faultNet) isolate(t *testing.T, id string) {
	for name, p := range fn.proxies {
		if !strings.HasPrefix(name, id+">") && !strings.HasSuffix(name, ">"+id) {
			continue
		}
		for _, stream := range []string{"upstream", "downstream"} {
			_, err := p.Toxics.AddToxicJson(strings.NewReader(fmt.Sprintf(
				`{"name":"partition-%s","type":"timeout","stream":%q,"toxicity":1,"attributes":{"timeout":0}}`, stream, stream)))
			require.NoError(t, err, name)
		}
	}
}

// heal removes every partition.
func (fn *faultNet) heal(t *testing.T) {
	for _, p := range fn.proxies {
		for _, stream := range []string{"upstream", "downstream"} {
			_ = p.Toxics.RemoveToxic(context.Background(), "partition-"+stream)
		}
	}
}

func TestMinorityPartition(t *testing.T) {
	g := newGroup(t, 3)
	fn := newFaultNet(t, g)
	g.startAll()
	oldLeader, oldLead := waitLeader(t, g.running(), waitLong)
	index := applyNotes(t, oldLeader, oldLead, "healthy", 3)
	waitSameLedger(t, g.running(), index)

	// Cut the leader off: it is the minority of one.
	start := time.Now()
	fn.isolate(t, oldLeader.ID())

	// The minority cannot commit: its write fails instead of succeeding.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := oldLeader.Apply(ctx, note(oldLead, "minority-write"))
	require.Error(t, err, "a leader without quorum must not commit")
	t.Logf("minority write failed after %s: %v", time.Since(start), err)

	// It steps down and its leadership context is cancelled.
	require.Eventually(t, func() bool { return !oldLeader.IsLeader() }, waitLong, 10*time.Millisecond)
	select {
	case <-oldLead.Ctx.Done():
	case <-time.After(waitLong):
		t.Fatal("old leadership context not cancelled")
	}
	require.ErrorIs(t, oldLeader.VerifyLeader(context.Background()), ErrNotLeader)

	// The majority elects a new leader and commits.
	majority := g.running(oldLeader.ID())
	newLeader, newLead := waitLeader(t, majority, waitLong)
	t.Logf("majority elected %s (term %d) %s after the partition", newLeader.ID(), newLead.Term, time.Since(start))
	index = applyNotes(t, newLeader, newLead, "majority", 3)
	waitSameLedger(t, majority, index)
	assert.False(t, hasNote(oldLeader.Ledger().Copy(), "majority-0"), "the minority saw nothing of the majority's writes")

	// After healing there is one history: the majority's.
	fn.heal(t)
	index = applyNotes(t, newLeader, newLead, "healed", 1)
	final := waitSameLedger(t, g.running(), index)
	assert.Contains(t, final, "majority-2")
	assert.NotContains(t, final, "minority-write")
	assert.NotEqual(t, "leader", oldLeader.Status().State)
	s := oldLeader.Ledger().Copy()
	assert.True(t, hasNote(s, "healthy-0") && hasNote(s, "majority-0") && hasNote(s, "healed-0"))
}
