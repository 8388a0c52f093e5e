package ledger

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// harness applies commands to an FSM as Raft would, keeping the log.
type harness struct {
	t     testing.TB
	fsm   *FSM
	index uint64
	term  uint64
	log   []*raft.Log
}

func newHarness(t testing.TB) *harness {
	return &harness{t: t, fsm: New(), term: 1}
}

// meta returns the Meta a leader of the current term writes now.
func (h *harness) meta() Meta {
	return Meta{V: Version, Term: h.term, At: t0.Add(time.Duration(h.index+1) * time.Second), By: "r1"}
}

// metaV is meta with body version v.
func (h *harness) metaV(v int) Meta {
	m := h.meta()
	m.V = v
	return m
}

// raw appends an entry with these bytes and applies it.
func (h *harness) raw(data []byte) error {
	h.index++
	l := &raft.Log{Index: h.index, Term: h.term, Type: raft.LogCommand, Data: data}
	h.log = append(h.log, l)
	res := h.fsm.Apply(l)
	if res == nil {
		return nil
	}
	err, ok := res.(error)
	require.True(h.t, ok, "Apply returned %T", res)
	return err
}

// apply encodes c (without validating, to let tests send bad commands) and applies it.
func (h *harness) apply(c Command) error {
	body, err := json.Marshal(c)
	require.NoError(h.t, err)
	return h.raw(append([]byte{byte(c.Type())}, body...))
}

func (h *harness) must(c Command) {
	h.t.Helper()
	require.NoError(h.t, h.apply(c))
}

func (h *harness) dump() string {
	b, err := h.fsm.Dump()
	require.NoError(h.t, err)
	return string(b)
}

func identity(array, node string) arrayclients.Identity {
	return arrayclients.Identity{Array: array, Family: arrayclients.PowerStore, Node: node,
		ObjectID: "host-" + node, ObjectName: node, Keys: []string{"iqn.2025-01.example:" + node}, ResolvedAt: t0}
}

func plan(array, node string) arrayclients.Plan {
	ref := footVolume(array, node).Placements[0].VolumeRef
	return arrayclients.Plan{Array: array, Family: arrayclients.PowerStore, Identity: identity(array, node),
		Entries: json.RawMessage(`[{"volume":"vol-1","access":"rw"}]`), Summary: "unmap 1 volume", CreatedAt: t0,
		Volumes: []arrayclients.VolumeCut{{VolumeRef: ref, Cut: arrayclients.CutHostInitiators}}}
}

// footVolume is the footprint volume of node on array: PV pv-<node>-<array>.
func footVolume(array, node string) arrayclients.FootprintVolume {
	pv := "pv-" + node + "-" + array
	return arrayclients.FootprintVolume{
		KubeVolume: arrayclients.KubeVolume{PV: pv, Attachment: "va-" + pv, Driver: arrayclients.DriverPowerStore,
			Handle: "uuid-" + pv + "/" + array + "/scsi", Attached: true},
		Placements: []arrayclients.Placement{{Array: array, VolumeRef: arrayclients.VolumeRef{Volume: pv,
			Object: "uuid-" + pv, Protocol: arrayclients.ProtocolBlock, Attached: true}}},
	}
}

// fencedRead is a fence read-back of array for node: fenced, with the
// node's footprint volume there cut.
func fencedRead(array, node string, at time.Time) *arrayclients.Verification {
	return &arrayclients.Verification{Fenced: true, CheckedAt: at,
		Volumes: []arrayclients.VolumeCheck{{Volume: "pv-" + node + "-" + array, Object: "uuid-pv-" + node + "-" + array}}}
}

// learn records identities of node n1 on arrays a1 and a2.
func (h *harness) learn() {
	h.must(&SetIdentities{Meta: h.meta(), Cluster: "c1", Node: "n1", BootID: "boot-1",
		Identities: map[string]arrayclients.Identity{"a1": identity("a1", "n1"), "a2": identity("a2", "n1")}})
}

func (h *harness) fence() *Fence {
	var f *Fence
	h.fsm.Read(func(s *State) {
		if n := s.Node("c1", "n1"); n != nil && n.Fence != nil {
			f = n.Fence
		}
	})
	return f
}

func (h *harness) step(id string, from, to FenceState) error {
	return h.apply(&FenceStep{Meta: h.meta(), Cluster: "c1", Node: "n1", FenceID: id, From: from, To: to,
		Note: "test " + string(to)})
}

func (h *harness) result(id string, expect FenceState, array string, op ArrayOp, v *arrayclients.Verification) error {
	return h.apply(&RecordArrayResult{Meta: h.meta(), Cluster: "c1", Node: "n1", FenceID: id, Expect: expect,
		Array: array, Op: op, OK: true, Verification: v})
}

func timeSeconds(n int) time.Duration { return time.Duration(n) * time.Second }
