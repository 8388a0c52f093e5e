package cluster

import (
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/cluster/clustertest"
	"github.com/fenced-project/fenced/cluster/ledger"
	"github.com/fenced-project/fenced/cluster/transport"
)

// distinctHosts are the loopback addresses of r1, r2 and r3 in the tests
// where each replica has a host of its own, as in production.
var distinctHosts = []string{"127.0.0.1", "127.0.0.2", "127.0.0.3"}

// freeAddrOn returns a free TCP address on host.
func freeAddrOn(t *testing.T, host string) string {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	require.NoError(t, err, "listen on %s (every 127.0.0.0/8 address is loopback on Linux)", host)
	defer l.Close()
	return l.Addr().String()
}

// newGroupOnHosts prepares replicas r1..rn, replica ri on hosts[i-1], each
// with a certificate for its ID (URI SAN fenced://replica/<id>) and its
// host's address.
func newGroupOnHosts(t *testing.T, hosts []string) *testGroup {
	ca, err := clustertest.NewCA("fenced test CA")
	require.NoError(t, err)
	g := &testGroup{t: t, ca: ca, dir: t.TempDir(), log: newTestLogger(t),
		cfgs: map[string]Config{}, nodes: map[string]*Node{}, regs: map[string]*prometheus.Registry{}}
	for i, h := range hosts {
		id := fmt.Sprintf("r%d", i+1)
		g.peers = append(g.peers, Peer{ID: id, RaftAddr: freeAddrOn(t, h), HTTPAddr: "http://" + freeAddrOn(t, h)})
	}
	for i, p := range g.peers {
		files, err := ca.WriteFilesFor(g.dir, p.ID, net.ParseIP(hosts[i]))
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

// dialFrom is a transport dialer whose connections come from host.
func dialFrom(host string) transport.DialFunc {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(host)}}
	return d.DialContext
}

