package ledger

import (
	"bytes"
	"encoding/json"
	"io"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
)

// FuzzApply feeds arbitrary entries to an FSM that already holds a fence
// history: Apply must never panic, the state must stay encodable, and a
// snapshot of it must restore to the same state.
func FuzzApply(f *testing.F) {
	seed := newHarness(f)
	replay(f, seed, 3, 30)
	for _, l := range seed.log {
		f.Add(l.Data, uint64(1))
	}
	f.Add([]byte{}, uint64(0))
	f.Add([]byte{byte(TypeFenceStep), 'n', 'u', 'l', 'l'}, uint64(2))
	f.Add([]byte{byte(IgnorableFlag | 9), '{'}, uint64(1))

	base := snapshotBytes(f, seed.fsm)
	f.Fuzz(func(t *testing.T, data []byte, term uint64) {
		fsm := New()
		require.NoError(t, fsm.Restore(io.NopCloser(bytes.NewReader(base))))
		index := seed.index
		// Try the entry both with the seed's term and with its own.
		var m struct {
			Term uint64 `json:"term"`
		}
		if len(data) > 1 && json.Unmarshal(data[1:], &m) == nil && m.Term != 0 {
			term = m.Term
		}
		for _, tm := range []uint64{seed.term, term} {
			index++
			res := fsm.Apply(&raft.Log{Index: index, Term: tm, Type: raft.LogCommand, Data: data})
			if res != nil {
				_, isErr := res.(error)
				require.True(t, isErr, "Apply returned %T", res)
			}
		}
		dump, err := fsm.Dump()
		require.NoError(t, err)
		restored := New()
		require.NoError(t, restored.Restore(io.NopCloser(bytes.NewReader(snapshotBytes(t, fsm)))))
		again, err := restored.Dump()
		require.NoError(t, err)
		require.Equal(t, string(dump), string(again))
	})
}
