// Package cluster runs fenced's Raft group and holds its replicated fencing
// ledger (package ledger). A Node is one replica: it persists the Raft log in
// BoltDB and snapshots in files under the data directory, talks to its peers
// over mutual TLS, bootstraps the group from the configured peers on its first
// start, and offers the rest of the daemon a small API: Apply a ledger command
// and know it committed in this leader's term, observe leadership, verify it
// before a destructive step, read the ledger consistently, and find the
// leader's HTTP address to forward to.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/bbolt"
	bbolterrors "go.etcd.io/bbolt/errors"

	"github.com/fenced-project/fenced/cluster/ledger"
	"github.com/fenced-project/fenced/cluster/transport"
)

// Store timings: how long Open waits for the store's file lock, and how
// often a write held on a full disk is retried.
const (
	storeLockWait  = 2 * time.Second
	storeFullRetry = time.Second
)

// Node is one replica of the Raft group.
type Node struct {
	cfg     Config
	log     *slog.Logger
	fsm     *ledger.FSM
	raft    *raft.Raft
	store   *raftboltdb.BoltStore
	dirLock *os.File // the data directory's lock, held until closeResources
	guard   *storeGuard
	// handover hands leadership over when the data directory stays full.
	handover storageHandover
	stream   *transport.StreamLayer // nil for a single replica without TLS
	metrics  *metrics

	observer *raft.Observer
	obsCh    chan raft.Observation
	notifyCh chan bool

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// gate is set while this replica rejoins without state (rejoin.go).
	gate      *voteGate
	mu        sync.Mutex
	peers     []Peer
	lead      Leadership
	changed   chan struct{} // closed and replaced on every leadership change
	peerState map[string]peerContact
	reconcile chan struct{}
	closed    bool
	// versionProbe asks voters for their ledger versions (the leader's
	// negotiation); voterVersions is what they last said.
	versionProbe  VersionProbe
	voterVersions map[string]int
	// arrayTimeout is this replica's longest array request timeout, which
	// it advertises; peerTimeouts what the peers advertised (peertimeouts.go).
	arrayTimeout time.Duration
	peerTimeouts map[string]time.Duration
	haltCh       chan ledger.Halt
}

// Open starts a replica: it opens (or creates) the stores in cfg.DataDir,
// starts the transport, bootstraps the group from cfg.Peers when there is no
// Raft state yet, and starts following. reg, when not nil, receives the
// replica's metrics. Close stops it.
func Open(cfg Config, logger *slog.Logger, reg *prometheus.Registry) (*Node, error) {
	if len(cfg.Peers) == 0 && cfg.ID != "" {
		addr := cfg.AdvertiseAddr
		if addr == "" {
			addr = cfg.BindAddr
		}
		cfg.Peers = []Peer{{ID: cfg.ID, RaftAddr: addr, HTTPAddr: cfg.HTTPAdvertise}}
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("raft configuration: %w", err)
	}
	if logger == nil {
		logger = slog.Default()
	}
	logger = logger.With("replica", cfg.ID)
	self, _ := cfg.self()
	if cfg.HTTPAdvertise == "" {
		cfg.HTTPAdvertise = self.HTTPAddr
	}
	if cfg.AdvertiseAddr == "" {
		cfg.AdvertiseAddr = self.RaftAddr
	}

	ctx, cancel := context.WithCancel(context.Background())
	n := &Node{
		cfg: cfg, log: logger, fsm: ledger.New(),
		ctx: ctx, cancel: cancel,
		peers:     append([]Peer(nil), cfg.Peers...),
		changed:   make(chan struct{}),
		peerState: map[string]peerContact{},
		reconcile: make(chan struct{}, 1),
		notifyCh:  make(chan bool, 16),
		obsCh:     make(chan raft.Observation, 64),
	}
	n.lead = n.notLeader()
	if err := n.open(reg); err != nil {
		cancel()
		return nil, errors.Join(err, n.closeResources())
	}
	return n, nil
}