// TestHostNamedCertificateIsNoReplica runs r1, r2 and r3 on 127.0.0.1, .2
// and .3, with real Raft over mutual TLS. Certificates from the group's own
// CA that name r1's host (its IP address, a common name or DNS name about
// it, even the ID r1 as common name and DNS name, as a host called r1
// would have) but not the URI SAN fenced://replica/r1, presented from r1's
// own address, cannot append an entry to r2 as r1 nor ask it for a vote:
// the handshake is refused, and r2's term, log and ledger do not move. A
// certificate naming r1 by its URI is r1 wherever it connects from (the ID
// is the identity, the address is not): its request is answered.
func TestHostNamedCertificateIsNoReplica(t *testing.T) {
	g := newGroupOnHosts(t, distinctHosts)
	g.startAll()
	leader, l := waitLeader(t, g.running(), waitLong)
	index := applyNotes(t, leader, l, "before", 2)
	waitSameLedger(t, g.running(), index)

	r1Peer, _ := leader.peer("r1")
	target := g.nodes["r2"]
	targetPeer, _ := target.peer("r2")
	forged, err := ledger.Encode(&ledger.SetPause{Meta: l.Meta(), Paused: true, Operator: "operator-alice", Reason: "forged"})
	require.NoError(t, err)
	claim := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("r1"), Addr: []byte(r1Peer.RaftAddr)}
	r1IP := net.ParseIP(distinctHosts[0])

	// attacker is a Raft transport with the certificate n that dials from
	// host.
	attacker := func(t *testing.T, n clustertest.Names, host string) *raft.NetworkTransport {
		leaf, err := g.ca.IssueNames(n)
		require.NoError(t, err)
		cert, err := leaf.TLSCertificate()
		require.NoError(t, err)
		pool := x509.NewCertPool()
		pool.AddCert(g.ca.Cert)
		stream, err := transport.Listen(net.JoinHostPort(host, "0"), "", transport.NewCredentials(cert, pool, ""),
			transport.Options{Logger: newTestLogger(t), AnyPeer: true, Dial: dialFrom(host)})
		require.NoError(t, err)
		trans := raft.NewNetworkTransport(stream, 1, 2*time.Second, nil)
		t.Cleanup(func() { _ = trans.Close() })
		return trans
	}

	cases := []struct {
		name  string
		names clustertest.Names
	}{
		{name: "a monitoring agent's certificate for r1's address",
			names: clustertest.Names{CommonName: "node-exporter-on-r1", IPs: []net.IP{r1IP}}},
		{name: "a certificate with r1's address as common name",
			names: clustertest.Names{CommonName: distinctHosts[0], DNSNames: []string{"r1.example.net"}, IPs: []net.IP{r1IP}}},
		{name: "the ID as common name and DNS name only",
			names: clustertest.Names{CommonName: "r1", DNSNames: []string{"r1"}, IPs: []net.IP{r1IP}}},
		{name: "a URI naming r1 otherwise",
			names: clustertest.Names{CommonName: "r1", IPs: []net.IP{r1IP}, URIs: []*url.URL{
				{Scheme: "spiffe", Host: "replica", Path: "/r1"}, {Scheme: "fenced", Host: "r1"}, {Scheme: "fenced", Host: "replica", Path: "/r1/x"}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			trans := attacker(t, tc.names, distinctHosts[0])
			rejected := counterValue(target.metrics.tlsRejected)
			term := target.raft.CurrentTerm()
			last := target.raft.LastIndex()

			var aresp raft.AppendEntriesResponse
			err := trans.AppendEntries("r2", raft.ServerAddress(targetPeer.RaftAddr), &raft.AppendEntriesRequest{
				RPCHeader: claim, Term: term + 100, PrevLogEntry: last, PrevLogTerm: term,
				Entries:           []*raft.Log{{Index: last + 1, Term: term + 100, Type: raft.LogCommand, Data: forged}},
				LeaderCommitIndex: last + 1,
			}, &aresp)
			require.Error(t, err, "an AppendEntries as r1 must get no answer")
			assert.False(t, aresp.Success)

			var vresp raft.RequestVoteResponse
			err = trans.RequestVote("r2", raft.ServerAddress(targetPeer.RaftAddr), &raft.RequestVoteRequest{
				RPCHeader: claim, Term: term + 200, LastLogIndex: last + 100, LastLogTerm: term + 100,
			}, &vresp)
			require.Error(t, err, "a RequestVote as r1 must get no answer")
			assert.False(t, vresp.Granted)

			require.Eventually(t, func() bool { return counterValue(target.metrics.tlsRejected) >= rejected+2 },
				waitLong, 10*time.Millisecond, "both attempts should be counted as refused")
			assert.Equal(t, term, target.raft.CurrentTerm(), "r2's term did not move")
			target.Ledger().Read(func(s *ledger.State) { assert.False(t, s.Pause.Paused, "the forged pause was not applied") })
		})
	}

	// r1's URI from another address (127.0.0.4, no replica's): it is r1.
	// A vote request of an old term is answered (and not granted), which
	// shows that the transport passed it to Raft as r1's.
	t.Run("the URI names r1 from any address", func(t *testing.T) {
		trans := attacker(t, clustertest.Names{CommonName: "elsewhere",
			URIs: []*url.URL{transport.ReplicaURI("r1")}}, "127.0.0.4")
		term := target.raft.CurrentTerm()
		var vresp raft.RequestVoteResponse
		require.NoError(t, trans.RequestVote("r2", raft.ServerAddress(targetPeer.RaftAddr), &raft.RequestVoteRequest{
			RPCHeader: claim, Term: term - 1,
		}, &vresp), "a certificate naming r1 by its URI is r1")
		assert.False(t, vresp.Granted)
		assert.Equal(t, term, vresp.Term)
	})

	// The group goes on with the same leader and the same ledger everywhere.
	index = applyNotes(t, leader, l, "after", 2)
	waitSameLedger(t, g.running(), index)
	lead, _ := leader.Leadership()
	assert.True(t, lead.Leader, "the leader kept its leadership")
	assert.Equal(t, l.Term, lead.Term)
	for _, n := range g.running() {
		n.Ledger().Read(func(s *ledger.State) { assert.False(t, s.Pause.Paused, "replica %s", n.ID()) })
	}
}

