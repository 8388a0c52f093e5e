package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Config configures one replica of the Raft group. The daemon maps its YAML
// configuration into it; DefaultConfig gives the defaults.
type Config struct {
	// ID is this replica's stable, unique name (e.g. the host name). It must
	// be one of Peers.
	ID string
	// DataDir holds the Raft log and stable store (raft/raft.db) and the
	// snapshots (raft/snapshots). It must survive restarts.
	DataDir string
	// BindAddr is the host:port the Raft transport listens on.
	BindAddr string
	// AdvertiseAddr is the host:port peers dial to reach this replica; it
	// must be this replica's RaftAddr in Peers. Empty means BindAddr.
	AdvertiseAddr string
	// HTTPAdvertise is the base URL (or host:port) of this replica's HTTP
	// endpoint, where followers forward mutating calls. Empty means this
	// replica's HTTPAddr in Peers.
	HTTPAdvertise string
	// Peers lists every voter of the group, this replica included. All
	// replicas should list the same peers: the first start of a replica
	// without state bootstraps the group from this list, and the leader
	// adds and removes voters to match it.
	Peers []Peer
	// JoinExisting, when true, makes a replica without Raft state wait to be
	// added by the leader of a running group instead of bootstrapping one.
	// Set it when adding a replica to a group that already runs (for
	// example growing a single development replica to three): new replicas
	// that bootstrap from a peer list naming each other could elect a
	// leader of their own.
	JoinExisting bool
	// TLS names the PEM files for mutual TLS between replicas.
	TLS TLSConfig
	// Timings are the Raft and request timings.
	Timings Timings
	// Dial, when set, replaces the TCP dialer of the Raft transport (tests
	// route peer traffic through a fault proxy with it). It is not
	// configurable from files.
	Dial func(ctx context.Context, network, address string) (net.Conn, error)

	// wrapStore, when set, wraps the Raft store (tests inject faults
	// with it); storeRetry overrides how often a write held on a full disk
	// is retried.
	wrapStore  func(raftStore) raftStore
	storeRetry time.Duration
}

// Peer is one voter of the group.
type Peer struct {
	// ID is the peer's replica ID.
	ID string
	// RaftAddr is the host:port of the peer's Raft transport. Replicas dial
	// it by ID: a changed address takes effect without a membership change.
	RaftAddr string
	// HTTPAddr is the base URL ("https://host:port") or host:port of the
	// peer's HTTP endpoint; followers forward mutating calls there.
	HTTPAddr string
}

// TLSConfig names the PEM files of this replica's certificate and of the CA
// every peer's certificate must chain to. They are required when the group
// has more than one peer. A single replica without them runs on an in-memory
// transport and talks to nobody. Certificates are used as server and
// client certificates, so they need both extended key usages (or none) and
// the host of the peer's RaftAddr (or ServerName) among their names.
//
// A certificate must also name the replica it belongs to: its replica ID as
// the subject common name or a DNS name, or the host of its RaftAddr when no
// other peer has that host. Both ends of every Raft connection check this
// against Peers, and every Raft message must claim the replica its sender's
// certificate names; a certificate from the CA that names no peer (an
// operator's, a monitoring system's) cannot speak Raft.
type TLSConfig struct {
	CertFile string
	KeyFile  string
	CAFile   string
	// ServerName, when set, is the name every peer's certificate must hold,
	// instead of the host of the address dialed.
	ServerName string
}

func (t TLSConfig) enabled() bool {
	return t.CertFile != "" || t.KeyFile != "" || t.CAFile != ""
}

