package ledger

import (
	"fmt"
	"maps"
	"strings"

	"github.com/fenced-project/fenced/arrayclients"
)

// ObservationKey is the key of an observation in ReplicaView.Observations.
func ObservationKey(cluster, node, probe string) string {
	return cluster + "/" + node + "/" + probe
}

// node returns the node's state, or nil.
func (s *State) node(cluster, node string) *NodeState {
	c := s.Clusters[cluster]
	if c == nil {
		return nil
	}
	return c.Nodes[node]
}

// ensureNode returns the node's state, creating it and its cluster.
func (s *State) ensureNode(cluster, node string) *NodeState {
	c := s.Clusters[cluster]
	if c == nil {
		c = &ClusterState{Nodes: map[string]*NodeState{}}
		s.Clusters[cluster] = c
	}
	n := c.Nodes[node]
	if n == nil {
		n = &NodeState{}
		c.Nodes[node] = n
	}
	return n
}

func (s *State) recordAction(index uint64, a Action) {
	a.Index = index
	if a.Node != "" {
		n := s.ensureNode(a.Cluster, a.Node)
		n.Actions = appendBounded(n.Actions, a, MaxNodeActions)
		return
	}
	s.Actions = appendBounded(s.Actions, a, MaxActions)
}

func applyLeaderEpoch(s *State, index uint64, c *LeaderEpoch) error {
	if n := len(s.Leaders); n > 0 && s.Leaders[n-1].Term == c.Term && s.Leaders[n-1].Replica == c.By {
		return nil // the same leadership established again: nothing new
	}
	if n := len(s.Leaders); n > 0 && s.Leaders[n-1].Term >= c.Term {
		return fmt.Errorf("%s: %w: epoch of term %d after one of term %d", c.Type(), ErrStaleTerm, c.Term, s.Leaders[n-1].Term)
	}
	s.Leaders = appendBounded(s.Leaders, Epoch{
		Replica: c.By, Term: c.Term, Index: index, At: c.At, LedgerVersion: c.LedgerVersion,
	}, MaxLeaders)
	return nil
}

func applySetIdentities(s *State, c *SetIdentities) error {
	n := s.ensureNode(c.Cluster, c.Node)
	n.Identities = maps.Clone(c.Identities)
	if n.Identities == nil {
		n.Identities = map[string]arrayclients.Identity{}
	}
	n.IdentitiesAt = c.At
	n.BootID = c.BootID
	n.NotFound = maps.Clone(c.NotFound)
	n.Ambiguous = maps.Clone(c.Ambiguous)
	n.InputsDigest = c.InputsDigest
	return nil
}

func applySetPause(s *State, index uint64, c *SetPause) error {
	p := Pause{Paused: c.Paused, Operator: c.Operator, Reason: c.Reason, At: c.At}
	action := "resume"
	if c.Paused {
		action = "pause"
	}
	if c.Cluster == "" {
		s.Pause = p
	} else {
		cs := s.Clusters[c.Cluster]
		if cs == nil {
			cs = &ClusterState{Nodes: map[string]*NodeState{}}
			s.Clusters[c.Cluster] = cs
		}
		cs.Pause = p
	}
	s.recordAction(index, Action{At: c.At, Operator: c.Operator, Action: action, Reason: c.Reason, Cluster: c.Cluster})
	return nil
}

// Paused reports whether fencing is paused for the cluster, globally or for
// the cluster itself.
func (s *State) Paused(cluster string) bool {
	if s.Pause.Paused {
		return true
	}
	c := s.Clusters[cluster]
	return c != nil && c.Pause.Paused
}

func applyObserve(s *State, index uint64, c *Observe) error {
	r := s.Replicas[c.Replica]
	if r == nil {
		r = &ReplicaView{Observations: map[string]Observation{}}
		s.Replicas[c.Replica] = r
	}
	key := ObservationKey(c.Cluster, c.Node, c.Probe)
	if old, ok := r.Observations[key]; ok && old.OK == c.OK {
		return nil // changes only: the value holds since old.Since
	}
	r.Observations[key] = Observation{
		Cluster: c.Cluster, Node: c.Node, Probe: c.Probe, OK: c.OK,
		Since: c.Since, Detail: c.Detail, Index: index,
	}
	return nil
}

func applyOperatorNote(s *State, index uint64, c *OperatorNote) error {
	if c.Node != "" && s.node(c.Cluster, c.Node) == nil {
		return fmt.Errorf("%s: %w: node %s/%s", c.Type(), ErrNotFound, c.Cluster, c.Node)
	}
	s.recordAction(index, Action{
		At: c.At, Operator: c.Operator, Action: c.Action, Reason: c.Reason,
		Cluster: c.Cluster, Node: c.Node, FenceID: c.FenceID,
	})
	return nil
}

func applyForgetNode(s *State, index uint64, c *ForgetNode) error {
	n := s.node(c.Cluster, c.Node)
	if n == nil {
		return fmt.Errorf("%s: %w: node %s/%s", c.Type(), ErrNotFound, c.Cluster, c.Node)
	}
	if n.Fence != nil {
		return fmt.Errorf("%s: %w: node %s/%s has open fence %s in %s", c.Type(), ErrConflict,
			c.Cluster, c.Node, n.Fence.ID, n.Fence.State)
	}
	delete(s.Clusters[c.Cluster].Nodes, c.Node)
	prefix := ObservationKey(c.Cluster, c.Node, "")
	for _, r := range s.Replicas {
		for key := range r.Observations {
			if strings.HasPrefix(key, prefix) {
				delete(r.Observations, key)
			}
		}
	}
	operator := c.Operator
	if operator == "" {
		operator = c.By
	}
	s.recordAction(index, Action{At: c.At, Operator: operator, Action: "forget-node", Reason: c.Reason,
		Cluster: c.Cluster})
	return nil
}

// applySetLedgerVersion raises the group ledger version (version 3). It
// never lowers it: entries of the newer version may already be committed.
func applySetLedgerVersion(s *State, c *SetLedgerVersion) error {
	if c.LedgerVersion < s.GroupVersion() {
		return fmt.Errorf("%s: %w: the group runs ledger version %d; it is not lowered to %d", c.Type(),
			ErrConflict, s.GroupVersion(), c.LedgerVersion)
	}
	s.LedgerVersion = c.LedgerVersion
	return nil
}