// TestDialedHostNamedCertificateIsNoReplica: r1 dials r2's Raft address
// (127.0.0.2) and finds a same-CA certificate valid for that address and
// with r2 as common name and DNS name, but without the URI SAN
// fenced://replica/r2. r1 does not talk to it, and the error says how to
// reissue the certificate.
func TestDialedHostNamedCertificateIsNoReplica(t *testing.T) {
	ca, err := clustertest.NewCA("fenced test CA")
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	listen := func(host string, n clustertest.Names, opts transport.Options) *transport.StreamLayer {
		leaf, err := ca.IssueNames(n)
		require.NoError(t, err)
		cert, err := leaf.TLSCertificate()
		require.NoError(t, err)
		opts.Logger = newTestLogger(t)
		s, err := transport.Listen(net.JoinHostPort(host, "0"), "", transport.NewCredentials(cert, pool, ""), opts)
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	r2IP := net.ParseIP(distinctHosts[1])
	impostor := listen(distinctHosts[1], clustertest.Names{CommonName: "r2", DNSNames: []string{"r2"}, IPs: []net.IP{r2IP}},
		transport.Options{AnyPeer: true})
	peers := []transport.Peer{
		{ID: "r1", Addr: net.JoinHostPort(distinctHosts[0], "1")},
		{ID: "r2", Addr: impostor.Addr().String()},
		{ID: "r3", Addr: net.JoinHostPort(distinctHosts[2], strconv.Itoa(1))},
	}
	r1 := listen(distinctHosts[0], clustertest.Names{CommonName: "r1", IPs: []net.IP{net.ParseIP(distinctHosts[0])},
		URIs: []*url.URL{transport.ReplicaURI("r1")}}, transport.Options{Peers: func() []transport.Peer { return peers }})

	_, err = r1.Dial(raft.ServerAddress(impostor.Addr().String()), 2*time.Second)
	require.ErrorIs(t, err, transport.ErrNotAPeer)
	require.ErrorContains(t, err, "does not name replica r2")
	require.ErrorContains(t, err, "fenced pki replica --from-cert")
}

// TestReplicaWithoutURICertificateDoesNotStart: a replica whose own
// certificate names it only by common name and DNS name (as certificates
// of earlier releases did) refuses to start, with an error naming the
// file and the command that reissues it, instead of joining a group whose
// every peer refuses it. Reissued with the URI, it starts and joins.
func TestReplicaWithoutURICertificateDoesNotStart(t *testing.T) {
	g := newGroupOnHosts(t, distinctHosts)
	g.start("r2")
	g.start("r3")
	leader, l := waitLeader(t, g.running(), waitLong)

	cfg := g.cfgs["r1"]
	legacy, err := g.ca.IssueNames(clustertest.Names{CommonName: "r1", DNSNames: []string{"r1"}, IPs: []net.IP{net.ParseIP(distinctHosts[0])}})
	require.NoError(t, err)
	files, err := g.ca.WriteLeaf(t.TempDir(), "r1", legacy)
	require.NoError(t, err)
	old := cfg
	old.TLS = TLSConfig{CertFile: files.CertFile, KeyFile: files.KeyFile, CAFile: files.CAFile}
	_, err = Open(old, g.log, nil)
	require.ErrorIs(t, err, transport.ErrNotAPeer)
	require.ErrorContains(t, err, files.CertFile, "the error names the file")
	require.ErrorContains(t, err, "fenced://replica/r1")
	require.ErrorContains(t, err, "fenced pki replica --from-cert")

	// With its certificate reissued (the same names and the URI), r1 joins.
	g.start("r1")
	index := applyNotes(t, leader, l, "joined", 2)
	waitSameLedger(t, g.running(), index)
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	require.NoError(t, g.nodes["r1"].WaitApplied(ctx, index))
}
