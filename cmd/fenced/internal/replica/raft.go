package replica

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/fenced-project/fenced/cluster"
	"github.com/fenced-project/fenced/cluster/ledger"
	"github.com/fenced-project/fenced/cmd/fenced/internal/daemon"
	"github.com/fenced-project/fenced/cmd/fenced/status"
	"github.com/fenced-project/fenced/configs"
)

// RaftConfig maps the replica's configuration onto the Raft group's. The
// configuration lists the other peers; the group's peer list includes this
// replica.
func RaftConfig(cfg *configs.Config, credDir string) (cluster.Config, error) {
	rc := cluster.DefaultConfig()
	r := cfg.Replica
	rc.ID = r.ID
	rc.DataDir = r.DataDir
	rc.BindAddr = r.RaftBindAddress
	rc.AdvertiseAddr = r.RaftAdvertiseAddress
	if rc.AdvertiseAddr == "" {
		rc.AdvertiseAddr = r.RaftBindAddress
	}
	rc.HTTPAdvertise = httpAdvertise(cfg.HTTP)
	rc.JoinExisting = r.JoinExisting
	rc.Peers = []cluster.Peer{{ID: r.ID, RaftAddr: rc.AdvertiseAddr, HTTPAddr: rc.HTTPAdvertise}}
	for _, p := range cfg.Peers {
		rc.Peers = append(rc.Peers, cluster.Peer{ID: p.ID, RaftAddr: p.RaftAddress, HTTPAddr: p.HTTPAddress})
	}
	if r.TLS.Enabled() {
		for _, f := range []struct {
			field, ref string
			dst        *string
		}{
			{"replica.tls.certFile", r.TLS.CertFile, &rc.TLS.CertFile},
			{"replica.tls.keyFile", r.TLS.KeyFile, &rc.TLS.KeyFile},
			{"replica.tls.caFile", r.TLS.CAFile, &rc.TLS.CAFile},
		} {
			path, err := configs.ResolveFile(f.ref, credDir)
			if err != nil {
				return rc, fmt.Errorf("%s: %w", f.field, err)
			}
			*f.dst = path
		}
	}
	t := &rc.Timings
	set := func(dst *time.Duration, v time.Duration) {
		if v > 0 {
			*dst = v
		}
	}
	set(&t.HeartbeatTimeout, cfg.Raft.HeartbeatTimeout)
	set(&t.ElectionTimeout, cfg.Raft.ElectionTimeout)
	set(&t.LeaderLeaseTimeout, cfg.Raft.LeaderLeaseTimeout)
	set(&t.CommitTimeout, cfg.Raft.CommitTimeout)
	set(&t.SnapshotInterval, cfg.Raft.SnapshotInterval)
	set(&t.StorageFullHandover, cfg.Raft.StorageFullHandover)
	if cfg.Raft.SnapshotThreshold > 0 {
		t.SnapshotThreshold = cfg.Raft.SnapshotThreshold
	}
	return rc, rc.Validate()
}

// httpAdvertise is the URL peers forward mutating calls to.
func httpAdvertise(h configs.HTTP) string {
	if h.AdvertiseURL != "" {
		return h.AdvertiseURL
	}
	if h.TLS.Enabled() {
		return "https://" + h.Listen
	}
	return "http://" + h.Listen
}

// wireRaft opens this replica of the Raft group and plugs it into the
// daemon: its metrics, a readiness check (a leader is known), the Raft
// section of /status, and a component that closes it when the daemon stops,
// after users.Wait: the components that use the group stop first.
func wireRaft(d *daemon.Daemon, users *stopOrder) (*cluster.Node, error) {
	rc, err := RaftConfig(d.Config(), d.CredentialsDir())
	if err != nil {
		return nil, fmt.Errorf("raft: %w", err)
	}
	node, err := cluster.Open(rc, d.Logger().With("component", "raft"), d.Registry())
	if err != nil {
		return nil, err
	}
	d.AddReadinessCheck("raft", func(context.Context) error {
		if _, ok := node.Leader(); !ok {
			return cluster.ErrNoLeader
		}
		return nil
	})
	d.AddReadinessCheck("raft-storage", func(context.Context) error { return node.StorageFull() })
	d.AddReadinessCheck("ledger", func(context.Context) error {
		if h := node.Ledger().Halted(); h != nil {
			return fmt.Errorf("%w: %s", ledger.ErrHalted, h)
		}
		return nil
	})
	// Advertised with the ledger versions: a leader elected after this one
	// waits out this replica's array requests for the longest of them.
	var arrayTimeout time.Duration
	for _, a := range d.Config().Arrays {
		arrayTimeout = max(arrayTimeout, a.RequestTimeout)
	}
	node.SetArrayTimeout(arrayTimeout)
	if err := wireLedgerVersions(d, node); err != nil {
		node.Close()
		return nil, err
	}
	d.AddStatusProvider(func(_ context.Context, st *status.Status) {
		st.Raft = raftStatus(node)
	})
	if err := d.AddComponent("raft", func(ctx context.Context) error {
		<-ctx.Done()
		users.Wait(raftStopWait)
		return node.Close()
	}); err != nil {
		node.Close()
		return nil, err
	}
	return node, nil
}

