package powerflex_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/arrayclients/internal/arraytest"
	"github.com/fenced-project/fenced/arrayclients/powerflex"
	"github.com/fenced-project/fenced/tests/csidriver"
)

// pflexNVMeID is csi-vxflexos's NVMe/TCP node ID: "<node IP>-<hex
// sha256 of the Node UID>" cut to 31 characters (dell/csi-powerflex
// service/service.go generateNodeID).
func pflexNVMeID(ip, uid string) string {
	sum := sha256.Sum256([]byte(uid))
	return (ip + "-" + hex.EncodeToString(sum[:]))[:31]
}

var (
	pflexNVMe2 = pflexNVMeID("127.0.10.2", "7d0e2c1a-5b4f-4e3d-9c2b-1a0f9e8d7c62")
	pflexNVMe3 = pflexNVMeID("127.0.10.3", "8e1f3d2b-6c5a-4f4e-8d3c-2b1a0f9e8d73")
)

// pflexNVMeFixture: worker-1 runs an SDC; worker-2 and worker-3 are
// NVMe/TCP nodes whose NVMe hosts csi-vxflexos created under their node
// IDs. worker-2 has four volumes (one read-only with limits, one outside
// any footprint) and an NFS export naming its IP.
var pflexNVMeFixture = fmt.Sprintf(`
nodes:
  - {name: worker-1, ip: 127.0.10.1, sdcGUID: 6A1B0001-0000-4000-8000-000000000001}
arrays:
  - name: pflex-1
    family: powerflex
    spec:
      systems: [{id: 1a2b3c4d5e6f7a8b, name: sys-1}]
      perNode: {volumes: 1}
      sdcs:
        - {name: %[1]s, hostType: NVMeHost, nqn: "nqn.2014-08.org.nvmexpress:uuid:worker-2"}
        - {name: %[2]s, hostType: NVMeHost, nqn: "nqn.2014-08.org.nvmexpress:uuid:worker-3"}
      volumes:
        - {name: nvme-moved, mappings: [{sdc: %[1]s}]}
        - {name: nvme-kept, mappings: [{sdc: %[1]s, accessMode: ReadOnly, limitIops: 500, limitBwInMbps: 10}]}
        - {name: nvme-unwanted, mappings: [{sdc: %[1]s}]}
        - {name: nvme-extra, mappings: [{sdc: %[1]s}]}
        - {name: nvme-other, mappings: [{sdc: %[2]s}]}
        - {name: nvme-free}
      fileSystems:
        - name: fs-w2
          export: {readWriteRootHosts: [127.0.10.2/255.255.255.255]}
`, pflexNVMe2, pflexNVMe3)

func pflexNVMeNode(name, ip, nodeID string) arrayclients.Node {
	return arrayclients.Node{Cluster: "c1", Name: name, Addresses: []string{ip},
		CSINodeIDs: map[string]string{arrayclients.DriverPowerFlex: nodeID}}
}

// pflexHostOf returns the ID of the host (SDC or NVMe host) with the name.
func pflexHostOf(t testing.TB, e pflexEnv, name string) string {
	t.Helper()
	id, ok := e.sim.SDCID(name)
	require.True(t, ok, name)
	return id
}