func (n *Node) open(reg *prometheus.Registry) error {
	st, err := prepareDataDir(n.cfg.DataDir)
	if err != nil {
		return err
	}
	n.dirLock = st.lock
	dir := st.dir
	hl := newHCLog(n.log)
	path := filepath.Join(dir, storeFile)
	// A timeout, so that a second process on the same data directory is
	// refused instead of waiting for BoltDB's file lock forever.
	bolt, err := raftboltdb.New(raftboltdb.Options{Path: path, BoltOptions: &bbolt.Options{Timeout: storeLockWait}})
	if err != nil {
		if errors.Is(err, bbolterrors.ErrTimeout) {
			return &DataDirError{Path: path, Problem: "is locked by another process", Err: err, InUse: true}
		}
		return &DataDirError{Path: path, Problem: "cannot be opened", Err: err}
	}
	n.store = bolt
	if err := checkStoredLog(bolt); err != nil {
		return &DataDirError{Path: path, Problem: "holds a damaged log", Err: err}
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(filepath.Join(dir, "snapshots"), n.cfg.Timings.SnapshotRetain, hl.Named("snapshots"))
	if err != nil {
		return fmt.Errorf("open snapshot store in %s: %w", dir, err)
	}

	n.metrics = newMetrics(n)
	var inner raftStore = bolt
	if n.cfg.wrapStore != nil {
		inner = n.cfg.wrapStore(inner)
	}
	retry := n.cfg.storeRetry
	if retry <= 0 {
		retry = storeFullRetry
	}
	join := n.cfg.JoinExisting || st.rejoin
	n.guard = &storeGuard{
		raftStore: inner, ctx: n.ctx, log: n.log, dir: dir, retry: retry,
		kick: make(chan struct{}, 1),
		onFull: func(full bool) {
			n.metrics.setStorageFull(full)
			n.armStorageHandover(full)
		},
		failure: n.metrics.storeWriteErrors.Inc,
	}
	n.guard.held.Store(st.held)

	existing, err := raft.HasExistingState(n.guard, n.guard, snaps)
	if err != nil {
		return &DataDirError{Path: path, Problem: "cannot be read", Err: err}
	}
	if existing && !st.held && !join {
		half, err := interruptedBootstrap(n.guard, snaps)
		if err != nil {
			return &DataDirError{Path: path, Problem: "cannot be read", Err: err}
		}
		if half {
			n.log.Warn("an earlier first start was stopped half-way through bootstrapping the group (term written, configuration not); bootstrapping again")
			if err := n.guard.SetUint64(keyCurrentTerm, 0); err != nil {
				return fmt.Errorf("reset the half-written bootstrap in %s: %w", path, err)
			}
			existing = false
		}
	}
	switch {
	case existing:
		n.guard.markHeld()
	case st.held:
		return &DataDirError{Path: path, Problem: "holds no Raft state but this data directory held the group's log"}
	}

	if join && (!existing || st.rejoin) {
		// Without the group's log this replica neither votes nor stands
		// for election until it has caught up (rejoin.go).
		if n.gate, err = n.newVoteGate(dir); err != nil {
			return fmt.Errorf("prepare the rejoin of %s: %w", dir, err)
		}
		n.log.Warn("joining the group without its log: this replica neither votes nor stands for election until it has caught up with a leader")
	}
	trans, err := n.newTransport(hl)
	if err != nil {
		return err
	}
	n.haltCh = make(chan ledger.Halt, 1)
	n.fsm.OnHalt(func(h ledger.Halt) {
		select {
		case n.haltCh <- h:
		default:
		}
	})
	rc := n.raftConfig(hl)
	r, err := raft.NewRaft(rc, n.fsm, n.guard, n.guard, snaps, trans)
	if err != nil {
		closeTransport(trans)
		return fmt.Errorf("start raft: %w", err)
	}
	n.mu.Lock()
	n.raft = r
	n.mu.Unlock()
	switch {
	case existing:
		n.log.Info("raft state found; rejoining the group")
	case join:
		n.log.Info("no raft state; waiting to be added by the group's leader", "recovered", st.rejoin)
	default:
		servers := make([]raft.Server, 0, len(n.peers))
		for _, p := range n.peers {
			servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.RaftAddr)})
		}
		n.log.Info("bootstrapping raft group", "peers", len(servers))
		if err := r.BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
			return fmt.Errorf("bootstrap raft group: %w", err)
		}
	}

	n.observer = raft.NewObserver(n.obsCh, false, func(o *raft.Observation) bool {
		switch o.Data.(type) {
		case raft.FailedHeartbeatObservation, raft.ResumedHeartbeatObservation, raft.LeaderObservation:
			return true
		}
		return false
	})
	r.RegisterObserver(n.observer)

	if reg != nil {
		if err := n.metrics.register(reg); err != nil {
			return fmt.Errorf("register raft metrics: %w", err)
		}
	}
	n.wg.Add(4)
	go n.leaderLoop()
	go n.observeLoop()
	go n.haltLoop(n.haltCh)
	go n.advertLoop()
	return nil
}