// raftStatus fills the /status Raft section.
func raftStatus(node *cluster.Node) *status.Raft {
	s := node.Status()
	r := &status.Raft{
		State:           title(s.State),
		Term:            s.Term,
		LastContact:     s.LastContact,
		CommitIndex:     s.CommitIndex,
		AppliedIndex:    s.AppliedIndex,
		LastLogIndex:    s.LastLogIndex,
		StorageFull:     s.StorageFull,
		StorageHandover: s.StorageHandover,

		LedgerVersions:      s.LedgerVersions,
		GroupLedgerVersion:  s.GroupLedgerVersion,
		VoterLedgerVersions: s.VoterLedgerVersions,
		LedgerHalted:        s.LedgerHalted,
	}
	if s.Leader != nil {
		r.LeaderID, r.LeaderAddress = s.Leader.ID, s.Leader.RaftAddr
	}
	for _, p := range s.Peers {
		r.Members = append(r.Members, status.RaftMember{ID: p.ID, Address: p.RaftAddr, HTTPAddress: p.HTTPAddr,
			Suffrage: title(p.Suffrage), Self: p.Self, Reachable: p.Reachable, LastContact: p.LastContact})
	}
	node.Ledger().Read(func(l *ledger.State) {
		r.Pauses = statusPauses(l.Holders())
	})
	for i, p := range r.Pauses {
		if p.Scope == status.PauseScopeAll && r.Pause == nil {
			r.FencingPaused, r.Pause = true, &r.Pauses[i]
		}
	}
	return r
}

// statusPauses converts the ledger's pauses in effect for /status.
func statusPauses(hs []ledger.PauseHolder) []status.Pause {
	var out []status.Pause
	for _, h := range hs {
		scope := h.Cluster
		if scope == "" {
			scope = status.PauseScopeAll
		}
		out = append(out, status.Pause{ID: h.ID, Scope: scope, Operator: h.Operator, Reason: h.Reason, At: h.At.UTC()})
	}
	return out
}

func title(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// wireLedgerVersions serves this replica's ledger versions to the leader
// (a replica's certificate, or the API token from loopback without TLS)
// and lets the leader ask the voters for theirs.
func wireLedgerVersions(d *daemon.Daemon, node *cluster.Node) error {
	cfg := d.Config()
	d.Handle(http.MethodGet+" "+cluster.LedgerVersionsPath, vantageAuth(d.Authenticator(), node.LedgerVersionsHandler()))
	if len(cfg.Peers) == 0 {
		node.SetVersionProbe(func(context.Context, cluster.Peer) (cluster.LedgerVersions, error) {
			return cluster.LedgerVersions{}, errors.New("no peers configured")
		})
		return nil
	}
	client, err := forwardClient(cfg, d.CredentialsDir())
	if err != nil {
		return fmt.Errorf("client for the voters' ledger versions: %w", err)
	}
	if cfg.HTTP.TokenFile != "" {
		p, err := configs.ResolveFile(cfg.HTTP.TokenFile, d.CredentialsDir())
		if err != nil {
			return fmt.Errorf("http.tokenFile: %w", err)
		}
		tok, err := configs.ReadSecretFile(p)
		if err != nil {
			return fmt.Errorf("http.tokenFile: %w", err)
		}
		client.Transport = bearer{token: tok, next: client.Transport}
	}
	node.SetVersionProbe(cluster.HTTPVersionProbe(client))
	return nil
}

// bearer adds the API token to requests sent without a client
// certificate's TLS (http:// peers on loopback).
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Scheme != "http" {
		return b.next.RoundTrip(r)
	}
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}