// A node whose csi-vxflexos node ID is the name of an NVMe host resolves to
// it (kind nvme-host) with its IPs as keys; a node ID that only shares a
// prefix with it does not; health is unknown.
func TestPowerFlexNVMeResolve(t *testing.T) {
	ctx := context.Background()
	e := startPowerFlex(t, pflexNVMeFixture, arrayclients.Options{}, 5*time.Second)
	id, err := e.adapter.Resolve(ctx, pflexNVMeNode("worker-2", "127.0.10.2", pflexNVMe2))
	require.NoError(t, err)
	assert.Equal(t, powerflex.PowerFlexKindNVMeHost, id.Kind)
	assert.Equal(t, pflexHostOf(t, e, pflexNVMe2), id.ObjectID)
	assert.Equal(t, pflexNVMe2, id.ObjectName)
	assert.Equal(t, []string{"127.0.10.2"}, id.Keys)

	// Exact names only: a shorter ID names no host, and the node is then
	// known by its IPs (as an NFS-only node is).
	id2, err := e.adapter.Resolve(ctx, pflexNVMeNode("worker-2", "127.0.10.2", pflexNVMe2[:30]))
	require.NoError(t, err)
	assert.Equal(t, powerflex.PowerFlexKindNFSClient, id2.Kind)
	_, err = e.adapter.Resolve(ctx, pflexNVMeNode("worker-2", "", strings.ToUpper(pflexNVMe2)))
	require.ErrorIs(t, err, arrayclients.ErrNoIdentity, "names are compared exactly")

	// An override may name the NVMe host too.
	id3, err := e.adapter.Resolve(ctx, arrayclients.Node{Cluster: "c1", Name: "worker-2", Override: pflexNVMe2})
	require.NoError(t, err)
	assert.Equal(t, powerflex.PowerFlexKindNVMeHost, id3.Kind)
	assert.Equal(t, id.ObjectID, id3.ObjectID)

	h, err := e.adapter.Health(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, arrayclients.ConnectivityUnknown, h.Connectivity)
	assert.Equal(t, arrayclients.IOUnknown, h.IO)
	assert.Contains(t, h.Reason, "NVMe")
	assert.Zero(t, pflexWriteRequests(e))
}

