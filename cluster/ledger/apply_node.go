package ledger

import (
	"fmt"
	"maps"
	"slices"
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
// the cluster itself: by a single pause slot of versions 1 to 4 or by a
// pause holder (version 5).
func (s *State) Paused(cluster string) bool {
	if s.Pause.Paused {
		return true
	}
	if c := s.Clusters[cluster]; c != nil && c.Pause.Paused {
		return true
	}
	for _, h := range s.Pauses {
		if h.Cluster == "" || h.Cluster == cluster {
			return true
		}
	}
	return false
}

// applyAddPause adds a pause holder (version 5), or updates the reason of
// the one the same operator holds for the same scope.
func applyAddPause(s *State, index uint64, c *AddPause) error {
	i := slices.IndexFunc(s.Pauses, func(h PauseHolder) bool { return h.Operator == c.Operator && h.Cluster == c.Cluster })
	if i < 0 && len(s.Pauses) >= MaxPauses {
		return fmt.Errorf("%s: %w: %d pauses are held already; end some first", c.Type(), ErrConflict, len(s.Pauses))
	}
	if i >= 0 {
		s.Pauses[i].Reason, s.Pauses[i].UpdatedAt = c.Reason, c.At
	} else {
		s.Pauses = append(s.Pauses, PauseHolder{ID: fmt.Sprintf("pause-%d", index), Cluster: c.Cluster,
			Operator: c.Operator, Reason: c.Reason, At: c.At})
	}
	if c.Cluster != "" && s.Clusters[c.Cluster] == nil {
		s.Clusters[c.Cluster] = &ClusterState{Nodes: map[string]*NodeState{}}
	}
	s.recordAction(index, Action{At: c.At, Operator: c.Operator, Action: "pause", Reason: c.Reason, Cluster: c.Cluster})
	return nil
}

// applyEndPauses ends the named pause holders (version 5); a legacy ID
// clears that single pause slot. It refuses the whole command when an ID
// names no pause in effect.
func applyEndPauses(s *State, index uint64, c *EndPauses) error {
	type end struct {
		slot  *Pause // a legacy slot, nil for a holder
		scope string
	}
	var ends []end
	for _, id := range c.IDs {
		if i := slices.IndexFunc(s.Pauses, func(h PauseHolder) bool { return h.ID == id }); i >= 0 {
			ends = append(ends, end{scope: s.Pauses[i].Cluster})
			continue
		}
		if id == LegacyPauseID && s.Pause.Paused {
			ends = append(ends, end{slot: &s.Pause})
			continue
		}
		if name, ok := strings.CutPrefix(id, LegacyPauseID+"-"); ok {
			if cs := s.Clusters[name]; cs != nil && cs.Pause.Paused {
				ends = append(ends, end{slot: &cs.Pause, scope: name})
				continue
			}
		}
		return fmt.Errorf("%s: %w: no pause %s is in effect", c.Type(), ErrNotFound, id)
	}
	for _, e := range ends {
		if e.slot != nil {
			*e.slot = Pause{Paused: false, Operator: c.Operator, Reason: c.Reason, At: c.At}
		}
		s.recordAction(index, Action{At: c.At, Operator: c.Operator, Action: "resume", Reason: c.Reason, Cluster: e.scope})
	}
	s.Pauses = slices.DeleteFunc(s.Pauses, func(h PauseHolder) bool { return slices.Contains(c.IDs, h.ID) })
	if len(s.Pauses) == 0 {
		s.Pauses = nil
	}
	return nil
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
