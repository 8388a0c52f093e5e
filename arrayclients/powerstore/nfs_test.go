package powerstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dell/gopowerstore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/arrayclients/internal/arraytest"
	"github.com/fenced-project/fenced/arrayclients/powerstore"
	powerstoresim "github.com/fenced-project/fenced/tests/arraysim/powerstore"
	"github.com/fenced-project/fenced/tests/arraysim/simcore"
	"github.com/fenced-project/fenced/tests/csidriver"
)

// psNFSFixture is psFixture with worker-5, a node without block initiators
// (so csi-powerstore made it no host), and file systems whose NFS exports
// list nodes as csi-powerstore's publish leaves them.
var psNFSFixture = strings.Replace(psFixture, "arrays:\n",
	"  - {name: worker-5, ip: 127.0.10.5, machineID: 4a1b2c3d4e5f60718293a4b5c6d7e8f9}\narrays:\n", 1) + `
      fileSystems:
        - {name: fs-only5, readWriteRootHosts: [127.0.10.5]}
        - {name: fs-shared, readWriteRootHosts: [127.0.10.5, 127.0.10.2], readOnlyHosts: [127.0.10.3]}
        - {name: fs-w1, readWriteRootHosts: [127.0.10.1]}
        - {name: fs-other, readWriteRootHosts: [127.0.10.2]}
        - {name: fs-subnet, readWriteHosts: [127.0.10.0/24]}
        - {name: fs-open, defaultAccess: Read_Write, readWriteRootHosts: [127.0.10.5]}
        - {name: fs-none, noExport: true}
`

// fsID is the UUID of the file system named name.
func (e *psEnv) fsID(t testing.TB, name string) string {
	t.Helper()
	for _, fs := range e.state(t).FileSystems {
		if fs.Name == name {
			return fs.ID
		}
	}
	t.Fatalf("no file system %s", name)
	return ""
}

// export is the NFS export of the file system named name.
func (e *psEnv) export(t testing.TB, name string) powerstoresim.NFSExportState {
	t.Helper()
	id := e.fsID(t, name)
	for _, x := range e.state(t).NFSExports {
		if x.FileSystemID == id {
			return x
		}
	}
	t.Fatalf("no NFS export of %s", name)
	return powerstoresim.NFSExportState{}
}

func psNFSRef(e *psEnv, t testing.TB, pv, fs string, attached bool) arrayclients.VolumeRef {
	return arrayclients.VolumeRef{Volume: pv, Object: e.fsID(t, fs), Protocol: arrayclients.ProtocolNFS, Attached: attached}
}

// csiDriver is the emulated csi-powerstore controller on the simulator.
func (e *psEnv) csiDriver(t testing.TB) *csidriver.PowerStore {
	t.Helper()
	d, err := csidriver.NewPowerStore(csidriver.PowerStoreConfig{Endpoint: e.url, CAFile: e.cfg.CAFile,
		Username: e.cfg.Username, Password: e.cfg.Password, GlobalID: "PSA1", NASName: powerstoresim.DefaultNASName})
	require.NoError(t, err)
	return d
}

