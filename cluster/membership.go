package cluster

import (
	"context"
	"fmt"

	"github.com/hashicorp/raft"
)

// SetPeers replaces the configured peers (after a configuration reload). The
// leader then adds voters that are missing, updates changed addresses and
// removes voters that are no longer listed. This replica must stay listed.
func (n *Node) SetPeers(peers []Peer) error {
	cfg := n.cfg
	cfg.Peers = peers
	cfg.AdvertiseAddr = ""
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("set raft peers: %w", err)
	}
	n.mu.Lock()
	n.peers = append([]Peer(nil), peers...)
	n.mu.Unlock()
	select {
	case n.reconcile <- struct{}{}:
	default:
	}
	return nil
}

// Peers returns the configured peers.
func (n *Node) Peers() []Peer {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]Peer(nil), n.peers...)
}

// reconcileMembers makes the Raft configuration match the configured peers.
// It adds before it removes, never removes this replica, and stops at the
// first failure (the next round retries).
func (n *Node) reconcileMembers(ctx context.Context) error {
	f := n.raft.GetConfiguration()
	if err := wait(ctx, f); err != nil {
		return fmt.Errorf("read raft configuration: %w", err)
	}
	current := map[string]raft.Server{}
	for _, s := range f.Configuration().Servers {
		current[string(s.ID)] = s
	}
	want := map[string]bool{}
	for _, p := range n.Peers() {
		want[p.ID] = true
		s, ok := current[p.ID]
		if ok && s.Suffrage == raft.Voter && string(s.Address) == p.RaftAddr {
			continue
		}
		n.log.Info("adding raft voter", "peer", p.ID, "address", p.RaftAddr, "wasMember", ok)
		if err := wait(ctx, n.raft.AddVoter(raft.ServerID(p.ID), raft.ServerAddress(p.RaftAddr), 0, n.timeout(ctx))); err != nil {
			return fmt.Errorf("add voter %s: %w", p.ID, err)
		}
	}
	for id := range current {
		if want[id] || id == n.cfg.ID {
			continue
		}
		n.log.Info("removing raft voter no longer configured", "peer", id)
		if err := wait(ctx, n.raft.RemoveServer(raft.ServerID(id), 0, n.timeout(ctx))); err != nil {
			return fmt.Errorf("remove voter %s: %w", id, err)
		}
	}
	return nil
}
