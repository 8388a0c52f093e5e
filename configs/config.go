// Package configs holds fenced's configuration: the typed schema, its
// defaults, loading from one YAML file per management host (with FENCED_*
// environment overrides), and validation that names every bad field with its
// YAML line. The example configurations shipped with fenced live next to this
// code, and a test validates every one of them.
package configs

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Config is the whole configuration of one fenced replica. The YAML keys are
// the camelCase names in the mapstructure tags.
type Config struct {
	// AllowInlineSecrets permits arrays[].password in the file itself.
	// Default false: secrets come from files or systemd credentials.
	AllowInlineSecrets bool `mapstructure:"allowInlineSecrets"`
	// Replica is this replica's identity and Raft endpoint.
	Replica Replica `mapstructure:"replica"`
	// Peers lists the OTHER members of the Raft group (not this replica).
	// Empty means a single-replica group.
	Peers []Peer `mapstructure:"peers"`
	// Raft holds the Raft timings shared by the group.
	Raft Raft `mapstructure:"raft"`
	// HTTP is the status, metrics and API endpoint.
	HTTP HTTP `mapstructure:"http"`
	// Log selects the log format and level.
	Log Log `mapstructure:"log"`
	// Clusters lists the Kubernetes clusters this group protects. Empty is
	// allowed: the daemon runs and serves HTTP, protecting nothing.
	Clusters []Cluster `mapstructure:"clusters"`
	// Arrays lists the storage arrays clusters may fence at.
	Arrays []Array `mapstructure:"arrays"`

	// baseDir is the directory relative file paths were resolved against.
	baseDir string
	// unchecked lists credential references that could not be checked
	// because no credentials directory was known.
	unchecked []string
	// warnings are what CheckContents found that works but needs attention.
	warnings []Problem
}

// Replica is this replica's identity.
type Replica struct {
	// ID names the replica in the Raft group; a DNS label, unique in the group.
	ID string `mapstructure:"id"`
	// DataDir holds the Raft log, snapshots and the fencing ledger.
	// Default /var/lib/fenced (the unit's StateDirectory).
	DataDir string `mapstructure:"dataDir"`
	// RaftBindAddress is the host:port Raft listens on. Default 0.0.0.0:7441.
	RaftBindAddress string `mapstructure:"raftBindAddress"`
	// RaftAdvertiseAddress is the host:port peers reach this replica's Raft
	// at. Default: the bind address, which must then name a specific host.
	RaftAdvertiseAddress string `mapstructure:"raftAdvertiseAddress"`
	// TLS secures Raft traffic between replicas with mutual TLS. All three
	// files or none.
	TLS PeerTLS `mapstructure:"tls"`
	// JoinExisting makes a replica with no Raft state wait to be added to a
	// running group (by its leader, once the running replicas list it in
	// their peers) instead of bootstrapping a group from its peer list. Set
	// it on replicas added to a group that already runs. Default false.
	JoinExisting bool `mapstructure:"joinExisting"`
}

// PeerTLS is mutual TLS between replicas. Every file field accepts a path
// or credential:NAME (see ResolveFile).
type PeerTLS struct {
	// CertFile is this replica's certificate (PEM).
	CertFile string `mapstructure:"certFile"`
	// KeyFile is the certificate's private key (PEM).
	KeyFile string `mapstructure:"keyFile"`
	// CAFile signs every replica's certificate (PEM).
	CAFile string `mapstructure:"caFile"`
}

// Enabled reports whether any TLS file is set.
func (t PeerTLS) Enabled() bool { return t.CertFile != "" || t.KeyFile != "" || t.CAFile != "" }

// Peer is another member of the Raft group.
type Peer struct {
	// ID is the peer's replica.id.
	ID string `mapstructure:"id"`
	// RaftAddress is the peer's replica.raftAdvertiseAddress (host:port).
	RaftAddress string `mapstructure:"raftAddress"`
	// HTTPAddress is the URL of the peer's HTTP endpoint
	// (http.advertiseURL), used to forward requests to the leader.
	HTTPAddress string `mapstructure:"httpAddress"`
}

// Raft holds Raft timings. The defaults suit replicas on one LAN: a failed
// leader is replaced within about two to three seconds.
type Raft struct {
	// HeartbeatTimeout: a follower without contact from the leader for this
	// long starts an election. Default 1s.
	HeartbeatTimeout time.Duration `mapstructure:"heartbeatTimeout"`
	// ElectionTimeout: a candidate without a result for this long retries.
	// Default 1s; at least HeartbeatTimeout.
	ElectionTimeout time.Duration `mapstructure:"electionTimeout"`
	// LeaderLeaseTimeout: a leader that cannot reach a quorum for this long
	// steps down (and stops writing). Default 500ms; at most HeartbeatTimeout.
	LeaderLeaseTimeout time.Duration `mapstructure:"leaderLeaseTimeout"`
	// CommitTimeout is how often an idle leader sends each follower the
	// commit index (new entries go out at once, whatever it is); a
	// follower applies a committed entry at most about twice this late.
	// Default 500ms.
	CommitTimeout time.Duration `mapstructure:"commitTimeout"`
	// SnapshotInterval is how often Raft checks whether to snapshot.
	// Default 2m.
	SnapshotInterval time.Duration `mapstructure:"snapshotInterval"`
	// SnapshotThreshold is how many new log entries trigger a snapshot.
	// Default 8192.
	SnapshotThreshold uint64 `mapstructure:"snapshotThreshold"`
	// StorageFullHandover: a leader whose data directory stays full (its
	// Raft writes held) this long hands its leadership to another replica
	// and does not stand for election until space is freed. Default 10s.
	StorageFullHandover time.Duration `mapstructure:"storageFullHandover"`
}

