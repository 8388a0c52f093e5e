package ledger

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
)

// openWithFootprint learns n1 on a1 and a2 and opens a fence whose
// footprint is one volume on each, with a plan for each, in fencing.
func openWithFootprint(t *testing.T, h *harness, vols ...arrayclients.FootprintVolume) string {
	t.Helper()
	h.learn()
	h.must(&OpenFence{Meta: h.meta(), Cluster: "c1", Node: "n1", Origin: OriginVerdict, Reason: "dead",
		Plans: []arrayclients.Plan{plan("a1", "n1"), plan("a2", "n1")}, Footprint: vols, FootprintRecorded: true})
	id := h.fence().ID
	require.NoError(t, h.step(id, StateIntent, StateFencing))
	return id
}

func TestFootprintGapBlocksFenced(t *testing.T) {
	h := newHarness(t)
	gap := arrayclients.FootprintVolume{KubeVolume: arrayclients.KubeVolume{PV: "pv-nfs", Driver: arrayclients.DriverPowerMax},
		Gap: &arrayclients.Gap{Reason: arrayclients.GapNotFenceable, Detail: "open NFS export"}}
	id := openWithFootprint(t, h, footVolume("a1", "n1"), gap)
	for _, a := range []string{"a1", "a2"} {
		require.NoError(t, h.result(id, StateFencing, a, OpApply, nil))
		require.NoError(t, h.result(id, StateFencing, a, OpVerify, fencedRead(a, "n1", t0)))
	}
	err := h.step(id, StateFencing, StateFenced)
	require.ErrorIs(t, err, ErrBadTransition)
	assert.Contains(t, err.Error(), "pv-nfs")
	assert.Contains(t, err.Error(), "not-fenceable")
}

func TestFootprintVolumeWithoutCutBlocksFenced(t *testing.T) {
	h := newHarness(t)
	h.learn()
	p := plan("a1", "n1")
	p.Volumes[0].Cut, p.Volumes[0].Gap = "", &arrayclients.Gap{Reason: arrayclients.GapOtherIdentity, Detail: "mapped to host-x"}
	h.must(&OpenFence{Meta: h.meta(), Cluster: "c1", Node: "n1", Origin: OriginVerdict, Reason: "dead",
		Plans: []arrayclients.Plan{p, plan("a2", "n1")}, Footprint: []arrayclients.FootprintVolume{footVolume("a1", "n1")},
		FootprintRecorded: true})
	id := h.fence().ID
	require.NoError(t, h.step(id, StateIntent, StateFencing))
	for _, a := range []string{"a1", "a2"} {
		require.NoError(t, h.result(id, StateFencing, a, OpVerify, fencedRead(a, "n1", t0)))
	}
	err := h.step(id, StateFencing, StateFenced)
	require.ErrorIs(t, err, ErrBadTransition)
	assert.Contains(t, err.Error(), "other-identity")

	// A footprint volume on an array with no read-back of it is not cut.
	h2 := newHarness(t)
	id2 := openWithFootprint(t, h2, footVolume("a1", "n1"))
	v := fencedRead("a2", "n1", t0) // shows a2's volume, not a1's
	require.NoError(t, h2.result(id2, StateFencing, "a1", OpVerify, &arrayclients.Verification{Fenced: true, CheckedAt: t0}))
	require.NoError(t, h2.result(id2, StateFencing, "a2", OpVerify, v))
	err = h2.step(id2, StateFencing, StateFenced)
	require.ErrorIs(t, err, ErrBadTransition)
	assert.Contains(t, err.Error(), "does not show it")
}