func TestPowerStoreNFSOnlyNodeFenced(t *testing.T) {
	e := newPSEnv(t, psNFSFixture)
	a := e.adapter(t, nil)
	ctx := context.Background()

	id, err := a.Resolve(ctx, e.node("worker-5"))
	require.NoError(t, err, "a node without a host is an NFS client")
	assert.Equal(t, powerstore.PowerStoreKindNFSClient, id.Kind)
	assert.Empty(t, id.ObjectID)
	assert.Equal(t, []string{"127.0.10.5"}, id.Keys)
	_, err = a.Resolve(ctx, arrayclients.Node{Name: "worker-5", Addresses: []string{"127.0.10.5"}, Override: "no-such-host"})
	require.ErrorIs(t, err, arrayclients.ErrNoIdentity, "an override names a host, and none is found")
	hl, err := a.Health(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, arrayclients.ConnectivityUnknown, hl.Connectivity)

	// An operator's no-SUID setting must survive the fence.
	drv := e.driver(t)
	_, err = drv.c.ModifyNFSExport(ctx, &gopowerstore.NFSExportModify{IsNoSUID: true}, e.export(t, "fs-shared").ID)
	require.NoError(t, err)
	othersBefore := e.export(t, "fs-w1")

	vols := []arrayclients.VolumeRef{
		psNFSRef(e, t, "pv-only5", "fs-only5", true),
		psNFSRef(e, t, "pv-shared", "fs-shared", true),
		arraytest.BlockRef("pv-block", e.volumeID(t, "pvc-worker-1-0"), true),
	}
	vols[1].MultiNode = true
	seq := e.srv.LastSeq()
	plan, err := a.Plan(ctx, id, vols)
	require.NoError(t, err)
	assert.Empty(t, arraytest.WritesSince(e.srv, seq), "Plan never writes")
	plan = arraytest.RoundTrip(t, plan)
	t.Log(plan.Summary)
	assert.Equal(t, arrayclients.CutNFSExportHosts, arraytest.CutOf(t, plan, "pv-only5").Cut)
	shared := arraytest.CutOf(t, plan, "pv-shared")
	assert.Equal(t, arrayclients.CutNFSExportHosts, shared.Cut)
	assert.Equal(t, []string{"127.0.10.2/255.255.255.255", "127.0.10.3/255.255.255.255"}, shared.Holders)
	blk := arraytest.CutOf(t, plan, "pv-block")
	require.NotNil(t, blk.Gap, "an NFS client has no host to cut a block volume from")
	assert.Equal(t, arrayclients.GapIdentityNotFound, blk.Gap.Reason)
	assert.Contains(t, string(plan.Entries), `"value":"127.0.10.5/255.255.255.255"`, "the exact entry is recorded before the fence")

	v, err := a.Verify(ctx, plan)
	require.NoError(t, err)
	assert.False(t, v.Fenced)
	assert.True(t, arraytest.CheckOf(t, v, "pv-only5").NodeAccess)

	require.NoError(t, a.Apply(ctx, plan))
	v, err = a.Verify(ctx, plan)
	require.NoError(t, err)
	assert.True(t, v.Fenced, "remaining: %v", v.Remaining)
	assert.False(t, arraytest.CheckOf(t, v, "pv-only5").NodeAccess)
	assert.False(t, arraytest.CheckOf(t, v, "pv-shared").NodeAccess)
	assert.Empty(t, e.export(t, "fs-only5").ReadWriteRootHosts)
	x := e.export(t, "fs-shared")
	assert.Equal(t, []string{"127.0.10.2/255.255.255.255"}, x.ReadWriteRootHosts, "other nodes' entries are untouched")
	assert.Equal(t, []string{"127.0.10.3/255.255.255.255"}, x.ReadOnlyHosts)
	assert.True(t, x.IsNoSUID, "the fence sends only the host lists it changes")
	assert.Equal(t, othersBefore, e.export(t, "fs-w1"), "exports outside the footprint are untouched")

	afterFence := e.state(t)
	seq = e.srv.LastSeq()
	require.NoError(t, a.Apply(ctx, plan), "Apply twice")
	assert.Empty(t, arraytest.WritesSince(e.srv, seq), "the second Apply writes nothing")
	assert.Equal(t, afterFence, e.state(t))

	// An entry naming the node in another form is read back as access.
	require.NoError(t, e.sim.SetExportHosts("fs-only5", "read_only_root_hosts", []string{"127.0.10.5/32"}))
	v, err = a.Verify(ctx, plan)
	require.NoError(t, err)
	assert.False(t, v.Fenced)
	assert.True(t, arraytest.CheckOf(t, v, "pv-only5").NodeAccess)
	require.NoError(t, e.sim.SetExportHosts("fs-only5", "read_only_root_hosts", []string{"127.0.10.0/255.255.255.0"}))
	v, err = a.Verify(ctx, plan)
	require.NoError(t, err)
	assert.False(t, v.Fenced, "a subnet holding the node's IP lets it in")
}

func TestPowerStoreNFSGaps(t *testing.T) {
	e := newPSEnv(t, psNFSFixture)
	a := e.adapter(t, nil)
	ctx := context.Background()
	id, err := a.Resolve(ctx, e.node("worker-5"))
	require.NoError(t, err)
	plan, err := a.Plan(ctx, id, []arrayclients.VolumeRef{
		psNFSRef(e, t, "pv-subnet", "fs-subnet", true),
		psNFSRef(e, t, "pv-open", "fs-open", true),
		psNFSRef(e, t, "pv-other", "fs-other", true),
		psNFSRef(e, t, "pv-pending", "fs-other", false),
		psNFSRef(e, t, "pv-none", "fs-none", true),
		{Volume: "pv-gone", Object: "0badc0de-0000-4000-8000-000000000000", Protocol: arrayclients.ProtocolNFS, Attached: true},
	})
	require.NoError(t, err)
	for pv, want := range map[string]arrayclients.GapReason{"pv-subnet": arrayclients.GapNotFenceable,
		"pv-open": arrayclients.GapNotFenceable, "pv-other": arrayclients.GapOtherIdentity, "pv-gone": arrayclients.GapVolumeNotFound} {
		vc := arraytest.CutOf(t, plan, pv)
		if assert.NotNil(t, vc.Gap, pv) {
			assert.Equal(t, want, vc.Gap.Reason, pv)
			assert.Contains(t, vc.Gap.Detail, pv)
		}
	}
	assert.Equal(t, arrayclients.CutNotMapped, arraytest.CutOf(t, plan, "pv-pending").Cut, "another node's entry while the attach is pending")
	assert.Equal(t, arrayclients.CutNotMapped, arraytest.CutOf(t, plan, "pv-none").Cut, "a file system without an export lets nobody in")
	assert.Contains(t, arraytest.CutOf(t, plan, "pv-open").Gap.Detail, "default_access Read_Write")
}

