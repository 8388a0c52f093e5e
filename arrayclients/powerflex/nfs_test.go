package powerflex_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	siotypes "github.com/dell/goscaleio/types/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/arrayclients/internal/arraytest"
	"github.com/fenced-project/fenced/arrayclients/powerflex"
	"github.com/fenced-project/fenced/tests/csidriver"
)

// pflexNFSFixture: worker-1 and worker-2 run SDCs; worker-3 runs none
// (NFS only, node ID = its Node UID). The file systems' exports list hosts
// in the forms an array may show: what csi-vxflexos adds
// ("<ip>/255.255.255.255"), a bare IP, a prefix length.
const pflexNFSFixture = `
nodes:
  - {name: worker-1, ip: 127.0.10.1, sdcGUID: 6A1B0001-0000-4000-8000-000000000001}
  - {name: worker-2, ip: 127.0.10.2, sdcGUID: 6A1B0002-0000-4000-8000-000000000002}
  - {name: worker-3, ip: 127.0.10.3}
arrays:
  - name: pflex-1
    family: powerflex
    spec:
      systems: [{id: 1a2b3c4d5e6f7a8b, name: sys-1}]
      perNode: {volumes: 1}
      fileSystems:
        - name: fs-a
          export: {readWriteRootHosts: [127.0.10.3/255.255.255.255]}
        - name: fs-b
          export: {readOnlyRootHosts: [127.0.10.3], readWriteRootHosts: [127.0.10.2/255.255.255.255]}
        - name: fs-c
          export: {readWriteHosts: [127.0.10.3/32, 10.9.0.0/255.255.0.0]}
        - name: fs-other
          export: {readWriteRootHosts: [127.0.10.2/255.255.255.255]}
        - name: fs-open
          export: {defaultAccess: Read_Write, readWriteRootHosts: [127.0.10.3/255.255.255.255]}
        - name: fs-subnet
          export: {readWriteRootHosts: [127.0.10.0/255.255.255.0]}
        - name: fs-unpublished
`

const pflexW3UID = "0c6e2f4a-1d3b-4a5c-8e7f-9b0a1c2d3e4f"

var (
	pflexNFSW1 = arrayclients.Node{Cluster: "c1", Name: "worker-1", Addresses: []string{"127.0.10.1"},
		CSINodeIDs: map[string]string{arrayclients.DriverPowerFlex: "6A1B0001-0000-4000-8000-000000000001"}}
	pflexNFSW3 = arrayclients.Node{Cluster: "c1", Name: "worker-3", Addresses: []string{"127.0.10.3"},
		CSINodeIDs: map[string]string{arrayclients.DriverPowerFlex: pflexW3UID}}
)

func pflexFS(t testing.TB, e pflexEnv, name string) string {
	t.Helper()
	id, ok := e.sim.FileSystemID(name)
	require.True(t, ok, name)
	return id
}

func nfsRef(pv, fsID string, multiNode bool) arrayclients.VolumeRef {
	return arrayclients.VolumeRef{Volume: pv, Object: fsID, Protocol: arrayclients.ProtocolNFS, Attached: true, MultiNode: multiNode}
}

// pflexHosts returns all host lists of a file system's export.
func pflexHosts(t testing.TB, e pflexEnv, fsID string) map[string][]string {
	t.Helper()
	x, ok := e.sim.ExportOf(fsID)
	require.True(t, ok)
	return map[string][]string{"ro": x.ReadOnlyHosts, "roRoot": x.ReadOnlyRootHosts, "rw": x.ReadWriteHosts, "rwRoot": x.ReadWriteRootHosts}
}

// pflexCSI is the emulated csi-vxflexos controller on the array; with
// interface IPs it publishes NFS volumes to those, else to SDC IPs.
func pflexCSI(t testing.TB, e pflexEnv, interfaceIPs map[string]string) *csidriver.PowerFlex {
	t.Helper()
	c, err := csidriver.NewPowerFlex(context.Background(), csidriver.PowerFlexConfig{Endpoint: e.url, CAFile: e.caFile,
		Username: e.cfg.Username, Password: e.cfg.Password, SystemID: "1a2b3c4d5e6f7a8b", InterfaceIPs: interfaceIPs})
	require.NoError(t, err)
	return c
}

