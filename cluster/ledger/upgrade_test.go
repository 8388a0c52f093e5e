package ledger

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
)

// v1Dir holds a ledger written by fenced before storage footprints (see
// its README): the log a leader wrote and that version's snapshot.
var v1Dir = filepath.Join("testdata", "v1-upgrade")

// v1Log reads the version 1 log entries.
func v1Log(t *testing.T) []*raft.Log {
	t.Helper()
	f, err := os.Open(filepath.Join(v1Dir, "log.jsonl"))
	require.NoError(t, err)
	defer f.Close()
	var out []*raft.Log
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e struct {
			Index uint64 `json:"index"`
			Term  uint64 `json:"term"`
			Data  string `json:"data"`
		}
		require.NoError(t, json.Unmarshal(sc.Bytes(), &e))
		data, err := base64.StdEncoding.DecodeString(e.Data)
		require.NoError(t, err)
		out = append(out, &raft.Log{Index: e.Index, Term: e.Term, Type: raft.LogCommand, Data: data})
	}
	require.NoError(t, sc.Err())
	return out
}

// TestV1LedgerStaysReadable: the log and the snapshot a version 1 leader
// wrote replay into this ledger without a refusal and to the same state,
// with every open fence where that version left it.
func TestV1LedgerStaysReadable(t *testing.T) {
	logs := v1Log(t)
	require.Len(t, logs, 106)
	replayed := New()
	for _, l := range logs {
		if res := replayed.Apply(l); res != nil {
			require.NoError(t, res.(error), "entry %d", l.Index)
		}
	}
	st := replayed.Copy()
	assert.Zero(t, st.Rejected)

	snap, err := os.Open(filepath.Join(v1Dir, "snapshot"))
	require.NoError(t, err)
	restored := New()
	require.NoError(t, restored.Restore(snap))
	a, err := replayed.Dump()
	require.NoError(t, err)
	b, err := restored.Dump()
	require.NoError(t, err)
	assert.JSONEq(t, string(a), string(b), "the v1 snapshot restores to the state the v1 log replays to")

	want := map[string]FenceState{"worker-1": StateIntent, "worker-2": StateFencing, "worker-3": StateFenced,
		"worker-4": StateTainted, "worker-5": StateEvicted, "worker-6": StateUnfenceIntent}
	for node, state := range want {
		n := st.Node("e2e", node)
		require.NotNil(t, n, node)
		require.NotNil(t, n.Fence, node)
		assert.Equal(t, state, n.Fence.State, node)
		assert.Len(t, n.Fence.Plans, 5, node)
		assert.False(t, n.Fence.FootprintRecorded, node)
		for _, p := range n.Fence.Plans {
			assert.Empty(t, p.Volumes, "%s %s: a v1 plan has no footprint volumes", node, p.Array)
			assert.NotEmpty(t, p.Entries)
		}
	}
	require.Len(t, st.Node("e2e", "worker-7").History, 1)
	assert.Equal(t, StateClosed, st.Node("e2e", "worker-7").History[0].State)
}

// TestV1FenceResumesUnderVersion2: a version 2 leader may not step a
// version 1 record to fenced before it adds the footprint; once added (and
// every array read back) it may. A version 1 leader's step keeps version
// 1's rule, so replicas of both versions apply the same log alike.
func TestV1FenceResumesUnderVersion2(t *testing.T) {
	fsm := New()
	logs := v1Log(t)
	for _, l := range logs {
		fsm.Apply(l)
	}
	index := logs[len(logs)-1].Index
	term := logs[len(logs)-1].Term + 1
	apply := func(c Command) error {
		index++
		buf, err := Encode(c)
		require.NoError(t, err)
		if res := fsm.Apply(&raft.Log{Index: index, Term: term, Type: raft.LogCommand, Data: buf}); res != nil {
			return res.(error)
		}
		return nil
	}
	at := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	meta := func(v int) Meta {
		at = at.Add(time.Second)
		return Meta{V: v, Term: term, At: at, By: "b"}
	}
	require.NoError(t, apply(&LeaderEpoch{Meta: meta(2), LedgerVersion: 2}))

	f := fsm.Copy().Node("e2e", "worker-2").Fence
	require.NotNil(t, f)
	require.Equal(t, StateFencing, f.State)
	for _, p := range f.Plans {
		if r := f.Results[p.Array]; r == nil || !r.Verified {
			require.NoError(t, apply(&RecordArrayResult{Meta: meta(2), Cluster: "e2e", Node: "worker-2", FenceID: f.ID,
				Expect: StateFencing, Array: p.Array, Op: OpVerify, OK: true,
				Verification: &arrayclients.Verification{Fenced: true, CheckedAt: at}}))
		}
	}
	step := func(v int) error {
		return apply(&FenceStep{Meta: meta(v), Cluster: "e2e", Node: "worker-2", FenceID: f.ID, From: StateFencing,
			To: StateFenced, Note: "verified"})
	}
	err := step(2)
	require.ErrorIs(t, err, ErrBadTransition)
	assert.Contains(t, err.Error(), "no storage footprint is recorded")

	require.NoError(t, apply(&AmendFence{Meta: meta(2), Cluster: "e2e", Node: "worker-2", FenceID: f.ID,
		Expect: StateFencing, FootprintRecorded: true}))
	require.NoError(t, step(2))

	// The same record under a version 1 leader: its rule, unchanged.
	fsm2 := New()
	for _, l := range logs {
		fsm2.Apply(l)
	}
	fsm, index = fsm2, logs[len(logs)-1].Index
	for _, p := range f.Plans {
		if r := f.Results[p.Array]; r == nil || !r.Verified {
			require.NoError(t, apply(&RecordArrayResult{Meta: meta(1), Cluster: "e2e", Node: "worker-2", FenceID: f.ID,
				Expect: StateFencing, Array: p.Array, Op: OpVerify, OK: true,
				Verification: &arrayclients.Verification{Fenced: true, CheckedAt: at}}))
		}
	}
	require.NoError(t, step(1))
}

// TestForcedUnfenceField: steps written before FenceStep.Forced decode as
// not forced (the v1 ledger has forced unfences only in their note), and
// the field is refused on anything but an operator's step to
// unfence-intent.
func TestForcedUnfenceField(t *testing.T) {
	replayed := New()
	for _, l := range v1Log(t) {
		replayed.Apply(l)
	}
	st := replayed.Copy()
	for _, cl := range st.Clusters {
		for _, n := range cl.Nodes {
			for _, f := range append(n.History, n.Fence) {
				if f == nil {
					continue
				}
				for _, s := range f.Steps {
					assert.False(t, s.Forced || s.Unverified, "fence %s step to %s", f.ID, s.To)
				}
			}
		}
	}
	for _, a := range st.Actions {
		assert.False(t, a.Forced || a.Unverified)
	}

	step := FenceStep{Cluster: "c1", Node: "n1", FenceID: "f-1", From: StateEvicted, To: StateUnfenceIntent,
		Operator: "alice", Note: "forced: by hand", Forced: true}
	step.Meta = Meta{V: 2, Term: 1, By: "r1", At: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)}
	require.NoError(t, step.Validate())
	bad := step
	bad.Operator = ""
	require.ErrorContains(t, bad.Validate(), "forced is given only with an operator's step")
	bad = step
	bad.To = StateAborted
	require.ErrorContains(t, bad.Validate(), "forced is given only")
	bad = step
	bad.Forced, bad.Unverified = false, true
	require.ErrorContains(t, bad.Validate(), "unverified is given only with forced")
}
