package ledger

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// bufferSink is a raft.SnapshotSink over a buffer.
type bufferSink struct {
	bytes.Buffer
	cancelled bool
}

func (s *bufferSink) ID() string    { return "test" }
func (s *bufferSink) Close() error  { return nil }
func (s *bufferSink) Cancel() error { s.cancelled = true; return nil }

var _ raft.SnapshotSink = (*bufferSink)(nil)

func snapshotBytes(t testing.TB, f *FSM) []byte {
	snap, err := f.Snapshot()
	require.NoError(t, err)
	sink := &bufferSink{}
	require.NoError(t, snap.Persist(sink))
	snap.Release()
	return sink.Bytes()
}

func TestSnapshotRoundTrip(t *testing.T) {
	h := newHarness(t)
	replay(t, h, 7, 400) // a rich ledger from the generator
	want := h.dump()
	require.Contains(t, want, `"fence-`)

	buf := snapshotBytes(t, h.fsm)
	assert.True(t, strings.HasPrefix(string(buf), `{"format":"fenced-ledger","version":1,`))

	restored := New()
	restored.Apply(&raft.Log{Index: 1, Term: 1, Type: raft.LogCommand, Data: []byte{0x7f}}) // junk to be replaced
	require.NoError(t, restored.Restore(io.NopCloser(bytes.NewReader(buf))))
	got, err := restored.Dump()
	require.NoError(t, err)
	assert.Equal(t, want, string(got))
	assert.Equal(t, h.fsm.Copy(), restored.Copy())

	// The restored ledger goes on exactly like the original.
	h2 := &harness{t: t, fsm: restored, index: h.index, term: h.term}
	replayMore := func(x *harness) { replay(t, x, 8, 100) }
	replayMore(h)
	replayMore(h2)
	assert.Equal(t, h.dump(), h2.dump())
}

func TestFromState(t *testing.T) {
	h := newHarness(t)
	replay(t, h, 7, 200)
	l, err := FromState(h.fsm.Copy())
	require.NoError(t, err)
	assert.Equal(t, h.fsm.Copy(), l.Copy())
	assert.Equal(t, h.fsm.AppliedIndex(), l.AppliedIndex())

	// The ledger holds its own copy: changing s afterwards changes nothing.
	s := h.fsm.Copy()
	l, err = FromState(s)
	require.NoError(t, err)
	s.Clusters["later"] = &ClusterState{}
	assert.NotContains(t, l.Copy().Clusters, "later")
}

func TestSnapshotRejectsBadInput(t *testing.T) {
	h := newHarness(t)
	h.learn()
	good := snapshotBytes(t, h.fsm)
	lines := strings.SplitN(string(good), "\n", 2)
	tcs := []struct{ name, data, match string }{
		{"empty", "", "header"},
		{"not json", "hello\n{}", "header"},
		{"other format", `{"format":"x","version":1}` + "\n{}", `format "x"`},
		{"newer version", `{"format":"fenced-ledger","version":3}` + "\n{}", "layout version 3"},
		{"newer ledger version", `{"format":"fenced-ledger","version":2,"ledgerVersion":4}` + "\n{}", "ledger version 4"},
		{"version 2 without ledger version", `{"format":"fenced-ledger","version":2}` + "\n{}", "ledger version 0"},
		{"unknown header field", `{"format":"fenced-ledger","version":1,"compression":"zstd"}` + "\n{}", `unknown field "compression"`},
		{"unknown state field", lines[0] + "\n" + strings.Replace(lines[1], "{", `{"quotas":{},`, 1), `unknown field "quotas"`},
		{"trailing data", lines[0] + "\n" + strings.TrimSpace(lines[1]) + "{}", "data after the JSON value"},
		{"truncated state", lines[0] + "\n" + lines[1][:len(lines[1])/2], "decode ledger snapshot state"},
		{"index mismatch", `{"format":"fenced-ledger","version":1,"index":9,"term":1}` + "\n" + lines[1], "header says index 9"},
	}
	for _, tc := range tcs {
		t.Run(tc.name, func(t *testing.T) {
			f := New()
			before, _ := f.Dump()
			err := f.Restore(io.NopCloser(strings.NewReader(tc.data)))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.match)
			after, _ := f.Dump()
			assert.Equal(t, before, after, "a failed restore leaves the state alone")
		})
	}
}