func TestPowerFlexNFSOnlyNodeFenced(t *testing.T) {
	ctx := context.Background()
	e := startPowerFlex(t, pflexNFSFixture, arrayclients.Options{}, 5*time.Second)
	before := e.sim.State()

	id, err := e.adapter.Resolve(ctx, pflexNFSW3)
	require.NoError(t, err)
	assert.Equal(t, powerflex.PowerFlexKindNFSClient, id.Kind, "no SDC has the node's UID as GUID")
	assert.Empty(t, id.ObjectID)
	assert.Equal(t, []string{"127.0.10.3"}, id.Keys)
	h, err := e.adapter.Health(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, arrayclients.ConnectivityUnknown, h.Connectivity)

	fsA, fsB, fsC := pflexFS(t, e, "fs-a"), pflexFS(t, e, "fs-b"), pflexFS(t, e, "fs-c")
	fsOther := pflexFS(t, e, "fs-other")
	vols := []arrayclients.VolumeRef{
		nfsRef("pv-a", fsA, false), nfsRef("pv-b", fsB, true), nfsRef("pv-c", fsC, false),
		nfsRef("pv-open", pflexFS(t, e, "fs-open"), false), nfsRef("pv-subnet", pflexFS(t, e, "fs-subnet"), false),
		nfsRef("pv-unpublished", pflexFS(t, e, "fs-unpublished"), false), nfsRef("pv-gone", "64b0b3a5-0000-0000-0000-000000000000", false),
		arraytest.BlockRef("pv-block", pflexVolumeID(t, e, "worker-1-vol-0"), true),
	}
	plan, err := e.adapter.Plan(ctx, id, vols)
	require.NoError(t, err)
	assert.Zero(t, pflexWriteRequests(e), "Plan never writes")
	plan = arraytest.RoundTrip(t, plan)
	tcs := []struct {
		pv  string
		cut arrayclients.Cut
		gap arrayclients.GapReason
	}{
		{"pv-a", arrayclients.CutNFSExportHosts, ""},
		{"pv-b", arrayclients.CutNFSExportHosts, ""},
		{"pv-c", arrayclients.CutNFSExportHosts, ""},
		{"pv-open", "", arrayclients.GapNotFenceable},
		{"pv-subnet", "", arrayclients.GapNotFenceable},
		{"pv-unpublished", arrayclients.CutNotMapped, ""},
		{"pv-gone", "", arrayclients.GapVolumeNotFound},
		{"pv-block", "", arrayclients.GapIdentityNotFound},
	}
	for _, tc := range tcs {
		vc := arraytest.CutOf(t, plan, tc.pv)
		assert.Equal(t, tc.cut, vc.Cut, tc.pv)
		if tc.gap == "" {
			assert.Nil(t, vc.Gap, tc.pv)
		} else if assert.NotNil(t, vc.Gap, tc.pv) {
			assert.Equal(t, tc.gap, vc.Gap.Reason, tc.pv)
		}
	}
	assert.Equal(t, []string{"127.0.10.2/255.255.255.255"}, arraytest.CutOf(t, plan, "pv-b").Holders)

	// The plan records exactly which entries name the node: list and
	// string as the array showed them.
	var entries powerflex.PowerFlexEntries
	require.NoError(t, json.Unmarshal(plan.Entries, &entries))
	assert.Empty(t, entries.SdcID)
	require.Len(t, entries.NFSExports, 3)
	byFS := map[string]powerflex.PowerFlexNFSExport{}
	for _, x := range entries.NFSExports {
		byFS[x.FileSystemID] = x
	}
	assert.Equal(t, []powerflex.PowerFlexNFSHost{{List: "read_write_root_hosts", Value: "127.0.10.3/255.255.255.255"}}, byFS[fsA].Entries)
	assert.Equal(t, []powerflex.PowerFlexNFSHost{{List: "read_only_root_hosts", Value: "127.0.10.3"}}, byFS[fsB].Entries)
	assert.Equal(t, []string{"127.0.10.2/255.255.255.255"}, byFS[fsB].Others)
	assert.Equal(t, []powerflex.PowerFlexNFSHost{{List: "read_write_hosts", Value: "127.0.10.3/32"}}, byFS[fsC].Entries)

	v, err := e.adapter.Verify(ctx, plan)
	require.NoError(t, err)
	assert.False(t, v.Fenced, "not fenced before Apply")

	require.NoError(t, e.adapter.Apply(ctx, plan))
	v, err = e.adapter.Verify(ctx, plan)
	require.NoError(t, err)
	assert.True(t, v.Fenced, "remaining: %v", v.Remaining)
	assert.Empty(t, v.Remaining)
	assert.Len(t, v.Missing, 3)
	for _, c := range v.Volumes {
		assert.False(t, c.NodeAccess, c.Volume)
	}
	assert.Empty(t, pflexHosts(t, e, fsA)["rwRoot"])
	assert.Equal(t, map[string][]string{"ro": {}, "roRoot": {}, "rw": {}, "rwRoot": {"127.0.10.2/255.255.255.255"}}, pflexHosts(t, e, fsB),
		"worker-2 keeps its access to the multi-node volume")
	assert.Equal(t, []string{"10.9.0.0/255.255.0.0"}, pflexHosts(t, e, fsC)["rw"])
	after := e.sim.State()
	assert.Equal(t, before.Volumes, after.Volumes, "no block mapping touched")
	for i, x := range after.NFSExports {
		if x.FileSystemID != fsA && x.FileSystemID != fsB && x.FileSystemID != fsC {
			assert.Equal(t, before.NFSExports[i], x, "exports outside the cut untouched")
		}
	}
	_, ok := e.sim.ExportOf(fsOther)
	require.True(t, ok)
	writes := e.srv.AuditWrites()
	require.Len(t, writes, 3, "one PATCH per export")
	for _, w := range writes {
		assert.Equal(t, "PATCH", w.Method)
		assert.NotContains(t, w.Body, "127.0.10.2", "no write names another node")
	}

	// Apply again: nothing left to remove, nothing written.
	requests := pflexWriteRequests(e)
	require.NoError(t, e.adapter.Apply(ctx, plan), "a second apply succeeds")
	assert.Equal(t, requests, pflexWriteRequests(e), "and writes nothing")
	assert.Equal(t, after, e.sim.State())

	// Access given back behind the fence's back is seen.
	c := e.driver(t).c
	require.NoError(t, c.WithContext(ctx).ModifyNFSExport(&siotypes.NFSExportModify{AddReadWriteHosts: []string{"127.0.10.3"}}, byFS[fsA].ExportID))
	v, err = e.adapter.Verify(ctx, plan)
	require.NoError(t, err)
	assert.False(t, v.Fenced)
	assert.True(t, arraytest.CheckOf(t, v, "pv-a").NodeAccess)
	require.NoError(t, e.adapter.Apply(ctx, plan))
	v, err = e.adapter.Verify(ctx, plan)
	require.NoError(t, err)
	assert.True(t, v.Fenced, "remaining: %v", v.Remaining)

	// Unfence with every volume wanted gives back exactly what was there.
	require.NoError(t, e.adapter.Undo(ctx, plan, arrayclients.RestoreScope{Wanted: []string{"pv-a", "pv-b", "pv-c"}}))
	v, err = e.adapter.VerifyRestore(ctx, plan, arrayclients.RestoreScope{Wanted: []string{"pv-a", "pv-b", "pv-c"}})
	require.NoError(t, err)
	assert.True(t, v.Restored, "missing %v remaining %v", v.Missing, v.Remaining)
	// The array lists what is given back in its own form: the bare IP and
	// the prefix length come back as <ip>/255.255.255.255.
	assert.Equal(t, map[string][]string{"ro": {}, "roRoot": {"127.0.10.3/255.255.255.255"}, "rw": {},
		"rwRoot": {"127.0.10.2/255.255.255.255"}}, pflexHosts(t, e, fsB))
	assert.Equal(t, []string{"10.9.0.0/255.255.0.0", "127.0.10.3/255.255.255.255"}, pflexHosts(t, e, fsC)["rw"])
	restored := e.sim.State()
	assert.Equal(t, before.Volumes, restored.Volumes)
	for i, x := range restored.NFSExports {
		if x.FileSystemID != fsB && x.FileSystemID != fsC {
			assert.Equal(t, before.NFSExports[i], x, "every other export as before the fence")
		}
	}
	seq := e.srv.LastSeq()
	require.NoError(t, e.adapter.Undo(ctx, plan, arrayclients.RestoreScope{Wanted: []string{"pv-a", "pv-b", "pv-c"}}))
	assert.Empty(t, arraytest.WritesSince(e.srv, seq), "a repeated unfence writes nothing: the listed forms count as given back")
}

