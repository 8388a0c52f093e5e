package cluster

import (
	"maps"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fenced-project/fenced/cluster/ledger"
)

// Status is the Raft section of /status.
type Status struct {
	// ID is this replica's ID; State is leader, follower, candidate or
	// shutdown.
	ID    string `json:"id"`
	State string `json:"state"`
	Term  uint64 `json:"term"`
	// Leader is the leader this replica knows of (nil when none).
	Leader *LeaderInfo `json:"leader,omitempty"`
	// LeaderSince is when this replica's established leadership began.
	LeaderSince *time.Time `json:"leaderSince,omitempty"`
	// LastContact is when a follower last heard from the leader.
	LastContact *time.Time `json:"lastContact,omitempty"`
	// LastContactSeconds is the age of LastContact (0 on the leader, -1 when
	// never).
	LastContactSeconds float64 `json:"lastContactSeconds"`
	CommitIndex        uint64  `json:"commitIndex"`
	AppliedIndex       uint64  `json:"appliedIndex"`
	LastLogIndex       uint64  `json:"lastLogIndex"`
	// LedgerIndex is the index of the last command the ledger applied.
	LedgerIndex uint64 `json:"ledgerIndex"`
	// StorageFull, when not empty, says that the data directory is full
	// and Raft's writes are held (see Node.StorageFull).
	StorageFull string `json:"storageFull,omitempty"`
	// StorageHandover, when not empty, says that this replica handed its
	// leadership over because its data directory stayed full, when and
	// why (the last such handover).
	StorageHandover string `json:"storageHandover,omitempty"`
	// LedgerVersions are the ledger versions this build applies ("1..3");
	// GroupLedgerVersion is the version the group runs (what leaders
	// write). VoterLedgerVersions, on the leader, is the newest version
	// each voter advertised.
	LedgerVersions      string         `json:"ledgerVersions"`
	GroupLedgerVersion  int            `json:"groupLedgerVersion"`
	VoterLedgerVersions map[string]int `json:"voterLedgerVersions,omitempty"`
	// LedgerHalted, when not empty, says this replica met a committed
	// entry it cannot apply and stopped applying (it is not ready).
	LedgerHalted      string `json:"ledgerHalted,omitempty"`
	LastSnapshotIndex uint64 `json:"lastSnapshotIndex"`
	LastSnapshotTerm  uint64 `json:"lastSnapshotTerm"`
	// Peers are the members of the Raft configuration plus configured
	// peers that are not members yet.
	Peers []PeerStatus `json:"peers"`
}

// PeerStatus is one member as this replica sees it.
type PeerStatus struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raftAddr"`
	HTTPAddr string `json:"httpAddr,omitempty"`
	// Suffrage is voter or nonvoter; "none" for a configured peer that is
	// not a member yet.
	Suffrage string `json:"suffrage"`
	Leader   bool   `json:"leader,omitempty"`
	Self     bool   `json:"self,omitempty"`
	// Reachable is known on the leader only: whether the peer answers
	// heartbeats. LastContact is when it last did (on the leader, for a
	// peer whose heartbeats fail or that has recovered).
	Reachable   *bool      `json:"reachable,omitempty"`
	LastContact *time.Time `json:"lastContact,omitempty"`
}

// peerContact is the leader's view of one follower's heartbeats.
type peerContact struct {
	failing     bool
	lastContact time.Time
}

// observeLoop records heartbeat failures and recoveries (the leader's view
// of each follower) and leader changes.
func (n *Node) observeLoop() {
	defer n.wg.Done()
	for {
		select {
		case <-n.ctx.Done():
			return
		case o := <-n.obsCh:
			n.mu.Lock()
			switch d := o.Data.(type) {
			case raft.FailedHeartbeatObservation:
				n.peerState[string(d.PeerID)] = peerContact{failing: true, lastContact: d.LastContact}
			case raft.ResumedHeartbeatObservation:
				n.peerState[string(d.PeerID)] = peerContact{lastContact: time.Now()}
			case raft.LeaderObservation:
				n.peerState = map[string]peerContact{}
				n.metrics.leaderChanges.Inc()
			}
			n.mu.Unlock()
		}
	}
}