func (n *Node) newTransport(hl hclog.Logger) (raft.Transport, error) {
	if !n.cfg.TLS.enabled() {
		_, t := raft.NewInmemTransport(raft.ServerAddress(n.cfg.AdvertiseAddr))
		n.log.Warn("single replica without TLS: raft runs on an in-memory transport and accepts no peers")
		return t, nil
	}
	creds, err := transport.LoadCredentials(n.cfg.TLS.CertFile, n.cfg.TLS.KeyFile, n.cfg.TLS.CAFile, n.cfg.TLS.ServerName)
	if err != nil {
		return nil, fmt.Errorf("raft TLS: %w", err)
	}
	if err := creds.CheckNames(n.cfg.ID); err != nil {
		return nil, fmt.Errorf("raft TLS: certificate %s: %w", n.cfg.TLS.CertFile, err)
	}
	stream, err := transport.Listen(n.cfg.BindAddr, n.cfg.AdvertiseAddr, creds, transport.Options{
		HandshakeTimeout: n.cfg.Timings.HandshakeTimeout,
		Dial:             n.cfg.Dial,
		OnReject:         func(string, error) { n.metrics.tlsRejected.Inc() },
		Logger:           n.log,
		Peers:            n.transportPeers,
		VoteGate:         n.voteGate(),
	})
	if err != nil {
		return nil, err
	}
	n.stream = stream
	return raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		ServerAddressProvider: addressBook{n},
		Logger:                hl.Named("transport"),
		Stream:                stream,
		MaxPool:               3,
		Timeout:               n.cfg.Timings.IOTimeout,
	}), nil
}

func (n *Node) raftConfig(hl hclog.Logger) *raft.Config {
	t := n.cfg.Timings
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(n.cfg.ID)
	rc.HeartbeatTimeout = t.HeartbeatTimeout
	rc.ElectionTimeout = t.ElectionTimeout
	if n.gate != nil {
		rc.HeartbeatTimeout, rc.ElectionTimeout = gatedTimeout, gatedTimeout
	}
	rc.LeaderLeaseTimeout = t.LeaderLeaseTimeout
	rc.CommitTimeout = t.CommitTimeout
	rc.SnapshotInterval = t.SnapshotInterval
	rc.SnapshotThreshold = t.SnapshotThreshold
	rc.TrailingLogs = t.TrailingLogs
	rc.NotifyCh = n.notifyCh
	rc.Logger = hl.Named("raft")
	return rc
}

// addressBook dials peers at the address in this replica's configuration,
// so a peer's new address takes effect without a membership change.
type addressBook struct{ n *Node }

func (a addressBook) ServerAddr(id raft.ServerID) (raft.ServerAddress, error) {
	if p, ok := a.n.peer(string(id)); ok {
		return raft.ServerAddress(p.RaftAddr), nil
	}
	return "", fmt.Errorf("replica %q is not a configured peer", id)
}

// transportPeers is the configured peers as the transport checks
// certificates against them.
func (n *Node) transportPeers() []transport.Peer {
	n.mu.Lock()
	defer n.mu.Unlock()
	ps := make([]transport.Peer, 0, len(n.peers))
	for _, p := range n.peers {
		ps = append(ps, transport.Peer{ID: p.ID, Addr: p.RaftAddr})
	}
	return ps
}

// peer returns the configured peer with this ID.
func (n *Node) peer(id string) (Peer, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, p := range n.peers {
		if p.ID == id {
			return p, true
		}
	}
	return Peer{}, false
}

// StorageFull returns nil, or an error wrapping ErrStorageFull while the
// data directory has no space for Raft's writes (they are held meanwhile).
func (n *Node) StorageFull() error {
	if n.guard == nil {
		return nil
	}
	return n.guard.Full()
}

// ID is this replica's ID.
func (n *Node) ID() string { return n.cfg.ID }

// Ledger is the local ledger. Its reads are local and may lag the leader;
// use ConsistentRead, or WaitApplied with an index from Apply, when that
// matters.
func (n *Node) Ledger() *ledger.FSM { return n.fsm }

// Close stops the replica without leaving the group: the other replicas see
// it as down, and it rejoins from its data directory when reopened.
func (n *Node) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	n.mu.Unlock()
	n.cancel()
	n.armStorageHandover(false)
	var err error
	if n.raft != nil {
		n.raft.DeregisterObserver(n.observer)
		err = n.raft.Shutdown().Error()
	}
	n.wg.Wait()
	n.setLeadership(n.notLeader())
	return errors.Join(err, n.closeResources())
}

func (n *Node) closeResources() error {
	var errs []error
	if n.stream != nil {
		errs = append(errs, n.stream.Close()) // a no-op when Raft closed it
	}
	if n.store != nil {
		errs = append(errs, n.store.Close())
	}
	if n.metrics != nil {
		n.metrics.unregister()
	}
	if n.dirLock != nil {
		errs = append(errs, n.dirLock.Close()) // releases the flock
		n.dirLock = nil
	}
	return errors.Join(errs...)
}

// timeout returns the caller's deadline or the configured ApplyTimeout.
func (n *Node) timeout(ctx context.Context) time.Duration {
	if d, ok := ctx.Deadline(); ok {
		return max(time.Until(d), time.Millisecond)
	}
	return n.cfg.Timings.ApplyTimeout
}

func closeTransport(t raft.Transport) {
	if c, ok := t.(raft.WithClose); ok {
		c.Close()
	}
}
