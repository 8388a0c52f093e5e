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

// SnapshotVersion is the version of the snapshot layout this ledger writes
// for a group that runs ledger version 3 or later. Restore reads versions 1
// and 2 and refuses any other, and refuses fields it does not know.
//
//   - 1: the state of a ledger of version 1 or 2. Still written while the
//     group has not committed a ledger version (State.LedgerVersion is 0),
//     so a replica of an older build can restore it during an upgrade.
//   - 2: the header carries the ledger version of the state
//     (SnapshotHeader.LedgerVersion, 3 or later); a build that does not
//     apply that version refuses the snapshot.
const SnapshotVersion = 2

// SnapshotHeader is the first line of a snapshot.
type SnapshotHeader struct {
	Format  string `json:"format"`
	Version int    `json:"version"`
	// Index and Term are those of the last entry in the snapshot.
	Index uint64 `json:"index"`
	Term  uint64 `json:"term"`
	// LedgerVersion is the group ledger version of the state (version 2).
	LedgerVersion int `json:"ledgerVersion,omitempty"`
}

// Snapshot captures the state. It encodes it under the read lock, so Persist
// only writes bytes and Apply may go on meanwhile. A halted ledger refuses:
// its state is behind the index Raft would record for the snapshot.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.halt != nil {
		return nil, fmt.Errorf("snapshot: %w: %s", ErrHalted, f.halt)
	}
	return encodeSnapshot(f.state)
}

func encodeSnapshot(s *State) (*snapshot, error) {
	h := SnapshotHeader{Format: SnapshotFormat, Version: 1, Index: s.Index, Term: s.Term}
	if s.LedgerVersion != 0 {
		h.Version, h.LedgerVersion = SnapshotVersion, s.LedgerVersion
	}
	hdr, err := json.Marshal(h)
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
	if f.halt != nil && s.Index >= f.halt.Index {
		// The snapshot covers the entry this ledger could not apply.
		f.halt = nil
	}
	f.mu.Unlock()
	return nil
}

// ReadSnapshot decodes a snapshot written by Snapshot. It refuses a
// snapshot of a layout or ledger version it does not know, and a field it
// does not know, rather than drop what it cannot hold.
func ReadSnapshot(r io.Reader) (*State, error) {
	br := bufio.NewReader(r)
	line, err := br.ReadBytes('\n')
	if err != nil {
		return nil, fmt.Errorf("read ledger snapshot header: %w", err)
	}
	var hdr SnapshotHeader
	if err := strictJSON(line, &hdr); err != nil {
		return nil, fmt.Errorf("decode ledger snapshot header: %w", err)
	}
	if hdr.Format != SnapshotFormat {
		return nil, fmt.Errorf("ledger snapshot: format %q, want %q", hdr.Format, SnapshotFormat)
	}
	switch {
	case hdr.Version < 1 || hdr.Version > SnapshotVersion:
		return nil, fmt.Errorf("ledger snapshot: layout version %d, this build reads 1..%d", hdr.Version, SnapshotVersion)
	case hdr.Version == 1 && hdr.LedgerVersion != 0:
		return nil, fmt.Errorf("ledger snapshot: layout version 1 with ledgerVersion %d", hdr.LedgerVersion)
	case hdr.Version >= 2 && (hdr.LedgerVersion < 3 || hdr.LedgerVersion > Version):
		return nil, fmt.Errorf("ledger snapshot: ledger version %d, this build applies ledger versions %d..%d",
			hdr.LedgerVersion, MinVersion, Version)
	}
	body, err := io.ReadAll(br)
	if err != nil {
		return nil, fmt.Errorf("read ledger snapshot state: %w", err)
	}
	s := NewState()
	if err := strictJSON(body, s); err != nil {
		return nil, fmt.Errorf("decode ledger snapshot state: %w", err)
	}
	if s.Index != hdr.Index || s.Term != hdr.Term {
		return nil, fmt.Errorf("ledger snapshot: header says index %d term %d, state is at index %d term %d",
			hdr.Index, hdr.Term, s.Index, s.Term)
	}
	if s.LedgerVersion != hdr.LedgerVersion {
		return nil, fmt.Errorf("ledger snapshot: header says ledger version %d, state says %d", hdr.LedgerVersion, s.LedgerVersion)
	}
	s.normalize()
	return s, nil
}

// strictJSON decodes one JSON value that is all of buf but white space,
// refusing fields v does not have.
func strictJSON(buf []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(buf))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("data after the JSON value")
	}
	return nil
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
