package ledger

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/hashicorp/raft"
)

// FSM is the ledger as a raft.FSM. Apply, Snapshot and Restore are called by
// Raft; the read methods may be called from any goroutine.
type FSM struct {
	mu    sync.RWMutex
	state *State
}

var _ raft.FSM = (*FSM)(nil)

// New returns an FSM holding an empty ledger.
func New() *FSM {
	return &FSM{state: NewState()}
}

// FenceID is the ID of the fence record opened by the entry at index.
func FenceID(index uint64) string {
	return fmt.Sprintf("fence-%d", index)
}

// Apply applies one committed log entry. It returns nil when the command was
// applied (or skipped as an unknown ignorable type) and an error value when
// it was refused; a refusal is also recorded in the state.
func (f *FSM) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	err := applyEntry(f.state, l.Index, l.Term, l.Data)
	f.state.Index, f.state.Term = l.Index, l.Term
	if err != nil {
		f.state.Rejected++
		t := MessageType(0)
		if len(l.Data) > 0 {
			t = MessageType(l.Data[0])
		}
		f.state.Rejections = appendBounded(f.state.Rejections,
			Rejection{Index: l.Index, Term: l.Term, Type: t, Error: err.Error()}, MaxRejections)
		return err
	}
	return nil
}

// applyEntry decodes and applies one entry. Every applyX function checks
// everything before it changes anything, so a refused command leaves the
// state as it was.
func applyEntry(s *State, index, term uint64, data []byte) error {
	c, err := Decode(data)
	if errors.Is(err, ErrUnknownType) && MessageType(data[0])&IgnorableFlag != 0 {
		s.Skipped++
		return nil
	}
	if err != nil {
		return err
	}
	if m := c.meta(); m.Term != term {
		return fmt.Errorf("%s: %w: written in term %d, committed in term %d", c.Type(), ErrStaleTerm, m.Term, term)
	}
	switch c := c.(type) {
	case *LeaderEpoch:
		return applyLeaderEpoch(s, index, c)
	case *SetIdentities:
		return applySetIdentities(s, c)
	case *OpenFence:
		return applyOpenFence(s, index, c)
	case *AmendFence:
		return applyAmendFence(s, index, c)
	case *FenceStep:
		return applyFenceStep(s, index, c)
	case *RecordArrayResult:
		return applyArrayResult(s, c)
	case *SetPause:
		return applySetPause(s, index, c)
	case *Observe:
		return applyObserve(s, index, c)
	case *OperatorNote:
		return applyOperatorNote(s, index, c)
	case *ForgetNode:
		return applyForgetNode(s, index, c)
	}
	return fmt.Errorf("%w: %d has no apply function", ErrUnknownType, uint8(c.Type()))
}

func appendBounded[T any](list []T, v T, limit int) []T {
	list = append(list, v)
	if len(list) > limit {
		list = append(list[:0:0], list[len(list)-limit:]...)
	}
	return list
}

// Read calls fn with the current state under the read lock. fn must not
// change the state nor keep references into it after it returns.
func (f *FSM) Read(fn func(s *State)) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	fn(f.state)
}

// Copy returns a deep copy of the current state.
func (f *FSM) Copy() *State {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.state.Clone()
}

// Dump returns the state as indented JSON. Two replicas that applied the same
// log have identical dumps.
func (f *FSM) Dump() ([]byte, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return json.MarshalIndent(f.state, "", "  ")
}

// AppliedIndex is the index of the last entry applied to the ledger.
func (f *FSM) AppliedIndex() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.state.Index
}

// Clone returns a deep copy of s.
func (s *State) Clone() *State {
	buf, err := json.Marshal(s)
	if err != nil {
		// A State holds only JSON-encodable values; failing here is a bug.
		panic(fmt.Sprintf("ledger: clone state: %v", err))
	}
	c := NewState()
	if err := json.Unmarshal(buf, c); err != nil {
		panic(fmt.Sprintf("ledger: clone state: %v", err))
	}
	c.normalize()
	return c
}

// normalize replaces nil maps with empty ones after decoding.
func (s *State) normalize() {
	if s.Clusters == nil {
		s.Clusters = map[string]*ClusterState{}
	}
	if s.Replicas == nil {
		s.Replicas = map[string]*ReplicaView{}
	}
	for _, c := range s.Clusters {
		if c.Nodes == nil {
			c.Nodes = map[string]*NodeState{}
		}
	}
	for _, r := range s.Replicas {
		if r.Observations == nil {
			r.Observations = map[string]Observation{}
		}
	}
}