// An NVMe/TCP node is fenced by unmapping its volumes from its NVMe host
// (removeMappedHost), recorded with access mode and limits before any
// write and read back per volume; its NFS export loses its IP. Unfence
// reconciles: a volume that moved to another host stays there, an
// unwanted one is not given back, the others come back with their mode
// and limits, and a repeat writes nothing.
func TestPowerFlexNVMeFenceAndUnfence(t *testing.T) {
	ctx := context.Background()
	e := startPowerFlex(t, pflexNVMeFixture, arrayclients.Options{}, 5*time.Second)
	w2, w3 := pflexHostOf(t, e, pflexNVMe2), pflexHostOf(t, e, pflexNVMe3)
	moved, kept, unwanted := pflexVolumeID(t, e, "nvme-moved"), pflexVolumeID(t, e, "nvme-kept"), pflexVolumeID(t, e, "nvme-unwanted")
	extra, other, free := pflexVolumeID(t, e, "nvme-extra"), pflexVolumeID(t, e, "nvme-other"), pflexVolumeID(t, e, "nvme-free")
	fs := pflexFS(t, e, "fs-w2")
	node := pflexNVMeNode("worker-2", "127.0.10.2", pflexNVMe2)

	id, err := e.adapter.Resolve(ctx, node)
	require.NoError(t, err)
	vols := []arrayclients.VolumeRef{
		arraytest.BlockRef("pv-moved", moved, true), arraytest.BlockRef("pv-kept", kept, true), arraytest.BlockRef("pv-unwanted", unwanted, true),
		arraytest.BlockRef("pv-other", other, true), arraytest.BlockRef("pv-free", free, false), nfsRef("pv-nfs", fs, false),
	}
	plan, err := e.adapter.Plan(ctx, id, vols)
	require.NoError(t, err)
	assert.Zero(t, pflexWriteRequests(e), "Plan never writes")
	plan = arraytest.RoundTrip(t, plan)
	assert.Contains(t, plan.Summary, "from NVMe host "+pflexNVMe2)
	for pv, want := range map[string]arrayclients.Cut{"pv-moved": arrayclients.CutNVMeUnmap, "pv-kept": arrayclients.CutNVMeUnmap,
		"pv-unwanted": arrayclients.CutNVMeUnmap, "pv-free": arrayclients.CutNotMapped, "pv-nfs": arrayclients.CutNFSExportHosts} {
		vc := arraytest.CutOf(t, plan, pv)
		assert.Equal(t, want, vc.Cut, pv)
		assert.Nil(t, vc.Gap, pv)
	}
	gap := arraytest.CutOf(t, plan, "pv-other").Gap
	require.NotNil(t, gap, "attached, but given only to another NVMe host")
	assert.Equal(t, arrayclients.GapOtherIdentity, gap.Reason)
	assert.Contains(t, gap.Detail, "nvme-host "+pflexNVMe3+" ("+w3+")")

	// What Undo needs is in the plan, before any write.
	var entries powerflex.PowerFlexEntries
	require.NoError(t, json.Unmarshal(plan.Entries, &entries))
	assert.Equal(t, w2, entries.SdcID)
	assert.Equal(t, "NVMeHost", entries.HostType)
	byVol := map[string]powerflex.PowerFlexMapping{}
	for _, m := range entries.Mappings {
		byVol[m.VolumeID] = m
	}
	assert.Len(t, byVol, 4, "every volume the NVMe host has, footprint or not")
	assert.Equal(t, powerflex.PowerFlexMapping{VolumeID: kept, VolumeName: "nvme-kept", AccessMode: "ReadOnly",
		LimitIops: 500, LimitBwInMbps: 10}, byVol[kept])
	assert.Contains(t, byVol, extra)

	v, err := e.adapter.Verify(ctx, plan)
	require.NoError(t, err)
	assert.False(t, v.Fenced)

	seq := e.srv.LastSeq()
	require.NoError(t, e.adapter.Apply(ctx, plan))
	var unmaps int
	for _, w := range arraytest.WritesSince(e.srv, seq) {
		if strings.Contains(w.Path, "/action/removeMappedHost") {
			unmaps++
			assert.Contains(t, w.Body, `"hostId":"`+w2+`"`)
		}
		assert.NotContains(t, w.Path, "removeMappedSdc", "an NVMe host is unmapped with the NVMe call")
	}
	assert.Equal(t, 4, unmaps)
	assert.Empty(t, e.sim.MappedVolumes(w2))
	assert.Equal(t, []string{w3}, pflexSdcsOf(e, other), "another host's volume is left alone")
	assert.Empty(t, pflexHosts(t, e, fs)["rwRoot"], "the NFS export loses the node's IP")

	v, err = e.adapter.Verify(ctx, plan)
	require.NoError(t, err)
	assert.True(t, v.Fenced, "remaining: %v", v.Remaining)
	for _, pv := range []string{"pv-moved", "pv-kept", "pv-unwanted", "pv-free"} {
		assert.False(t, arraytest.CheckOf(t, v, pv).NodeAccess, pv)
	}
	seq = e.srv.LastSeq()
	require.NoError(t, e.adapter.Apply(ctx, plan), "Apply twice")
	assert.Empty(t, arraytest.WritesSince(e.srv, seq), "the second Apply writes nothing")

	// The pod moves: the emulated csi-vxflexos publishes pv-moved to
	// worker-3's NVMe host. An RWO publish of it anywhere else is refused.
	drv := pflexCSI(t, e, nil)
	require.NoError(t, drv.ControllerPublish(ctx, "1a2b3c4d5e6f7a8b-"+moved, pflexNVMe3, false))
	assert.Equal(t, []string{w3}, pflexSdcsOf(e, moved))
	require.ErrorIs(t, drv.ControllerPublish(ctx, "1a2b3c4d5e6f7a8b-"+moved, pflexNVMe2, false), csidriver.ErrAlreadyPublished)
	require.ErrorIs(t, drv.ControllerPublish(ctx, "1a2b3c4d5e6f7a8b-"+moved, "6A1B0001-0000-4000-8000-000000000001", false),
		csidriver.ErrAlreadyPublished)

	scope := arrayclients.RestoreScope{Wanted: []string{"pv-moved", "pv-kept", "pv-nfs"}}
	seq = e.srv.LastSeq()
	require.NoError(t, e.adapter.Undo(ctx, plan, scope))
	assert.Equal(t, []string{w3}, pflexSdcsOf(e, moved), "a moved volume is never given back")
	assert.Empty(t, pflexSdcsOf(e, unwanted), "an unwanted volume is not given back")
	assert.Equal(t, []string{w2}, pflexSdcsOf(e, kept))
	assert.Equal(t, []string{w2}, pflexSdcsOf(e, extra), "a mapping outside the footprint that did not move comes back")
	assert.Empty(t, pflexSdcsOf(e, free))
	st := pflexVolumesOf(e.sim.State(), w2)
	assert.Equal(t, "ReadOnly", st["nvme-kept"].AccessMode)
	assert.Equal(t, 500, st["nvme-kept"].LimitIops)
	assert.Equal(t, 10, st["nvme-kept"].LimitBwInMbps)
	assert.Equal(t, []string{"127.0.10.2/255.255.255.255"}, pflexHosts(t, e, fs)["rwRoot"])
	for _, w := range arraytest.WritesSince(e.srv, seq) {
		assert.NotContains(t, w.Path, "addMappedSdc", "an NVMe host is mapped with the NVMe call")
		if strings.Contains(w.Path, "/action/addMappedHost") {
			assert.NotContains(t, w.Path, moved)
			assert.Contains(t, w.Body, `"allowMultipleMappings":"FALSE"`, "never multiple mappings for a single-node volume")
		}
	}

	v, err = e.adapter.VerifyRestore(ctx, plan, scope)
	require.NoError(t, err)
	assert.True(t, v.Restored, "missing: %v, remaining: %v", v.Missing, v.Remaining)
	c := arraytest.CheckOf(t, v, "pv-moved")
	assert.False(t, c.NodeAccess)
	assert.Equal(t, "moved to nvme-host "+pflexNVMe3+" ("+w3+")", c.Note)
	assert.True(t, arraytest.CheckOf(t, v, "pv-kept").NodeAccess)
	assert.False(t, arraytest.CheckOf(t, v, "pv-unwanted").NodeAccess)

	seq = e.srv.LastSeq()
	require.NoError(t, e.adapter.Undo(ctx, plan, scope), "Undo twice")
	assert.Empty(t, arraytest.WritesSince(e.srv, seq), "the second Undo writes nothing")

	// The pod moves back: the driver's publish to worker-2 succeeds.
	require.NoError(t, drv.ControllerUnpublish(ctx, "1a2b3c4d5e6f7a8b-"+moved, pflexNVMe3))
	require.NoError(t, drv.ControllerPublish(ctx, "1a2b3c4d5e6f7a8b-"+moved, pflexNVMe2, false))
	assert.Equal(t, []string{w2}, pflexSdcsOf(e, moved))
}