// Timings are tuned for replicas on one management LAN. A follower notices a
// dead leader after HeartbeatTimeout to twice that, then an election takes
// roughly one more ElectionTimeout: a failover in about two to four seconds
// with the defaults.
type Timings struct {
	// HeartbeatTimeout is how long a follower waits without hearing from
	// the leader before it starts an election (default 1s).
	HeartbeatTimeout time.Duration
	// ElectionTimeout is how long a candidate waits for votes (default 1s).
	ElectionTimeout time.Duration
	// LeaderLeaseTimeout is how long a leader stays leader without hearing
	// from a quorum (default 500ms). It must not exceed HeartbeatTimeout.
	LeaderLeaseTimeout time.Duration
	// CommitTimeout is how often an idle leader sends each follower an
	// AppendEntries carrying the commit index (default 500ms). New entries
	// are sent at once whatever it is, so it does not delay a commit; it
	// bounds how late a follower learns of one (up to twice this, with
	// Raft's random stagger) when no further entry follows. Each idle
	// interval costs one RPC per follower: at 50ms, Raft's default, that
	// was most of an idle leader's Raft traffic.
	CommitTimeout time.Duration
	// LeaseMargin is added to LeaderLeaseTimeout when a new leader waits
	// out the previous one (see Leadership.SafeAt) to cover the lease
	// check's granularity and clock-rate differences (default 500ms).
	LeaseMargin time.Duration
	// ApplyTimeout bounds one Apply, VerifyLeader or Barrier when the
	// caller's context has no deadline (default 10s).
	ApplyTimeout time.Duration
	// ForwardWait is how long a follower waits for a leader before it
	// answers a forwarded call with 503 (default 5s).
	ForwardWait time.Duration
	// IOTimeout bounds Raft network operations (default 5s).
	IOTimeout time.Duration
	// HandshakeTimeout bounds the TLS handshake of an accepted Raft
	// connection (default 5s).
	HandshakeTimeout time.Duration
	// SnapshotInterval is how often Raft checks whether to snapshot
	// (default 2m); SnapshotThreshold how many new entries make it do so
	// (default 1024); TrailingLogs how many entries stay after a snapshot
	// (default 2048); SnapshotRetain how many snapshots stay on disk
	// (default 3). A replica further behind than TrailingLogs catches up
	// by snapshot.
	SnapshotInterval  time.Duration
	SnapshotThreshold uint64
	TrailingLogs      uint64
	SnapshotRetain    int
	// ReconcileInterval is how often the leader compares the voters with
	// Peers (default 30s); it also does so on gaining leadership and on
	// SetPeers.
	ReconcileInterval time.Duration
	// StorageFullHandover is how long a leader whose data directory is
	// full (its Raft writes held, see ErrStorageFull) keeps leadership
	// before it hands it to another replica (default 10s). Heartbeats
	// flow meanwhile, so without a handover no election happens and
	// nothing is fenced anywhere until space is freed. A replica whose
	// disk is full never stands for election.
	StorageFullHandover time.Duration
}

// DefaultConfig returns a Config with the default timings and no identity.
func DefaultConfig() Config {
	return Config{Timings: DefaultTimings()}
}

// DefaultTimings returns the default timings.
func DefaultTimings() Timings {
	return Timings{
		HeartbeatTimeout:   time.Second,
		ElectionTimeout:    time.Second,
		LeaderLeaseTimeout: 500 * time.Millisecond,
		CommitTimeout:      500 * time.Millisecond,
		LeaseMargin:        500 * time.Millisecond,
		ApplyTimeout:       10 * time.Second,
		ForwardWait:        5 * time.Second,
		IOTimeout:          5 * time.Second,
		HandshakeTimeout:   5 * time.Second,
		SnapshotInterval:   2 * time.Minute,
		SnapshotThreshold:  1024,
		TrailingLogs:       2048,
		SnapshotRetain:     3,
		ReconcileInterval:  30 * time.Second,

		StorageFullHandover: 10 * time.Second,
	}
}

// self returns this replica's entry in Peers.
func (c *Config) self() (Peer, bool) {
	for _, p := range c.Peers {
		if p.ID == c.ID {
			return p, true
		}
	}
	return Peer{}, false
}

