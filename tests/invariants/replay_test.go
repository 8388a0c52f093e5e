package invariants

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/cluster/ledger"
	"github.com/fenced-project/fenced/tests/arraysim/simcore"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writeLog writes commands as a replica's Raft log (every entry in term 2)
// into dataDir/raft/raft.db, the way a replica stores them.
func writeLog(t *testing.T, dataDir string, cmds ...ledger.Command) {
	t.Helper()
	store, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dataDir, "raft", "raft.db")})
	require.NoError(t, err)
	defer store.Close()
	var logs []*raft.Log
	for i, c := range cmds {
		data, err := ledger.Encode(c)
		require.NoError(t, err, "command %d", i)
		logs = append(logs, &raft.Log{Index: uint64(i + 1), Term: 2, Type: raft.LogCommand, Data: data})
	}
	require.NoError(t, store.StoreLogs(logs))
}

// TestReplayedLedgerCatchesDeleteBeforeVerify replays a real ledger log
// (every command through the ledger's own FSM, as a replica applies it) and
// checks a pod delete against it: after the fenced step it passes, moved
// before the read-back it is a violation.
func TestReplayedLedgerCatchesDeleteBeforeVerify(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, mkdirAll(filepath.Join(dir, "raft")))
	meta := func(ms int) ledger.Meta { return ledger.Meta{V: ledger.Version, Term: 2, At: at(ms), By: "a"} }
	fv, cuts, checks := footprint()
	fv = fv[:1] // the volume on pflex-1
	id := arrayclients.Identity{Array: pflex, Family: arrayclients.PowerFlex, Node: node, ObjectID: sdcID, ResolvedAt: at(-1000)}
	plan := arrayclients.Plan{Array: pflex, Family: arrayclients.PowerFlex, Identity: id,
		Entries: json.RawMessage(`[{"volumeID":"v1","accessMode":"ReadWrite"}]`), Summary: "unmap 1 volume", CreatedAt: at(900),
		Volumes: cuts[pflex]}
	fenceID := ledger.FenceID(3)
	writeLog(t, dir,
		&ledger.LeaderEpoch{Meta: meta(-5000), LedgerVersion: ledger.Version},
		&ledger.SetIdentities{Meta: meta(-1000), Cluster: cl, Node: node, BootID: "boot-1", Identities: map[string]arrayclients.Identity{pflex: id}},
		&ledger.OpenFence{Meta: meta(1000), Cluster: cl, Node: node, Origin: ledger.OriginVerdict, Reason: "heartbeat lost", BootID: "boot-1", Plans: []arrayclients.Plan{plan},
			Footprint: fv, FootprintRecorded: true},
		&ledger.FenceStep{Meta: meta(2000), Cluster: cl, Node: node, FenceID: fenceID, From: ledger.StateIntent, To: ledger.StateFencing},
		&ledger.RecordArrayResult{Meta: meta(2600), Cluster: cl, Node: node, FenceID: fenceID, Expect: ledger.StateFencing, Array: pflex, Op: ledger.OpApply, OK: true},
		&ledger.RecordArrayResult{Meta: meta(3100), Cluster: cl, Node: node, FenceID: fenceID, Expect: ledger.StateFencing, Array: pflex, Op: ledger.OpVerify, OK: true,
			Verification: &arrayclients.Verification{Fenced: true, Volumes: checks[pflex], CheckedAt: at(3050)}},
		&ledger.FenceStep{Meta: meta(4000), Cluster: cl, Node: node, FenceID: fenceID, From: ledger.StateFencing, To: ledger.StateFenced},
		&ledger.FenceStep{Meta: meta(5000), Cluster: cl, Node: node, FenceID: fenceID, From: ledger.StateFenced, To: ledger.StateTainted},
	)
	h, err := ReplayDataDir(dir, time.Second)
	require.NoError(t, err)
	require.Len(t, h.Epochs, 1)
	require.Len(t, h.Fences, 1)
	f := h.Fences[0]
	require.Equal(t, ledger.StateTainted, f.State)
	require.Len(t, f.Steps, 4)
	require.Zero(t, h.Final.Rejected, "the log was refused: %+v", h.Final.Rejections)
	require.Len(t, h.AtFenced, 1, "the record as of its fenced step")
	require.Equal(t, ledger.StateFenced, h.AtFenced[0].State)
	require.Len(t, h.AtFenced[0].Results[pflex].Verification.Volumes, 1)

	in := Inputs{
		Kube: map[string][]KubeEvent{cl: {kube(5500, "fenced-a", "delete", "pods", "db", "web-0")}},
		Arrays: map[string][]simcore.AuditEntry{pflex: {
			audit(1, 2500, "a", "POST", "/api/instances/Volume::v1/action/removeMappedSdc", "-$.volumes[v1].mappedSdcInfo["+sdcID+"]"),
			audit(2, 3000, "a", "GET", "/api/instances/Volume::v1", ""),
		}},
		Placements: map[string][]Placement{cl: {{Time: at(-60000), Resource: "pods", Namespace: "db", Name: "web-0", Node: node},
			{Time: at(-50000), Resource: "volumeattachments", Name: fv[0].Attachment, Node: node}}},
		Ledger: h,
	}
	opts := good().opts
	rep := Check(in, opts)
	require.True(t, rep.OK(), rep.String())

	in.Kube[cl][0].Received = at(3500) // the delete before the fenced step
	rep = Check(in, opts)
	require.Len(t, rep.ByRule(RuleFenceBeforeDelete), 1, rep.String())

	in.Kube[cl][0].Received = at(5500)
	in.Arrays[pflex] = in.Arrays[pflex][:1] // no read-back on the array
	rep = Check(in, opts)
	v := rep.ByRule(RuleFenceBeforeDelete)
	require.Len(t, v, 1, rep.String())
	assert.Contains(t, v[0].Message, "array pflex-1: no successful read")

	// A VolumeAttachment to the node the record does not hold: a volume
	// the fence never cut.
	in.Arrays[pflex] = append(in.Arrays[pflex], audit(2, 3000, "a", "GET", "/api/instances/Volume::v1", ""))
	in.Placements[cl] = append(in.Placements[cl], Placement{Time: at(-40000), Resource: "volumeattachments", Name: "csi-0123", Node: node})
	rep = Check(in, opts)
	v = rep.ByRule(RuleFootprintCovered)
	require.Len(t, v, 1, rep.String())
	assert.Contains(t, v[0].Message, "VolumeAttachment csi-0123 to the node was not in its footprint")
}

func TestReplayRefusesALockedStore(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, mkdirAll(filepath.Join(dir, "raft")))
	store, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, "raft", "raft.db")})
	require.NoError(t, err)
	defer store.Close()
	_, err = ReplayDataDir(dir, 100*time.Millisecond)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "is the replica stopped?")
}
