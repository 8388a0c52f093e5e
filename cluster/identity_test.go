package cluster

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/cluster/clustertest"
	"github.com/fenced-project/fenced/cluster/ledger"
	"github.com/fenced-project/fenced/cluster/transport"
)

// TestCertificateMustNameItsPeer uses certificates from the group's own CA
// against a follower: one that names no replica (an operator's) and one
// that names replica X but claims to be the leader. Neither opens a stream
// that carries a Raft message: a forged AppendEntries with a higher term and
// a SetPause entry, and a RequestVote, are refused; the follower's term, log
// and ledger do not move, and each refusal is counted.
func TestCertificateMustNameItsPeer(t *testing.T) {
	g := newGroup(t, 3)
	g.startAll()
	leader, l := waitLeader(t, g.running(), waitLong)
	index := applyNotes(t, leader, l, "before", 2)
	waitSameLedger(t, g.running(), index)

	var followers []*Node
	for _, n := range g.running() {
		if n.ID() != leader.ID() {
			followers = append(followers, n)
		}
	}
	target, other := followers[0], followers[1]
	targetPeer, _ := target.peer(target.ID())

	forged, err := ledger.Encode(&ledger.SetPause{Meta: l.Meta(), Paused: true, Operator: "operator-alice", Reason: "forged"})
	require.NoError(t, err)

	cases := []struct {
		name string
		cert string // the name the certificate is issued for
	}{
		{name: "certificate naming no peer", cert: "operator-alice"},
		{name: "certificate naming another peer than it claims", cert: other.ID()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			leaf, err := g.ca.Issue(tc.cert, net.IPv4(127, 0, 0, 1))
			require.NoError(t, err)
			cert, err := leaf.TLSCertificate()
			require.NoError(t, err)
			pool := x509.NewCertPool()
			pool.AddCert(g.ca.Cert)
			creds := transport.NewCredentials(cert, pool, "")
			stream, err := transport.Listen("127.0.0.1:0", "", creds, transport.Options{Logger: newTestLogger(t), AnyPeer: true})
			require.NoError(t, err)
			trans := raft.NewNetworkTransport(stream, 1, 2*time.Second, nil)
			defer trans.Close()

			rejected := counterValue(target.metrics.tlsRejected)
			term := target.raft.CurrentTerm()
			last := target.raft.LastIndex()
			claim := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(leader.ID()), Addr: []byte(leader.cfg.AdvertiseAddr)}

			var aresp raft.AppendEntriesResponse
			err = trans.AppendEntries(raft.ServerID(target.ID()), raft.ServerAddress(targetPeer.RaftAddr), &raft.AppendEntriesRequest{
				RPCHeader: claim, Term: term + 100, PrevLogEntry: last, PrevLogTerm: term,
				Entries:           []*raft.Log{{Index: last + 1, Term: term + 100, Type: raft.LogCommand, Data: forged}},
				LeaderCommitIndex: last + 1,
			}, &aresp)
			require.Error(t, err, "a forged AppendEntries must get no answer")
			assert.False(t, aresp.Success)

			var vresp raft.RequestVoteResponse
			err = trans.RequestVote(raft.ServerID(target.ID()), raft.ServerAddress(targetPeer.RaftAddr), &raft.RequestVoteRequest{
				RPCHeader: claim, Term: term + 200, LastLogIndex: last + 100, LastLogTerm: term + 100,
			}, &vresp)
			require.Error(t, err, "a forged RequestVote must get no answer")
			assert.False(t, vresp.Granted)

			require.Eventually(t, func() bool { return counterValue(target.metrics.tlsRejected) >= rejected+2 },
				waitLong, 10*time.Millisecond, "both attempts should be counted as refused")
			assert.Equal(t, term, target.raft.CurrentTerm(), "the follower's term did not move")
			target.Ledger().Read(func(s *ledger.State) { assert.False(t, s.Pause.Paused, "the forged pause was not applied") })
			lead, _ := leader.Leadership()
			assert.True(t, lead.Leader, "the leader kept its leadership")
			assert.Equal(t, l.Term, lead.Term)
		})
	}

	// The group goes on with the same leader and the same ledger everywhere.
	index = applyNotes(t, leader, l, "after", 2)
	waitSameLedger(t, g.running(), index)
	for _, n := range g.running() {
		n.Ledger().Read(func(s *ledger.State) { assert.False(t, s.Pause.Paused, "replica %s", n.ID()) })
	}
}

// TestDialedPeerMustBeNamed: a replica that dials a peer's Raft address and
// finds a certificate naming another replica (one taken from a second
// replica and served at the first one's address) does not talk to it.
func TestDialedPeerMustBeNamed(t *testing.T) {
	ca, err := clustertest.NewCA("fenced test CA")
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	issue := func(name string) tls.Certificate {
		leaf, err := ca.Issue(name, net.IPv4(127, 0, 0, 1))
		require.NoError(t, err)
		c, err := leaf.TLSCertificate()
		require.NoError(t, err)
		return c
	}
	// An impostor at r2's address with r3's certificate.
	impostor, err := transport.Listen("127.0.0.1:0", "", transport.NewCredentials(issue("r3"), pool, ""),
		transport.Options{Logger: newTestLogger(t), AnyPeer: true})
	require.NoError(t, err)
	defer impostor.Close()
	peers := []transport.Peer{{ID: "r1", Addr: "127.0.0.1:1"}, {ID: "r2", Addr: impostor.Addr().String()}, {ID: "r3", Addr: "127.0.0.1:3"}}
	r1, err := transport.Listen("127.0.0.1:0", "", transport.NewCredentials(issue("r1"), pool, ""),
		transport.Options{Logger: newTestLogger(t), Peers: func() []transport.Peer { return peers }})
	require.NoError(t, err)
	defer r1.Close()

	_, err = r1.Dial(raft.ServerAddress(impostor.Addr().String()), 2*time.Second)
	require.ErrorIs(t, err, transport.ErrNotAPeer)
	assert.ErrorContains(t, err, "does not name replica r2")
}