func TestPowerFlexNFSOnSDCNode(t *testing.T) {
	ctx := context.Background()
	e := startPowerFlex(t, pflexNFSFixture, arrayclients.Options{}, 5*time.Second)
	csi := pflexCSI(t, e, nil)
	h, err := csi.CreateVolume(ctx, "k8s-nfs-w1", 3<<30, arrayclients.ProtocolNFS)
	require.NoError(t, err)
	require.NoError(t, csi.ControllerPublish(ctx, h, pflexNFSW1.CSINodeIDs[arrayclients.DriverPowerFlex], false))
	loc, err := arrayclients.ParseVolumeHandle(arrayclients.PowerFlex, h, "nfs")
	require.NoError(t, err)
	require.Equal(t, []string{"127.0.10.1/255.255.255.255"}, pflexHosts(t, e, loc.Object)["rwRoot"], "the driver listed the SDC's IP")
	before := e.sim.State()
	e.srv.ClearAudit()

	id, err := e.adapter.Resolve(ctx, pflexNFSW1)
	require.NoError(t, err)
	w1, _ := e.sim.SDCID("worker-1")
	assert.Equal(t, w1, id.ObjectID, "an SDC node keeps its SDC identity")
	assert.Empty(t, id.Kind)
	assert.Equal(t, []string{"6A1B0001-0000-4000-8000-000000000001", "127.0.10.1"}, id.Keys)

	block := pflexVolumeID(t, e, "worker-1-vol-0")
	vols := []arrayclients.VolumeRef{arraytest.BlockRef("pv-block", block, true), nfsRef("pv-nfs", loc.Object, false)}
	plan, err := e.adapter.Plan(ctx, id, vols)
	require.NoError(t, err)
	plan = arraytest.RoundTrip(t, plan)
	assert.Equal(t, arrayclients.CutSDCUnmap, arraytest.CutOf(t, plan, "pv-block").Cut)
	assert.Equal(t, arrayclients.CutNFSExportHosts, arraytest.CutOf(t, plan, "pv-nfs").Cut)
	assert.Contains(t, plan.Summary, "NFS export")

	require.NoError(t, e.adapter.Apply(ctx, plan))
	v, err := e.adapter.Verify(ctx, plan)
	require.NoError(t, err)
	assert.True(t, v.Fenced, "remaining: %v", v.Remaining)
	assert.Empty(t, e.sim.MappedVolumes("worker-1"))
	assert.Empty(t, pflexHosts(t, e, loc.Object)["rwRoot"])
	w2, _ := e.sim.SDCID("worker-2")
	assert.Equal(t, pflexVolumesOf(before, w2), pflexVolumesOf(e.sim.State(), w2), "worker-2 untouched")

	scope := arrayclients.RestoreScope{Wanted: []string{"pv-block", "pv-nfs"}}
	require.NoError(t, e.adapter.Undo(ctx, plan, scope))
	v, err = e.adapter.VerifyRestore(ctx, plan, scope)
	require.NoError(t, err)
	assert.True(t, v.Restored, "missing %v remaining %v", v.Missing, v.Remaining)
	assert.Equal(t, before, e.sim.State(), "block mapping and export entry both back")

	// The driver's own unpublish works on what the unfence gave back.
	require.NoError(t, csi.ControllerUnpublish(ctx, h, pflexNFSW1.CSINodeIDs[arrayclients.DriverPowerFlex]))
	assert.Empty(t, pflexHosts(t, e, loc.Object)["rwRoot"])
}