// HTTP is the endpoint serving /healthz, /readyz, /status, /metrics and the
// API later components add.
type HTTP struct {
	// Listen is the host:port to listen on. Default 127.0.0.1:7440.
	Listen string `mapstructure:"listen"`
	// AdvertiseURL is how peers and operators reach this endpoint
	// (http:// or https://). Default: derived from Listen.
	AdvertiseURL string `mapstructure:"advertiseURL"`
	// TLS serves HTTPS; without it the endpoint is plain HTTP.
	TLS ServerTLS `mapstructure:"tls"`
	// TokenFile holds the bearer token mutating API calls must present
	// (path or credential:NAME). Optional.
	TokenFile string `mapstructure:"tokenFile"`
	// ReadOnlyLoopbackOnly (default true) refuses a plain-HTTP listener on
	// anything but a loopback address: without TLS the endpoint is read-only
	// and local. Set false only behind a TLS-terminating proxy.
	ReadOnlyLoopbackOnly bool `mapstructure:"readOnlyLoopbackOnly"`
	// Pprof serves Go's runtime profiles (net/http/pprof) under
	// /debug/pprof/ to operators only (the token or an operator
	// certificate). Default false: a CPU profile costs CPU while it runs.
	Pprof bool `mapstructure:"pprof"`
}

// ServerTLS is the HTTP endpoint's TLS. File fields accept a path or
// credential:NAME.
type ServerTLS struct {
	// CertFile and KeyFile are the server certificate and key (PEM). Both or
	// neither.
	CertFile string `mapstructure:"certFile"`
	KeyFile  string `mapstructure:"keyFile"`
	// ClientCAFile, when set, verifies client certificates. A verified
	// certificate that names a replica (see replica.tls) is that replica: it
	// may forward calls and report probes, never act as an operator. Any
	// other is an operator only when Operators or OperatorCAFile says so.
	ClientCAFile string `mapstructure:"clientCAFile"`
	// OperatorCAFile, when set, is the CA of operator certificates (PEM,
	// path or credential:NAME); it is trusted for client certificates in
	// addition to ClientCAFile, and an operator's certificate must chain to
	// it. Keep it apart from the replicas' CA.
	OperatorCAFile string `mapstructure:"operatorCAFile"`
	// Operators lists the operators allowed to act by certificate: each is
	// a certificate's subject common name, DNS name or e-mail address. With
	// OperatorCAFile and no Operators, every certificate of that CA is an
	// operator; with neither, no certificate is.
	Operators []string `mapstructure:"operators"`
}

// Enabled reports whether HTTPS is configured.
func (t ServerTLS) Enabled() bool { return t.CertFile != "" || t.KeyFile != "" }

// Log selects logging. Under systemd (stderr connected to the journal) fenced
// writes native journal entries regardless of Format.
type Log struct {
	// Format is text (default) or json.
	Format string `mapstructure:"format"`
	// Level is debug, info (default), warn or error.
	Level string `mapstructure:"level"`
}

// Log formats and levels.
const (
	LogFormatText = "text"
	LogFormatJSON = "json"
)

// DefaultConfig returns the configuration every file starts from. List
// elements (clusters, arrays, peers, node overrides) start from
// DefaultCluster, DefaultArray and zero values respectively.
func DefaultConfig() Config {
	return Config{
		AllowInlineSecrets: false,
		Replica: Replica{
			DataDir:         "/var/lib/fenced",
			RaftBindAddress: "0.0.0.0:7441",
		},
		Raft: Raft{
			HeartbeatTimeout:    time.Second,
			ElectionTimeout:     time.Second,
			LeaderLeaseTimeout:  500 * time.Millisecond,
			CommitTimeout:       500 * time.Millisecond,
			SnapshotInterval:    2 * time.Minute,
			SnapshotThreshold:   8192,
			StorageFullHandover: 10 * time.Second,
		},
		HTTP: HTTP{
			Listen:               "127.0.0.1:7440",
			ReadOnlyLoopbackOnly: true,
		},
		Log: Log{Format: LogFormatText, Level: "info"},
	}
}

// UncheckedCredentials lists credential:NAME references Load could not
// check because no credentials directory was given.
func (c *Config) UncheckedCredentials() []string { return c.unchecked }

// Warnings lists what Options.CheckContents found that works today but
// needs attention (a certificate expiring soon), with field and line.
func (c *Config) Warnings() []Problem { return c.warnings }

// Summary describes the configuration in one line.
func (c *Config) Summary() string {
	fams := map[string]bool{}
	for _, a := range c.Arrays {
		fams[string(a.Family)] = true
	}
	names := make([]string, 0, len(fams))
	for f := range fams {
		names = append(names, f)
	}
	sort.Strings(names)
	s := fmt.Sprintf("replica %s, %s, %s, %s", c.Replica.ID,
		plural(len(c.Peers), "peer"), plural(len(c.Clusters), "cluster"), plural(len(c.Arrays), "array"))
	if len(names) > 0 {
		s += " (" + strings.Join(names, ", ") + ")"
	}
	if n := len(c.unchecked); n > 0 {
		s += fmt.Sprintf("; %s not checked (no credentials directory)", plural(n, "credential reference"))
	}
	return s
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