// Status reports this replica's Raft state.
func (n *Node) Status() Status {
	st := Status{
		ID:           n.cfg.ID,
		State:        strings.ToLower(n.raft.State().String()),
		Term:         n.raft.CurrentTerm(),
		CommitIndex:  n.raft.CommitIndex(),
		AppliedIndex: n.raft.AppliedIndex(),
		LastLogIndex: n.raft.LastIndex(),
		LedgerIndex:  n.fsm.AppliedIndex(),

		LedgerVersions:     strconv.Itoa(ledger.MinVersion) + ".." + strconv.Itoa(ledger.Version),
		GroupLedgerVersion: n.groupVersion(),
	}
	if h := n.fsm.Halted(); h != nil {
		st.LedgerHalted = h.String()
	}
	if n.raft.State() == raft.Leader {
		n.mu.Lock()
		st.VoterLedgerVersions = maps.Clone(n.voterVersions)
		n.mu.Unlock()
	}
	st.StorageHandover = n.lastStorageHandover()
	// While the store holds a write for a full disk, Raft's main loop
	// waits in it: ask nothing that goes through it (Stats reads the
	// configuration that way).
	full := n.StorageFull()
	if full != nil {
		st.StorageFull = full.Error()
	} else {
		stats := n.raft.Stats()
		st.LastSnapshotIndex = parseUint(stats["last_snapshot_index"])
		st.LastSnapshotTerm = parseUint(stats["last_snapshot_term"])
	}
	leader, hasLeader := n.Leader()
	if hasLeader {
		st.Leader = &leader
	}
	isLeader := n.raft.State() == raft.Leader
	switch last := n.raft.LastContact(); {
	case isLeader:
		st.LastContactSeconds = 0
	case last.IsZero():
		st.LastContactSeconds = -1
	default:
		st.LastContact = &last
		st.LastContactSeconds = time.Since(last).Seconds()
	}

	n.mu.Lock()
	if n.lead.Leader {
		since := n.lead.Since
		st.LeaderSince = &since
	}
	contacts := make(map[string]peerContact, len(n.peerState))
	for id, c := range n.peerState {
		contacts[id] = c
	}
	configured := append([]Peer(nil), n.peers...)
	n.mu.Unlock()

	seen := map[string]bool{}
	var servers []raft.Server
	if full == nil {
		if f := n.raft.GetConfiguration(); f.Error() == nil {
			servers = f.Configuration().Servers
		}
	}
	for _, s := range servers {
		ps := PeerStatus{ID: string(s.ID), RaftAddr: string(s.Address), Suffrage: suffrage(s.Suffrage),
			Self: string(s.ID) == n.cfg.ID}
		ps.Leader = hasLeader && ps.ID == leader.ID
		for _, p := range configured {
			if p.ID == ps.ID {
				ps.HTTPAddr = p.HTTPAddr
			}
		}
		if isLeader && !ps.Self {
			c, known := contacts[ps.ID]
			reachable := !c.failing
			ps.Reachable = &reachable
			if known && !c.lastContact.IsZero() {
				t := c.lastContact
				ps.LastContact = &t
			}
		}
		seen[ps.ID] = true
		st.Peers = append(st.Peers, ps)
	}
	for _, p := range configured {
		if !seen[p.ID] {
			st.Peers = append(st.Peers, PeerStatus{ID: p.ID, RaftAddr: p.RaftAddr, HTTPAddr: p.HTTPAddr, Suffrage: "none"})
		}
	}
	sort.Slice(st.Peers, func(i, j int) bool { return st.Peers[i].ID < st.Peers[j].ID })
	return st
}

func suffrage(s raft.ServerSuffrage) string {
	switch s {
	case raft.Voter:
		return "voter"
	case raft.Nonvoter:
		return "nonvoter"
	}
	return "staging"
}

func parseUint(s string) uint64 {
	v, _ := strconv.ParseUint(s, 10, 64)
	return v
}