func TestPowerFlexNFSUnfenceReconciles(t *testing.T) {
	ctx := context.Background()
	e := startPowerFlex(t, pflexNFSFixture, arrayclients.Options{}, 5*time.Second)
	// worker-3 has no SDC: the driver's ConfigMap names its interface IPs.
	csi3 := pflexCSI(t, e, map[string]string{"worker-3": "127.0.10.3"})
	handles := map[string]string{}
	fs := map[string]string{}
	for _, pv := range []string{"pv-kept", "pv-moved", "pv-unwanted"} {
		h, err := csi3.CreateVolume(ctx, "k8s-"+pv, 3<<30, arrayclients.ProtocolNFS)
		require.NoError(t, err)
		require.NoError(t, csi3.ControllerPublish(ctx, h, pflexW3UID, false))
		loc, err := arrayclients.ParseVolumeHandle(arrayclients.PowerFlex, h, "nfs")
		require.NoError(t, err)
		handles[pv], fs[pv] = h, loc.Object
	}
	id, err := e.adapter.Resolve(ctx, pflexNFSW3)
	require.NoError(t, err)
	plan, err := e.adapter.Plan(ctx, id, []arrayclients.VolumeRef{
		nfsRef("pv-kept", fs["pv-kept"], false), nfsRef("pv-moved", fs["pv-moved"], false), nfsRef("pv-unwanted", fs["pv-unwanted"], false)})
	require.NoError(t, err)
	plan = arraytest.RoundTrip(t, plan)
	require.NoError(t, e.adapter.Apply(ctx, plan))

	// Kubernetes force-detaches pv-moved and the driver publishes it to
	// worker-2 (an RWO publish the driver allows only now that no other
	// host is listed); pv-unwanted's VolumeAttachment is gone.
	csi2 := pflexCSI(t, e, nil)
	require.NoError(t, csi2.ControllerPublish(ctx, handles["pv-moved"], "6A1B0002-0000-4000-8000-000000000002", false))
	scope := arrayclients.RestoreScope{Wanted: []string{"pv-kept", "pv-moved"}}
	seq := e.srv.LastSeq()
	require.NoError(t, e.adapter.Undo(ctx, plan, scope))
	assert.Equal(t, []string{"127.0.10.3/255.255.255.255"}, pflexHosts(t, e, fs["pv-kept"])["rwRoot"], "a wanted, unheld volume is given back")
	assert.Equal(t, []string{"127.0.10.2/255.255.255.255"}, pflexHosts(t, e, fs["pv-moved"])["rwRoot"], "a moved volume is never given back")
	assert.Empty(t, pflexHosts(t, e, fs["pv-unwanted"])["rwRoot"], "an unwanted volume is not given back")
	require.Len(t, arraytest.WritesSince(e.srv, seq), 1, "one write: the kept volume's entry")

	v, err := e.adapter.VerifyRestore(ctx, plan, scope)
	require.NoError(t, err)
	assert.True(t, v.Restored, "missing %v remaining %v", v.Missing, v.Remaining)
	assert.Contains(t, arraytest.CheckOf(t, v, "pv-moved").Note, "moved to 127.0.10.2/255.255.255.255")
	assert.Contains(t, arraytest.CheckOf(t, v, "pv-unwanted").Note, "not wanted")

	// Undo again: nothing to write.
	seq = e.srv.LastSeq()
	require.NoError(t, e.adapter.Undo(ctx, plan, scope))
	assert.Empty(t, arraytest.WritesSince(e.srv, seq))

	// A re-grant of the moved volume is a failed restore, and Undo takes it away.
	c := e.driver(t).c
	x, ok := e.sim.ExportOf(fs["pv-moved"])
	require.True(t, ok)
	require.NoError(t, c.WithContext(ctx).ModifyNFSExport(&siotypes.NFSExportModify{AddReadWriteRootHosts: []string{"127.0.10.3"}}, x.ID))
	v, err = e.adapter.VerifyRestore(ctx, plan, scope)
	require.NoError(t, err)
	assert.False(t, v.Restored)
	assert.NotEmpty(t, v.Remaining)
	require.NoError(t, e.adapter.Undo(ctx, plan, scope))
	assert.Equal(t, []string{"127.0.10.2/255.255.255.255"}, pflexHosts(t, e, fs["pv-moved"])["rwRoot"])
	v, err = e.adapter.VerifyRestore(ctx, plan, scope)
	require.NoError(t, err)
	assert.True(t, v.Restored, "missing %v remaining %v", v.Missing, v.Remaining)
}

// pflexNFSNoIdentity: a node with neither an SDC nor an address has no
// identity, and an NFS volume of an identity without IPs is a gap.
func TestPowerFlexNFSIdentityNeedsIPs(t *testing.T) {
	ctx := context.Background()
	e := startPowerFlex(t, pflexNFSFixture, arrayclients.Options{}, 5*time.Second)
	n := pflexNFSW3
	n.Addresses = nil
	_, err := e.adapter.Resolve(ctx, n)
	require.ErrorIs(t, err, arrayclients.ErrNoIdentity)
	_, gap := e.adapter.Cover(arrayclients.Identity{Array: "pflex-1", Family: arrayclients.PowerFlex, ObjectID: "x", Keys: []string{"6A1B0001-0000-4000-8000-000000000001"}},
		nfsRef("pv", "fs", false))
	require.NotNil(t, gap)
	assert.Equal(t, arrayclients.GapIdentityNotFound, gap.Reason)
}