// Validate checks the configuration and names the first bad field.
func (c *Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if c.ID == "" {
		bad("id", "is required")
	}
	if c.DataDir == "" {
		bad("dataDir", "is required")
	}
	if _, _, err := net.SplitHostPort(c.BindAddr); err != nil {
		bad("bindAddr", "%q is not host:port: %v", c.BindAddr, err)
	}
	if c.AdvertiseAddr != "" {
		if _, _, err := net.SplitHostPort(c.AdvertiseAddr); err != nil {
			bad("advertiseAddr", "%q is not host:port: %v", c.AdvertiseAddr, err)
		}
	}
	if c.HTTPAdvertise != "" {
		if _, err := httpBase(c.HTTPAdvertise); err != nil {
			bad("httpAdvertise", "%v", err)
		}
	}
	seen := map[string]bool{}
	addrs := map[string]string{}
	for i, p := range c.Peers {
		field := fmt.Sprintf("peers[%d]", i)
		if p.ID == "" {
			bad(field+".id", "is required")
		} else if seen[p.ID] {
			bad(field+".id", "%q is listed twice", p.ID)
		}
		seen[p.ID] = true
		if _, _, err := net.SplitHostPort(p.RaftAddr); err != nil {
			bad(field+".raftAddr", "%q is not host:port: %v", p.RaftAddr, err)
		} else if other, dup := addrs[p.RaftAddr]; dup {
			bad(field+".raftAddr", "%q is also the address of %q", p.RaftAddr, other)
		}
		addrs[p.RaftAddr] = p.ID
		if p.HTTPAddr != "" {
			if _, err := httpBase(p.HTTPAddr); err != nil {
				bad(field+".httpAddr", "%v", err)
			}
		}
	}
	if self, ok := c.self(); c.ID != "" && !ok {
		bad("peers", "this replica %q is not listed", c.ID)
	} else if ok && c.AdvertiseAddr != "" && self.RaftAddr != c.AdvertiseAddr {
		bad("advertiseAddr", "%q differs from this replica's raftAddr %q in peers", c.AdvertiseAddr, self.RaftAddr)
	}
	if c.TLS.enabled() || len(c.Peers) > 1 {
		for _, f := range []struct{ name, v string }{{"tls.certFile", c.TLS.CertFile}, {"tls.keyFile", c.TLS.KeyFile}, {"tls.caFile", c.TLS.CAFile}} {
			if f.v == "" {
				bad(f.name, "is required: replicas talk only over mutual TLS")
			}
		}
	}
	t := c.Timings
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"heartbeatTimeout", t.HeartbeatTimeout}, {"electionTimeout", t.ElectionTimeout},
		{"leaderLeaseTimeout", t.LeaderLeaseTimeout}, {"commitTimeout", t.CommitTimeout},
		{"applyTimeout", t.ApplyTimeout}, {"forwardWait", t.ForwardWait}, {"ioTimeout", t.IOTimeout},
		{"handshakeTimeout", t.HandshakeTimeout}, {"snapshotInterval", t.SnapshotInterval},
		{"reconcileInterval", t.ReconcileInterval}, {"storageFullHandover", t.StorageFullHandover}} {
		if d.v <= 0 {
			bad("timings."+d.name, "must be positive, is %s", d.v)
		}
	}
	if t.LeaseMargin < 0 {
		bad("timings.leaseMargin", "must not be negative, is %s", t.LeaseMargin)
	}
	if t.LeaderLeaseTimeout > t.HeartbeatTimeout {
		bad("timings.leaderLeaseTimeout", "%s exceeds heartbeatTimeout %s", t.LeaderLeaseTimeout, t.HeartbeatTimeout)
	}
	if t.ElectionTimeout < t.HeartbeatTimeout {
		bad("timings.electionTimeout", "%s is below heartbeatTimeout %s", t.ElectionTimeout, t.HeartbeatTimeout)
	}
	if t.SnapshotThreshold == 0 {
		bad("timings.snapshotThreshold", "must be positive")
	}
	if t.SnapshotRetain < 1 {
		bad("timings.snapshotRetain", "must be at least 1, is %d", t.SnapshotRetain)
	}
	return errors.Join(errs...)
}

// httpBase parses an HTTP address: a URL with http or https, or host:port
// (taken as http).
func httpBase(addr string) (*url.URL, error) {
	if !strings.Contains(addr, "://") {
		host, port, err := net.SplitHostPort(addr)
		if err != nil || host == "" {
			return nil, fmt.Errorf("%q is neither host:port nor an http(s) URL", addr)
		}
		if _, err := strconv.ParseUint(port, 10, 16); err != nil {
			return nil, fmt.Errorf("%q: port %q is not a number", addr, port)
		}
		return &url.URL{Scheme: "http", Host: addr}, nil
	}
	u, err := url.Parse(addr)
	if err != nil {
		return nil, fmt.Errorf("%q is not a URL: %w", addr, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%q is not an http(s) URL with a host", addr)
	}
	return &url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}, nil
}
