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
	// halt is set by the first entry this build cannot apply; from then on
	// Apply applies nothing and Snapshot refuses.
	halt   *Halt
	onHalt func(Halt)
}

// Halt describes the first committed entry this build cannot apply: a body
// version newer than Version, or a type it does not know and may not skip.
// Every replica that can apply it does, so refusing it here would make this
// replica's ledger differ from the group's; the replica stops applying
// instead, and must be upgraded (see docs/operations.md).
type Halt struct {
	Index uint64      `json:"index"`
	Term  uint64      `json:"term"`
	Type  MessageType `json:"type"`
	// V is the entry's body version when it could be read (0 otherwise).
	V     int    `json:"v,omitempty"`
	Error string `json:"error"`
}

// String describes the halt for logs and status.
func (h Halt) String() string {
	return fmt.Sprintf("ledger halted at index %d (term %d): this build applies ledger versions %d..%d and cannot apply the %s entry: %s",
		h.Index, h.Term, MinVersion, Version, h.Type, h.Error)
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

// OnHalt sets a function called (once, under the ledger's lock: it must not
// read the ledger) when Apply meets an entry this build cannot apply. Set it
// before Raft starts.
func (f *FSM) OnHalt(fn func(Halt)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.onHalt = fn
}

// Halted returns the entry that stopped this ledger, or nil.
func (f *FSM) Halted() *Halt {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.halt == nil {
		return nil
	}
	h := *f.halt
	return &h
}

// CannotApply reports whether an Apply error means this build cannot apply
// the entry (a newer version or type), rather than a refusal that every
// replica makes alike.
func CannotApply(err error) bool {
	return errors.Is(err, ErrUnsupportedVersion) || errors.Is(err, ErrUnknownType)
}

// Apply applies one committed log entry. It returns nil when the command was
// applied (or skipped as an unknown ignorable type) and an error value when
// it was refused; a refusal is also recorded in the state. An entry this
// build cannot apply (CannotApply) halts the ledger: it is not recorded as a
// refusal, and neither it nor any later entry changes the state.
func (f *FSM) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.halt != nil {
		return fmt.Errorf("%w: entry %d not applied: %s", ErrHalted, l.Index, f.halt)
	}
	err := applyEntry(f.state, l.Index, l.Term, l.Data)
	if CannotApply(err) {
		h := Halt{Index: l.Index, Term: l.Term, Error: err.Error()}
		if len(l.Data) > 0 {
			h.Type = MessageType(l.Data[0])
			var m struct {
				V int `json:"v"`
			}
			if json.Unmarshal(l.Data[1:], &m) == nil {
				h.V = m.V
			}
		}
		f.halt = &h
		if f.onHalt != nil {
			f.onHalt(h)
		}
		return fmt.Errorf("%w: %s", ErrHalted, h)
	}
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
	case *SetLedgerVersion:
		return applySetLedgerVersion(s, c)
	case *Rescope:
		return applyRescope(s, index, c)
	case *AddPause:
		return applyAddPause(s, index, c)
	case *EndPauses:
		return applyEndPauses(s, index, c)
	case *ConfirmArray:
		return applyConfirmArray(s, index, c)
	case *AbandonRestore:
		return applyAbandonRestore(s, index, c)
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