func TestFootprintAmendAndReplan(t *testing.T) {
	h := newHarness(t)
	id := openWithFootprint(t, h, footVolume("a1", "n1"))
	require.NoError(t, h.result(id, StateFencing, "a1", OpApply, nil))

	// Replacing an operated plan needs Replan; with it the old plan is kept
	// for the undo and the array's results start over.
	newer := plan("a1", "n1")
	newer.Summary = "replanned"
	amend := &AmendFence{Meta: h.meta(), Cluster: "c1", Node: "n1", FenceID: id, Expect: StateFencing,
		Plans: []arrayclients.Plan{newer}}
	require.ErrorIs(t, h.apply(amend), ErrConflict)
	amend = &AmendFence{Meta: h.meta(), Cluster: "c1", Node: "n1", FenceID: id, Expect: StateFencing,
		Plans: []arrayclients.Plan{newer}, Replan: true, Footprint: []arrayclients.FootprintVolume{footVolume("a2", "n1")}}
	require.NoError(t, h.apply(amend))
	f := h.fence()
	require.Len(t, f.Superseded, 1)
	assert.Equal(t, "unmap 1 volume", f.Superseded[0].Summary)
	p, _ := f.plan("a1")
	assert.Equal(t, "replanned", p.Summary)
	assert.Nil(t, f.Results["a1"])
	require.Len(t, f.Footprint, 2)
	assert.Equal(t, "pv-n1-a1", f.Footprint[0].PV)
	assert.Equal(t, "pv-n1-a2", f.Footprint[1].PV)

	for _, a := range []string{"a1", "a2"} {
		require.NoError(t, h.result(id, StateFencing, a, OpVerify, fencedRead(a, "n1", t0)))
	}
	require.NoError(t, h.step(id, StateFencing, StateFenced))
}

func TestRestoreScopeRecordedWithUnfenceIntent(t *testing.T) {
	h := newHarness(t)
	id := openWithFootprint(t, h, footVolume("a1", "n1"))
	for _, a := range []string{"a1", "a2"} {
		require.NoError(t, h.result(id, StateFencing, a, OpVerify, fencedRead(a, "n1", t0)))
	}
	for _, s := range [][2]FenceState{{StateFencing, StateFenced}, {StateFenced, StateTainted}, {StateTainted, StateEvicted}} {
		require.NoError(t, h.step(id, s[0], s[1]))
	}
	scope := map[string]arrayclients.RestoreScope{"a1": {Wanted: []string{"pv-n1-a1"}}}
	require.NoError(t, h.apply(&FenceStep{Meta: h.meta(), Cluster: "c1", Node: "n1", FenceID: id,
		From: StateEvicted, To: StateUnfenceIntent, BootID: "boot-2", Note: "rebooted", Restore: scope}))
	assert.Equal(t, scope, h.fence().Restore)

	// A restore scope belongs to unfence-intent only.
	bad := &FenceStep{Meta: h.meta(), Cluster: "c1", Node: "n1", FenceID: id, From: StateUnfenceIntent,
		To: StateRestored, Restore: scope}
	require.ErrorIs(t, bad.Validate(), ErrInvalid)
}

