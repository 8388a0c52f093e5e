package ledger

import (
	"slices"
	"sort"
	"strings"
	"time"
)

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

// Holders returns every pause in effect, oldest first: the holders
// (version 5) and the single pause slots of earlier versions, each as a
// holder with ID LegacyPauseID (global) or LegacyPauseID-CLUSTER.
func (s *State) Holders() []PauseHolder {
	out := slices.Clone(s.Pauses)
	if s.Pause.Paused {
		out = append(out, PauseHolder{ID: LegacyPauseID, Operator: s.Pause.Operator, Reason: s.Pause.Reason, At: s.Pause.At})
	}
	for name, c := range s.Clusters {
		if c.Pause.Paused {
			out = append(out, PauseHolder{ID: LegacyPauseID + "-" + name, Cluster: name, Operator: c.Pause.Operator,
				Reason: c.Pause.Reason, At: c.Pause.At})
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].At.Equal(out[j].At) {
			return out[i].At.Before(out[j].At)
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// HoldersOf returns the pauses in effect for a cluster: those of every
// cluster and the cluster's own, oldest first.
func (s *State) HoldersOf(cluster string) []PauseHolder {
	return slices.DeleteFunc(s.Holders(), func(h PauseHolder) bool { return h.Cluster != "" && h.Cluster != cluster })
}

// Text describes a confirmation for logs, Events and status.
func (c Confirmation) Text() string {
	what := "cannot write to array " + c.Array
	if c.PoweredOff {
		what = "is powered off"
		if c.Array != "" {
			what += " (confirmed for array " + c.Array + ")"
		}
	}
	return "operator " + c.Operator + " confirmed at " + c.At.UTC().Format(time.RFC3339) + " that the node " + what +
		": " + strings.TrimSpace(c.Reason)
}

// Text describes an abandoned restore for logs, Events, status and history.
func (a Abandonment) Text() string {
	return "not restored: abandoned by " + a.Operator + " at " + a.At.UTC().Format(time.RFC3339) +
		" (" + strings.TrimSpace(a.Reason) + ")"
}

// AbandonedRestore returns the operator's abandonment of an array's
// restore for this fence record, if any (see AbandonRestore).
func (f *Fence) AbandonedRestore(array string) (Abandonment, bool) {
	for _, a := range f.Abandoned {
		if a.Array == array {
			return a, true
		}
	}
	return Abandonment{}, false
}
