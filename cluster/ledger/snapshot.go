package ledger

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/hashicorp/raft"
)

// SnapshotFormat names the ledger's snapshot format in its header.
const SnapshotFormat = "fenced-ledger"

// SnapshotVersion is the version of the snapshot layout this ledger writes.
// Restore reads every version up to it.
const SnapshotVersion = 1

// SnapshotHeader is the first line of a snapshot.
type SnapshotHeader struct {
	Format  string `json:"format"`
	Version int    `json:"version"`
	// Index and Term are those of the last entry in the snapshot.
	Index uint64 `json:"index"`
	Term  uint64 `json:"term"`
}

// Snapshot captures the state. It encodes it under the read lock, so Persist
// only writes bytes and Apply may go on meanwhile.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return encodeSnapshot(f.state)
}

func encodeSnapshot(s *State) (*snapshot, error) {
	hdr, err := json.Marshal(SnapshotHeader{Format: SnapshotFormat, Version: SnapshotVersion, Index: s.Index, Term: s.Term})
	if err != nil {
		return nil, fmt.Errorf("snapshot header: %w", err)
	}
	body, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("snapshot state at index %d: %w", s.Index, err)
	}
	return &snapshot{header: hdr, body: body}, nil
}

type snapshot struct {
	header, body []byte
}

var _ raft.FSMSnapshot = (*snapshot)(nil)

// Persist writes the header line and the state.
func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	err := s.writeTo(sink)
	if err != nil {
		return errors.Join(err, sink.Cancel())
	}
	return sink.Close()
}

// writeTo writes the snapshot to w.
func (s *snapshot) writeTo(w io.Writer) error {
	for _, part := range [][]byte{s.header, {'\n'}, s.body, {'\n'}} {
		if _, err := w.Write(part); err != nil {
			return fmt.Errorf("write ledger snapshot: %w", err)
		}
	}
	return nil
}

// Release implements raft.FSMSnapshot.
func (s *snapshot) Release() {}

// Restore replaces the state with the one in the snapshot. It decodes into
// a fresh State and swaps it in only when the snapshot is whole and valid.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	s, err := ReadSnapshot(rc)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.state = s
	f.mu.Unlock()
	return nil
}

// ReadSnapshot decodes a snapshot written by Snapshot.
func ReadSnapshot(r io.Reader) (*State, error) {
	br := bufio.NewReader(r)
	line, err := br.ReadBytes('\n')
	if err != nil {
		return nil, fmt.Errorf("read ledger snapshot header: %w", err)
	}
	var hdr SnapshotHeader
	if err := json.Unmarshal(line, &hdr); err != nil {
		return nil, fmt.Errorf("decode ledger snapshot header: %w", err)
	}
	if hdr.Format != SnapshotFormat {
		return nil, fmt.Errorf("ledger snapshot: format %q, want %q", hdr.Format, SnapshotFormat)
	}
	if hdr.Version < 1 || hdr.Version > SnapshotVersion {
		return nil, fmt.Errorf("ledger snapshot: version %d, this ledger reads 1..%d", hdr.Version, SnapshotVersion)
	}
	s := NewState()
	dec := json.NewDecoder(br)
	if err := dec.Decode(s); err != nil {
		return nil, fmt.Errorf("decode ledger snapshot state: %w", err)
	}
	if s.Index != hdr.Index || s.Term != hdr.Term {
		return nil, fmt.Errorf("ledger snapshot: header says index %d term %d, state is at index %d term %d",
			hdr.Index, hdr.Term, s.Index, s.Term)
	}
	s.normalize()
	return s, nil
}

// FromState returns a ledger holding a copy of s, made by writing s as a
// snapshot and restoring it as a replica restores one. Tools and tests use
// it to start from a known state.
func FromState(s *State) (*FSM, error) {
	snap, err := encodeSnapshot(s)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := snap.writeTo(&buf); err != nil {
		return nil, err
	}
	f := New()
	if err := f.Restore(io.NopCloser(&buf)); err != nil {
		return nil, fmt.Errorf("restore the state at index %d: %w", s.Index, err)
	}
	return f, nil
}