func TestPowerStoreNFSBlockAndNFSNode(t *testing.T) {
	for _, mode := range []string{arrayclients.PowerStoreModeInitiators, arrayclients.PowerStoreModeDetach} {
		t.Run(mode, func(t *testing.T) {
			e := newPSEnv(t, psNFSFixture)
			a := e.adapter(t, func(c *arrayclients.Config) { c.PowerStoreFenceMode = mode })
			ctx := context.Background()
			before := e.state(t)
			id, err := a.Resolve(ctx, e.node("worker-1"))
			require.NoError(t, err)
			assert.NotEmpty(t, id.ObjectID, "a node with a host keeps the host identity")
			vols := []arrayclients.VolumeRef{arraytest.BlockRef("pv-blk", e.volumeID(t, "pvc-worker-1-0"), true), psNFSRef(e, t, "pv-nfs", "fs-w1", true)}
			plan, err := a.Plan(ctx, id, vols)
			require.NoError(t, err)
			plan = arraytest.RoundTrip(t, plan)
			assert.Equal(t, arrayclients.CutNFSExportHosts, arraytest.CutOf(t, plan, "pv-nfs").Cut)
			assert.Nil(t, arraytest.CutOf(t, plan, "pv-blk").Gap)

			require.NoError(t, a.Apply(ctx, plan))
			v, err := a.Verify(ctx, plan)
			require.NoError(t, err)
			assert.True(t, v.Fenced, "remaining: %v", v.Remaining)
			assert.Empty(t, e.export(t, "fs-w1").ReadWriteRootHosts)
			assert.False(t, arraytest.CheckOf(t, v, "pv-nfs").NodeAccess)

			scope := arrayclients.RestoreScope{Wanted: []string{"pv-blk", "pv-nfs"}}
			require.NoError(t, a.Undo(ctx, plan, scope))
			r, err := a.VerifyRestore(ctx, plan, scope)
			require.NoError(t, err)
			assert.True(t, r.Restored, "missing %v remaining %v", r.Missing, r.Remaining)
			assert.True(t, arraytest.CheckOf(t, r, "pv-nfs").NodeAccess)
			assert.Equal(t, arraytest.DumpJSON(t, before), arraytest.DumpJSON(t, e.state(t)), "state after Undo equals state before Plan")
		})
	}
}

func TestPowerStoreNFSUnfenceGivesBackWhatIsWanted(t *testing.T) {
	e := newPSEnv(t, psNFSFixture)
	a := e.adapter(t, nil)
	ctx := context.Background()
	id, err := a.Resolve(ctx, e.node("worker-5"))
	require.NoError(t, err)
	shared := psNFSRef(e, t, "pv-shared", "fs-shared", true)
	shared.MultiNode = true
	plan, err := a.Plan(ctx, id, []arrayclients.VolumeRef{psNFSRef(e, t, "pv-only5", "fs-only5", true), shared})
	require.NoError(t, err)
	plan = arraytest.RoundTrip(t, plan)
	require.NoError(t, a.Apply(ctx, plan))

	// Kubernetes still wants pv-only5 on the node, not pv-shared.
	scope := arrayclients.RestoreScope{Wanted: []string{"pv-only5"}}
	require.NoError(t, a.Undo(ctx, plan, scope))
	assert.Equal(t, []string{"127.0.10.5/255.255.255.255"}, e.export(t, "fs-only5").ReadWriteRootHosts, "given back into its list")
	assert.Equal(t, []string{"127.0.10.2/255.255.255.255"}, e.export(t, "fs-shared").ReadWriteRootHosts, "not wanted: not given back")
	r, err := a.VerifyRestore(ctx, plan, scope)
	require.NoError(t, err)
	assert.True(t, r.Restored, "missing %v remaining %v", r.Missing, r.Remaining)
	assert.Equal(t, "not wanted by Kubernetes on the node", arraytest.CheckOf(t, r, "pv-shared").Note)
	assert.False(t, arraytest.CheckOf(t, r, "pv-shared").NodeAccess)

	seq := e.srv.LastSeq()
	require.NoError(t, a.Undo(ctx, plan, scope), "Undo twice")
	assert.Empty(t, arraytest.WritesSince(e.srv, seq), "the second Undo writes nothing")
}

