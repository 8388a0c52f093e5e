package cluster

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/cluster/clustertest"
	"github.com/fenced-project/fenced/cluster/transport"
)

// TestForeignCertificateCannotJoin invites a fourth replica whose certificate
// comes from another CA. It is listed as a peer everywhere, so the leader adds
// it as a voter and it campaigns, yet it receives no entry and disturbs
// nothing; a hand-made transport with its certificate cannot send entries
// either. Removing it from the peers removes the voter.
func TestForeignCertificateCannotJoin(t *testing.T) {
	g := newGroup(t, 3)
	g.startAll()
	leader, l := waitLeader(t, g.running(), waitLong)
	index := applyNotes(t, leader, l, "members", 2)
	waitSameLedger(t, g.running(), index)

	foreign, err := clustertest.NewCA("foreign CA")
	require.NoError(t, err)
	files, err := foreign.WriteFiles(g.dir, "r4")
	require.NoError(t, err)
	addr, err := clustertest.FreeAddr()
	require.NoError(t, err)
	intruder := Peer{ID: "r4", RaftAddr: addr, HTTPAddr: "http://127.0.0.1:1"}
	withIntruder := append(append([]Peer(nil), g.peers...), intruder)

	cfg := g.cfgs["r1"]
	cfg.ID, cfg.DataDir, cfg.BindAddr, cfg.Peers = "r4", filepath.Join(g.dir, "r4"), addr, withIntruder
	cfg.TLS = TLSConfig{CertFile: files.CertFile, KeyFile: files.KeyFile, CAFile: files.CAFile}
	r4, err := Open(cfg, g.log, nil)
	require.NoError(t, err)
	defer r4.Close()

	for _, n := range g.running() {
		require.NoError(t, n.SetPeers(withIntruder))
	}
	// The leader makes r4 a voter (4 voters, quorum 3) but cannot reach it.
	require.Eventually(t, func() bool {
		for _, p := range leader.Status().Peers {
			if p.ID == "r4" {
				return p.Suffrage == "voter" && p.Reachable != nil && !*p.Reachable
			}
		}
		return false
	}, waitLong, 20*time.Millisecond, "r4 should be a voter the leader cannot reach")

	// r4 campaigns; every attempt is refused during the TLS handshake.
	require.Eventually(t, func() bool {
		for _, n := range g.running() {
			if n.metrics != nil && counterValue(n.metrics.tlsRejected) > 0 {
				return true
			}
		}
		return false
	}, waitLong, 20*time.Millisecond, "no handshake of r4 was refused")
	require.Eventually(t, func() bool { return counterValue(r4.metrics.tlsRejected) > 0 }, waitLong, 20*time.Millisecond,
		"r4 should refuse the leader's connections too")

	// The group goes on committing with the same leader; r4 learns nothing.
	index = applyNotes(t, leader, l, "after-intruder", 3)
	waitSameLedger(t, g.running(), index)
	lead, _ := leader.Leadership()
	assert.True(t, lead.Leader)
	assert.Equal(t, l.Term, lead.Term, "r4's campaigns did not disturb the leader")
	assert.Zero(t, r4.Ledger().AppliedIndex(), "r4 received no entry")
	assert.NotEqual(t, "leader", r4.Status().State)

	// A transport with the foreign certificate cannot send entries directly.
	sendForeignAppendEntries(t, files, g.peers[0], leader)

	// Dropping r4 from the peers removes it from the group.
	for _, n := range g.running() {
		require.NoError(t, n.SetPeers(g.peers))
	}
	require.Eventually(t, func() bool {
		for _, p := range leader.Status().Peers {
			if p.ID == "r4" {
				return false
			}
		}
		return true
	}, waitLong, 20*time.Millisecond, "r4 should be removed")
}

func sendForeignAppendEntries(t *testing.T, files clustertest.Files, target Peer, leader *Node) {
	// Trust the group's CA so that only the group's check of our
	// certificate can fail.
	cert, err := tls.LoadX509KeyPair(files.CertFile, files.KeyFile)
	require.NoError(t, err)
	caPEM, err := os.ReadFile(leader.cfg.TLS.CAFile)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(caPEM))
	creds := transport.NewCredentials(cert, pool, "")
	stream, err := transport.Listen("127.0.0.1:0", "", creds, transport.Options{Logger: newTestLogger(t), AnyPeer: true})
	require.NoError(t, err)
	trans := raft.NewNetworkTransport(stream, 1, 2*time.Second, nil)
	defer trans.Close()

	term := leader.raft.CurrentTerm()
	before := leader.raft.LastIndex()
	var resp raft.AppendEntriesResponse
	err = trans.AppendEntries(raft.ServerID(target.ID), raft.ServerAddress(target.RaftAddr), &raft.AppendEntriesRequest{
		RPCHeader: raft.RPCHeader{ID: []byte("r4"), Addr: []byte(stream.Addr().String())},
		Term:      term + 100,
		Entries:   []*raft.Log{{Index: before + 1, Term: term + 100, Type: raft.LogCommand, Data: []byte("intruder")}},
	}, &resp)
	require.Error(t, err, "the foreign transport must not get an answer")
	assert.Equal(t, term, leader.raft.CurrentTerm(), "the term did not move")
	assert.False(t, resp.Success)
}

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return 0
	}
	return m.GetCounter().GetValue()
}
