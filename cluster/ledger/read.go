package ledger

import "sort"

// Node returns the node's state, or nil. The result points into the state:
// use it only inside FSM.Read, or on a State from FSM.Copy.
func (s *State) Node(cluster, node string) *NodeState {
	return s.node(cluster, node)
}

// OpenFences returns every open fence record, ordered by cluster and node.
// The results point into the state (see Node).
func (s *State) OpenFences() []*Fence {
	var out []*Fence
	for _, c := range s.Clusters {
		for _, n := range c.Nodes {
			if n.Fence != nil {
				out = append(out, n.Fence)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Cluster != out[j].Cluster {
			return out[i].Cluster < out[j].Cluster
		}
		return out[i].Node < out[j].Node
	})
	return out
}

// Fence returns the open or historical record with this ID, or nil.
func (s *State) Fence(cluster, node, id string) *Fence {
	n := s.node(cluster, node)
	if n == nil {
		return nil
	}
	if n.Fence != nil && n.Fence.ID == id {
		return n.Fence
	}
	for _, h := range n.History {
		if h.ID == id {
			return h
		}
	}
	return nil
}

// CurrentEpoch returns the last recorded leadership, if any.
func (s *State) CurrentEpoch() (Epoch, bool) {
	if len(s.Leaders) == 0 {
		return Epoch{}, false
	}
	return s.Leaders[len(s.Leaders)-1], true
}

// Observations returns every replica's observation of one subject, keyed by
// replica ID.
func (s *State) Observations(cluster, node, probe string) map[string]Observation {
	key := ObservationKey(cluster, node, probe)
	out := map[string]Observation{}
	for id, r := range s.Replicas {
		if o, ok := r.Observations[key]; ok {
			out[id] = o
		}
	}
	return out
}