func TestFootprintValidation(t *testing.T) {
	m := Meta{V: Version, Term: 1, At: t0, By: "r1"}
	v1 := m
	v1.V = 1
	placed := footVolume("a1", "n1")
	both := placed
	both.Gap = &arrayclients.Gap{Reason: arrayclients.GapBadHandle, Detail: "x"}
	neither := placed
	neither.Placements = nil
	wrongPV := footVolume("a1", "n1")
	wrongPV.Placements[0].Volume = "pv-other"
	tcs := []struct {
		name string
		cmd  Command
		want string
	}{
		{"footprint in a v1 command", &OpenFence{Meta: v1, Cluster: "c1", Node: "n1", Origin: OriginVerdict, Reason: "r",
			Footprint: []arrayclients.FootprintVolume{placed}}, "needs v 2"},
		{"gap and placements", &OpenFence{Meta: m, Cluster: "c1", Node: "n1", Origin: OriginVerdict, Reason: "r",
			Footprint: []arrayclients.FootprintVolume{both}}, "has a gap and placements"},
		{"neither gap nor placement", &OpenFence{Meta: m, Cluster: "c1", Node: "n1", Origin: OriginVerdict, Reason: "r",
			Footprint: []arrayclients.FootprintVolume{neither}}, "neither a gap nor a placement"},
		{"placement of another volume", &AmendFence{Meta: m, Cluster: "c1", Node: "n1", FenceID: "fence-1",
			Expect: StateFencing, Footprint: []arrayclients.FootprintVolume{wrongPV}}, "names volume"},
		{"volume twice", &OpenFence{Meta: m, Cluster: "c1", Node: "n1", Origin: OriginVerdict, Reason: "r",
			Footprint: []arrayclients.FootprintVolume{placed, placed}}, "twice"},
		{"replan without plans", &AmendFence{Meta: m, Cluster: "c1", Node: "n1", FenceID: "fence-1",
			Expect: StateFencing, Replan: true, FootprintRecorded: true}, "replan needs"},
		{"not found and identity", &SetIdentities{Meta: m, Cluster: "c1", Node: "n1",
			Identities: map[string]arrayclients.Identity{"a1": identity("a1", "n1")},
			NotFound:   map[string]string{"a1": "no host"}}, "both an identity and not found"},
		{"not found in v1", &SetIdentities{Meta: v1, Cluster: "c1", Node: "n1", NotFound: map[string]string{"a1": "no host"}},
			"needs v 2"},
	}
	for _, tc := range tcs {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cmd.Validate()
			require.ErrorIs(t, err, ErrInvalid)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestNotFoundRecordedWithIdentities(t *testing.T) {
	h := newHarness(t)
	h.must(&SetIdentities{Meta: h.meta(), Cluster: "c1", Node: "n1", BootID: "b",
		Identities: map[string]arrayclients.Identity{"a1": identity("a1", "n1")},
		NotFound:   map[string]string{"a2": "no host csi-node-x-127.0.0.1 or csi-node-x"}})
	h.fsm.Read(func(s *State) {
		n := s.Node("c1", "n1")
		assert.Equal(t, map[string]string{"a2": "no host csi-node-x-127.0.0.1 or csi-node-x"}, n.NotFound)
	})
	// The next learning replaces it.
	h.must(&SetIdentities{Meta: h.meta(), Cluster: "c1", Node: "n1", BootID: "b",
		Identities: map[string]arrayclients.Identity{"a1": identity("a1", "n1"), "a2": identity("a2", "n1")}})
	h.fsm.Read(func(s *State) { assert.Empty(t, s.Node("c1", "n1").NotFound) })
}

func TestOutOfServiceBeforeIsRecordedOnce(t *testing.T) {
	h := newHarness(t)
	id := openWithFootprint(t, h, footVolume("a1", "n1"), footVolume("a2", "n1"))
	for _, a := range []string{"a1", "a2"} {
		require.NoError(t, h.result(id, StateFencing, a, OpApply, nil))
		require.NoError(t, h.result(id, StateFencing, a, OpVerify, fencedRead(a, "n1", t0)))
	}
	yes, no := true, false
	// Only a step to fenced may carry it.
	err := h.apply(&FenceStep{Meta: h.meta(), Cluster: "c1", Node: "n1", FenceID: id, From: StateFencing, To: StateFailed,
		Note: "x", OutOfServiceBefore: &yes})
	require.ErrorIs(t, err, ErrInvalid)
	assert.Contains(t, err.Error(), "outOfServiceBefore")

	h.must(&FenceStep{Meta: h.meta(), Cluster: "c1", Node: "n1", FenceID: id, From: StateFencing, To: StateFenced,
		Note: "fenced", OutOfServiceBefore: &yes})
	require.NotNil(t, h.fence().OutOfServiceBefore)
	assert.True(t, *h.fence().OutOfServiceBefore)

	// A later fenced step (after a replan) does not change what was
	// recorded before fenced tainted the node.
	require.NoError(t, h.step(id, StateFenced, StateFencing))
	for _, a := range []string{"a1", "a2"} {
		require.NoError(t, h.result(id, StateFencing, a, OpVerify, fencedRead(a, "n1", t0)))
	}
	h.must(&FenceStep{Meta: h.meta(), Cluster: "c1", Node: "n1", FenceID: id, From: StateFencing, To: StateFenced,
		Note: "fenced again", OutOfServiceBefore: &no})
	assert.True(t, *h.fence().OutOfServiceBefore)
}

// TestRefenceAfterTaintAndEviction: a fence goes back to fencing from
// tainted or evicted (Kubernetes attached a volume to the node after the
// fence read its footprint) under version 2 rules only; the new volume
// must then be cut and read back before fenced again.
func TestRefenceAfterTaintAndEviction(t *testing.T) {
	for _, from := range []FenceState{StateTainted, StateEvicted} {
		t.Run(string(from), func(t *testing.T) {
			h := newHarness(t)
			id := openWithFootprint(t, h, footVolume("a1", "n1"))
			for _, a := range []string{"a1", "a2"} {
				require.NoError(t, h.result(id, StateFencing, a, OpApply, nil))
				require.NoError(t, h.result(id, StateFencing, a, OpVerify, fencedRead(a, "n1", t0)))
			}
			require.NoError(t, h.step(id, StateFencing, StateFenced))
			require.NoError(t, h.step(id, StateFenced, StateTainted))
			if from == StateEvicted {
				require.NoError(t, h.step(id, StateTainted, StateEvicted))
			}
			m := h.meta()
			m.V = 1
			err := h.apply(&FenceStep{Meta: m, Cluster: "c1", Node: "n1", FenceID: id, From: from, To: StateFencing, Note: "v1"})
			require.ErrorIs(t, err, ErrBadTransition, "version 1 rules have no refence after the taint")

			require.NoError(t, h.step(id, from, StateFencing))
			h.must(&AmendFence{Meta: h.meta(), Cluster: "c1", Node: "n1", FenceID: id, Expect: StateFencing,
				Footprint: []arrayclients.FootprintVolume{footVolume("a3", "n1")}})
			err = h.step(id, StateFencing, StateFenced)
			require.ErrorIs(t, err, ErrBadTransition, "the new volume is not cut yet")
			assert.Contains(t, err.Error(), "a3")
			require.ErrorIs(t, h.step(id, StateFencing, StateTainted), ErrBadTransition, "no taint before verified")
		})
	}
}

// SetIdentities records the digest of the inputs the identities were
// resolved from; anything but a hex SHA-256 is refused, naming the field.
func TestSetIdentitiesInputsDigest(t *testing.T) {
	h := newHarness(t)
	digest := strings.Repeat("0123456789abcdef", 4)
	h.must(&SetIdentities{Meta: h.meta(), Cluster: "c1", Node: "n1", BootID: "b",
		Identities: map[string]arrayclients.Identity{"a1": identity("a1", "n1")}, InputsDigest: digest})
	h.fsm.Read(func(s *State) { assert.Equal(t, digest, s.Node("c1", "n1").InputsDigest) })
	for _, bad := range []string{"abc", strings.Repeat("0123456789ABCDEF", 4), strings.Repeat("g", 64), strings.Repeat("a", 65)} {
		err := (&SetIdentities{Meta: h.meta(), Cluster: "c1", Node: "n1", BootID: "b", InputsDigest: bad}).Validate()
		require.ErrorIs(t, err, ErrInvalid, bad)
		assert.Contains(t, err.Error(), "inputsDigest")
	}
	// Learning without a digest (an older leader) clears it.
	h.must(&SetIdentities{Meta: h.meta(), Cluster: "c1", Node: "n1", BootID: "b",
		Identities: map[string]arrayclients.Identity{"a1": identity("a1", "n1")}})
	h.fsm.Read(func(s *State) { assert.Empty(t, s.Node("c1", "n1").InputsDigest) })
}