func TestPowerStoreNFSUnfenceAfterMoveDoesNotRegrant(t *testing.T) {
	e := newPSEnv(t, psNFSFixture)
	a := e.adapter(t, nil)
	ctx := context.Background()
	id, err := a.Resolve(ctx, e.node("worker-5"))
	require.NoError(t, err)
	ref := psNFSRef(e, t, "pv-only5", "fs-only5", true)
	plan, err := a.Plan(ctx, id, []arrayclients.VolumeRef{ref})
	require.NoError(t, err)
	plan = arraytest.RoundTrip(t, plan)
	require.NoError(t, a.Apply(ctx, plan))

	// After the fence the pod moved: csi-powerstore published the volume
	// to worker-2.
	drv := e.csiDriver(t)
	handle := ref.Object + "/PSA1/nfs"
	require.NoError(t, drv.ControllerPublish(ctx, handle, e.node("worker-2").CSINodeIDs[arrayclients.DriverPowerStore], false))

	scope := arrayclients.RestoreScope{Wanted: []string{"pv-only5"}} // a stale attachment still names the node
	require.NoError(t, a.Undo(ctx, plan, scope))
	assert.Equal(t, []string{"127.0.10.2/255.255.255.255"}, e.export(t, "fs-only5").ReadWriteRootHosts, "never re-grant what moved")
	r, err := a.VerifyRestore(ctx, plan, scope)
	require.NoError(t, err)
	assert.True(t, r.Restored, "missing %v remaining %v", r.Missing, r.Remaining)
	chk := arraytest.CheckOf(t, r, "pv-only5")
	assert.False(t, chk.NodeAccess)
	assert.Equal(t, "moved to 127.0.10.2/255.255.255.255", chk.Note)

	// A re-grant by someone else is caught by the read-back, and a
	// repeated Undo takes it out again.
	require.NoError(t, drv.ControllerPublish(ctx, handle, e.node("worker-5").CSINodeIDs[arrayclients.DriverPowerStore], false))
	r, err = a.VerifyRestore(ctx, plan, scope)
	require.NoError(t, err)
	assert.False(t, r.Restored)
	assert.NotEmpty(t, r.Remaining)
	require.NoError(t, a.Undo(ctx, plan, scope))
	assert.Equal(t, []string{"127.0.10.2/255.255.255.255"}, e.export(t, "fs-only5").ReadWriteRootHosts)
}

func TestPowerStoreNFSApplyRefused(t *testing.T) {
	e := newPSEnv(t, psNFSFixture)
	a := e.adapter(t, func(c *arrayclients.Config) { c.RequestTimeout = 500 * time.Millisecond })
	ctx := context.Background()
	id, err := a.Resolve(ctx, e.node("worker-5"))
	require.NoError(t, err)
	plan, err := a.Plan(ctx, id, []arrayclients.VolumeRef{psNFSRef(e, t, "pv-only5", "fs-only5", true)})
	require.NoError(t, err)

	for _, status := range []int{400, 503} {
		fid := e.srv.AddFault(simcore.Fault{Kind: simcore.FaultError, Status: status, Method: "PATCH", Path: "^/api/rest/nfs_export/"})
		err = a.Apply(ctx, plan)
		e.srv.RemoveFault(fid)
		require.Error(t, err, "status %d", status)
		assert.Contains(t, err.Error(), "remove 127.0.10.5/255.255.255.255 in read_write_root_hosts from NFS export fs-only5")
		assert.Contains(t, err.Error(), "node worker-5")
		assert.Equal(t, status >= 500, errors.Is(err, arrayclients.ErrUnreachable), "status %d", status)
		assert.Equal(t, []string{"127.0.10.5/255.255.255.255"}, e.export(t, "fs-only5").ReadWriteRootHosts)
		v, err := a.Verify(ctx, plan)
		require.NoError(t, err)
		assert.False(t, v.Fenced)
	}
	require.NoError(t, a.Apply(ctx, plan))
	v, err := a.Verify(ctx, plan)
	require.NoError(t, err)
	assert.True(t, v.Fenced, "remaining: %v", v.Remaining)
}