// A footprint volume mapped back to the NVMe host after the fence (a
// late attach) is seen by the read-back and cut by a repeated Apply; on
// unfence, one Kubernetes no longer wants that the host has again is
// unmapped.
func TestPowerFlexNVMeLateMapping(t *testing.T) {
	ctx := context.Background()
	e := startPowerFlex(t, pflexNVMeFixture, arrayclients.Options{}, 5*time.Second)
	w2 := pflexHostOf(t, e, pflexNVMe2)
	free := pflexVolumeID(t, e, "nvme-free")
	id, err := e.adapter.Resolve(ctx, pflexNVMeNode("worker-2", "127.0.10.2", pflexNVMe2))
	require.NoError(t, err)
	plan, err := e.adapter.Plan(ctx, id, []arrayclients.VolumeRef{arraytest.BlockRef("pv-free", free, false)})
	require.NoError(t, err)
	plan = arraytest.RoundTrip(t, plan)
	require.NoError(t, e.adapter.Apply(ctx, plan))

	drv := pflexCSI(t, e, nil)
	require.NoError(t, drv.ControllerPublish(ctx, "1a2b3c4d5e6f7a8b-"+free, pflexNVMe2, false))
	v, err := e.adapter.Verify(ctx, plan)
	require.NoError(t, err)
	assert.False(t, v.Fenced)
	assert.True(t, arraytest.CheckOf(t, v, "pv-free").NodeAccess)
	require.NoError(t, e.adapter.Apply(ctx, plan))
	v, err = e.adapter.Verify(ctx, plan)
	require.NoError(t, err)
	assert.True(t, v.Fenced, "remaining: %v", v.Remaining)

	require.NoError(t, drv.ControllerPublish(ctx, "1a2b3c4d5e6f7a8b-"+free, pflexNVMe2, false))
	require.NoError(t, e.adapter.Undo(ctx, plan, arrayclients.RestoreScope{}))
	assert.Empty(t, pflexSdcsOf(e, free), "not wanted on the node: unmapped again")
	v, err = e.adapter.VerifyRestore(ctx, plan, arrayclients.RestoreScope{})
	require.NoError(t, err)
	assert.True(t, v.Restored, "missing: %v, remaining: %v", v.Missing, v.Remaining)
	assert.Len(t, e.sim.MappedVolumes(w2), 4, "the host's other volumes are back")
}
