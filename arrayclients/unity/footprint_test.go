package unity_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/dell/gounity"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/arrayclients/internal/arraytest"
	"github.com/fenced-project/fenced/arrayclients/unity"
)

// unityFootprintFixture: worker-1's LUNs are sv_1..sv_3, worker-2's
// sv_4..sv_6; sv_7 is worker-1's and a backup host's; sv_8 is given to
// nobody.
const unityFootprintFixture = unityFixture + `
        - name: loose
`

// unityDriver publishes and unpublishes LUNs as csi-unity does
// (dell/csi-unity service/controller.go ControllerPublishVolume /
// ControllerUnpublishVolume: gounity's ModifyVolumeExport with the LUN's
// host list plus or minus the node's host; the driver refuses to publish a
// single-node volume another host has, which these tests do not need).
type unityDriver struct {
	t testing.TB
	c gounity.UnityClient
}

func newUnityDriver(t testing.TB, e unityEnv) unityDriver {
	t.Helper()
	ctx := context.Background()
	c, err := gounity.NewClientWithArgs(ctx, e.cfg.Endpoint, true)
	require.NoError(t, err)
	require.NoError(t, c.Authenticate(ctx, &gounity.ConfigConnect{Endpoint: e.cfg.Endpoint, Username: "admin", Password: "secret", Insecure: true}))
	return unityDriver{t: t, c: c}
}

// hosts returns the LUN's hosts.
func (d unityDriver) hosts(lun string) []string {
	d.t.Helper()
	v, err := d.c.FindVolumeByID(context.Background(), lun)
	require.NoError(d.t, err)
	var out []string
	for _, a := range v.VolumeContent.HostAccessResponse {
		out = append(out, a.HostContent.ID)
	}
	return out
}

// publish gives the host access to the LUN, keeping its other hosts.
func (d unityDriver) publish(lun, hostID string) {
	d.t.Helper()
	require.NoError(d.t, d.c.ModifyVolumeExport(context.Background(), lun, append(d.hosts(lun), hostID)))
}

// unpublish takes the host off the LUN.
func (d unityDriver) unpublish(lun, hostID string) {
	d.t.Helper()
	var keep []string
	for _, h := range d.hosts(lun) {
		if h != hostID {
			keep = append(keep, h)
		}
	}
	require.NoError(d.t, d.c.ModifyVolumeExport(context.Background(), lun, keep))
}

func unityVol(pv, lun string) arrayclients.VolumeRef {
	return arrayclients.VolumeRef{Volume: pv, Object: lun, Protocol: arrayclients.ProtocolBlock, Attached: true}
}

func TestUnityPlanFootprint(t *testing.T) {
	e := startUnity(t, unityFootprintFixture, 5*time.Second)
	ctx := context.Background()
	id, err := e.adapter.Resolve(ctx, unityNode("worker-1"))
	require.NoError(t, err)
	w2, err := e.sim.HostID("worker-2.cluster.local")
	require.NoError(t, err)
	backup, err := e.sim.HostID("backup")
	require.NoError(t, err)

	pending := unityVol("pv-pending", "sv_4")
	pending.Attached = false
	nfs := unityVol("pv-nfs", "fs_1")
	nfs.Protocol = arrayclients.ProtocolNFS
	for _, tc := range []struct {
		name    string
		vol     arrayclients.VolumeRef
		cut     arrayclients.Cut
		gap     arrayclients.GapReason
		holders []string
	}{
		{"mapped to the node", unityVol("pv-own", "sv_1"), arrayclients.CutLUNHostAccess, "", nil},
		{"mapped to the node and another host", unityVol("pv-shared", "sv_7"), arrayclients.CutLUNHostAccess, "", []string{backup}},
		{"not on the array", unityVol("pv-gone", "sv_99"), "", arrayclients.GapVolumeNotFound, nil},
		{"not a LUN ID", unityVol("pv-odd", "12345"), "", arrayclients.GapVolumeNotFound, nil},
		{"another host's, attached", unityVol("pv-other", "sv_4"), "", arrayclients.GapOtherIdentity, []string{w2}},
		{"another host's, attach pending", pending, arrayclients.CutNotMapped, "", []string{w2}},
		{"given to nobody", unityVol("pv-loose", "sv_8"), arrayclients.CutNotMapped, "", nil},
		{"NFS file system not on the array", nfs, "", arrayclients.GapVolumeNotFound, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := e.adapter.Plan(ctx, id, []arrayclients.VolumeRef{tc.vol})
			require.NoError(t, err)
			require.Len(t, p.Volumes, 1)
			vc := p.Volumes[0]
			assert.Equal(t, tc.vol, vc.VolumeRef)
			assert.Equal(t, tc.cut, vc.Cut)
			if tc.gap == "" {
				assert.Nil(t, vc.Gap)
			} else if assert.NotNil(t, vc.Gap) {
				assert.Equal(t, tc.gap, vc.Gap.Reason)
				assert.Contains(t, vc.Gap.Detail, tc.vol.Volume)
			}
			assert.Equal(t, tc.holders, vc.Holders)
			var entries unity.UnityEntries
			require.NoError(t, json.Unmarshal(p.Entries, &entries))
			assert.Len(t, entries.LUNs, 4, "the identity's LUNs are planned whatever the footprint")
		})
	}
	assert.Zero(t, modifyLunPosts(e.srv), "plans never write")
}

func TestUnityVerifyFootprint(t *testing.T) {
	e := startUnity(t, unityFootprintFixture, 5*time.Second)
	ctx := context.Background()
	id, err := e.adapter.Resolve(ctx, unityNode("worker-1"))
	require.NoError(t, err)
	vols := []arrayclients.VolumeRef{unityVol("pv-a", "sv_1"), unityVol("pv-shared", "sv_7"), unityVol("pv-loose", "sv_8")}
	p, err := e.adapter.Plan(ctx, id, vols)
	require.NoError(t, err)

	v, err := e.adapter.Verify(ctx, p)
	require.NoError(t, err)
	assert.False(t, v.Fenced)
	require.Len(t, v.Volumes, 3)
	assert.True(t, arraytest.CheckOf(t, v, "pv-a").NodeAccess)
	assert.True(t, arraytest.CheckOf(t, v, "pv-shared").NodeAccess)
	assert.False(t, arraytest.CheckOf(t, v, "pv-loose").NodeAccess)

	require.NoError(t, e.adapter.Apply(ctx, p))
	v, err = e.adapter.Verify(ctx, p)
	require.NoError(t, err)
	assert.True(t, v.Fenced, "%+v", v)
	require.Len(t, v.Volumes, 3)
	for _, c := range v.Volumes {
		assert.False(t, c.NodeAccess, c.Volume)
	}
	backup, err := e.sim.HostID("backup")
	require.NoError(t, err)
	assert.Equal(t, []string{backup}, arraytest.CheckOf(t, v, "pv-shared").Holders, "the other host keeps the shared LUN")

	// A footprint LUN given to the node behind fenced's back shows in the
	// read-back.
	newUnityDriver(t, e).publish("sv_8", id.ObjectID)
	v, err = e.adapter.Verify(ctx, p)
	require.NoError(t, err)
	assert.False(t, v.Fenced)
	assert.True(t, arraytest.CheckOf(t, v, "pv-loose").NodeAccess)
}

// unityFenced fences worker-1 over vols and returns the plan.
func unityFenced(t *testing.T, e unityEnv, vols ...arrayclients.VolumeRef) (arrayclients.Identity, arrayclients.Plan) {
	t.Helper()
	ctx := context.Background()
	id, err := e.adapter.Resolve(ctx, unityNode("worker-1"))
	require.NoError(t, err)
	p, err := e.adapter.Plan(ctx, id, vols)
	require.NoError(t, err)
	require.NoError(t, e.adapter.Apply(ctx, p))
	v, err := e.adapter.Verify(ctx, p)
	require.NoError(t, err)
	require.True(t, v.Fenced, "%+v", v)
	return id, p
}

func TestUnityUndoReconciles(t *testing.T) {
	e := startUnity(t, unityFootprintFixture, 5*time.Second)
	ctx := context.Background()
	d := newUnityDriver(t, e)
	w2, err := e.sim.HostID("worker-2.cluster.local")
	require.NoError(t, err)
	backup, err := e.sim.HostID("backup")
	require.NoError(t, err)
	shared := unityVol("pv-shared", "sv_7")
	shared.MultiNode = true
	id, p := unityFenced(t, e,
		unityVol("pv-moved", "sv_1"),    // Kubernetes moved it to worker-2
		unityVol("pv-unwanted", "sv_2"), // no longer wanted on worker-1
		unityVol("pv-wanted", "sv_3"),   // still wanted, nobody took it
		shared,                          // multi-node, still wanted, backup holds it
	)
	// After the out-of-service taint, the attach/detach controller
	// publishes pv-moved to worker-2.
	d.publish("sv_1", w2)
	scope := arrayclients.RestoreScope{Wanted: []string{"pv-moved", "pv-wanted", "pv-shared"}}

	require.NoError(t, e.adapter.Undo(ctx, p, scope))
	assert.Equal(t, []string{w2}, d.hosts("sv_1"), "a moved volume is not given back")
	assert.Empty(t, d.hosts("sv_2"), "an unwanted volume is not given back")
	assert.Equal(t, []string{id.ObjectID}, d.hosts("sv_3"), "a wanted, unheld volume is given back")
	assert.ElementsMatch(t, []string{id.ObjectID, backup}, d.hosts("sv_7"), "a multi-node volume is given back beside its other host")

	v, err := e.adapter.VerifyRestore(ctx, p, scope)
	require.NoError(t, err)
	assert.True(t, v.Restored, "%+v", v)
	require.Len(t, v.Volumes, 4)
	moved := arraytest.CheckOf(t, v, "pv-moved")
	assert.False(t, moved.NodeAccess)
	assert.Equal(t, "moved to host "+w2, moved.Note)
	assert.Equal(t, []string{w2}, moved.Holders)
	unwanted := arraytest.CheckOf(t, v, "pv-unwanted")
	assert.False(t, unwanted.NodeAccess)
	assert.Equal(t, "not wanted by Kubernetes on the node", unwanted.Note)
	assert.True(t, arraytest.CheckOf(t, v, "pv-wanted").NodeAccess)
	assert.Empty(t, arraytest.CheckOf(t, v, "pv-wanted").Note)
	assert.True(t, arraytest.CheckOf(t, v, "pv-shared").NodeAccess)

	// Undo twice is harmless: nothing more is written.
	posts := modifyLunPosts(e.srv)
	require.NoError(t, e.adapter.Undo(ctx, p, scope))
	assert.Equal(t, posts, modifyLunPosts(e.srv))

	// The pod moves back to worker-1: the driver unpublishes from worker-2
	// and publishes to worker-1, which succeeds (the LUN is only worker-1's).
	d.unpublish("sv_1", w2)
	d.publish("sv_1", id.ObjectID)
	assert.Equal(t, []string{id.ObjectID}, d.hosts("sv_1"))

	// Someone gives the unwanted volume to the node: not restored.
	d.publish("sv_2", id.ObjectID)
	v, err = e.adapter.VerifyRestore(ctx, p, scope)
	require.NoError(t, err)
	assert.False(t, v.Restored)
	require.Len(t, v.Remaining, 1)
	assert.Contains(t, v.Remaining[0], "sv_2")
	assert.Contains(t, v.Remaining[0], "not wanted")
}

func TestUnityUndoSingleNodeVolumeHeldElsewhere(t *testing.T) {
	e := startUnity(t, unityFootprintFixture, 5*time.Second)
	ctx := context.Background()
	d := newUnityDriver(t, e)
	backup, err := e.sim.HostID("backup")
	require.NoError(t, err)
	// A single-node volume another host holds is never given back, even
	// wanted: two hosts would write it.
	_, p := unityFenced(t, e, unityVol("pv-shared", "sv_7"))
	scope := arrayclients.RestoreScope{Wanted: []string{"pv-shared"}}
	require.NoError(t, e.adapter.Undo(ctx, p, scope))
	assert.Equal(t, []string{backup}, d.hosts("sv_7"))
	v, err := e.adapter.VerifyRestore(ctx, p, scope)
	require.NoError(t, err)
	assert.True(t, v.Restored, "%+v", v)
	assert.Equal(t, "moved to host "+backup, arraytest.CheckOf(t, v, "pv-shared").Note)
}

func TestUnityUndoNonFootprintLUNs(t *testing.T) {
	e := startUnity(t, unityFootprintFixture, 5*time.Second)
	ctx := context.Background()
	d := newUnityDriver(t, e)
	w2, err := e.sim.HostID("worker-2.cluster.local")
	require.NoError(t, err)
	backup, err := e.sim.HostID("backup")
	require.NoError(t, err)
	// No footprint: every LUN is an array mapping, given back as it was
	// unless a host that did not have it then has it now.
	id, p := unityFenced(t, e)
	d.publish("sv_2", w2)
	require.NoError(t, e.adapter.Undo(ctx, p, arrayclients.RestoreScope{}))
	assert.Equal(t, []string{id.ObjectID}, d.hosts("sv_1"))
	assert.Equal(t, []string{w2}, d.hosts("sv_2"), "moved: skipped")
	assert.Equal(t, []string{id.ObjectID}, d.hosts("sv_3"))
	assert.ElementsMatch(t, []string{id.ObjectID, backup}, d.hosts("sv_7"), "its other host had it at the plan: given back")
	v, err := e.adapter.VerifyRestore(ctx, p, arrayclients.RestoreScope{})
	require.NoError(t, err)
	assert.True(t, v.Restored, "%+v", v)
	assert.Empty(t, v.Volumes)
}

// TestUnityUndoV1Plan: a plan written before footprints (ledger v1: no
// Volumes, the same entries) still decodes and undoes under the
// non-footprint rule.
func TestUnityUndoV1Plan(t *testing.T) {
	e := startUnity(t, unityFootprintFixture, 5*time.Second)
	ctx := context.Background()
	d := newUnityDriver(t, e)
	id, err := e.adapter.Resolve(ctx, unityNode("worker-1"))
	require.NoError(t, err)
	backup, err := e.sim.HostID("backup")
	require.NoError(t, err)
	v1 := `{"array":"unity-1","family":"unity","identity":{"array":"unity-1","family":"unity","node":"worker-1","objectID":"HOST",` +
		`"objectName":"worker-1.cluster.local","resolvedAt":"2026-11-25T00:04:24.035746552Z"},` +
		`"entries":{"hostId":"HOST","hostName":"worker-1.cluster.local","luns":[{"lun":"sv_1","name":"csivol-worker-1-00","hlu":0,"accessMask":"1"},` +
		`{"lun":"sv_2","name":"csivol-worker-1-01","hlu":1,"accessMask":"1"},{"lun":"sv_7","name":"shared","hlu":3,"accessMask":"1","otherHosts":["BACKUP"]}]},` +
		`"summary":"remove host HOST (worker-1.cluster.local) from 3 LUN(s)","createdAt":"2026-11-25T00:04:24.051879411Z"}`
	v1 = strings.ReplaceAll(strings.ReplaceAll(v1, "HOST", id.ObjectID), "BACKUP", backup)
	var p arrayclients.Plan
	require.NoError(t, json.Unmarshal([]byte(v1), &p))
	require.Empty(t, p.Volumes)
	require.NoError(t, e.adapter.Apply(ctx, p))
	for _, lun := range []string{"sv_1", "sv_2"} {
		assert.Empty(t, d.hosts(lun))
	}
	require.NoError(t, e.adapter.Undo(ctx, p, arrayclients.RestoreScope{}))
	require.NoError(t, e.adapter.Undo(ctx, p, arrayclients.RestoreScope{}), "twice")
	assert.Equal(t, []string{id.ObjectID}, d.hosts("sv_1"))
	assert.Equal(t, []string{id.ObjectID}, d.hosts("sv_2"))
	assert.ElementsMatch(t, []string{id.ObjectID, backup}, d.hosts("sv_7"))
	v, err := e.adapter.VerifyRestore(ctx, p, arrayclients.RestoreScope{})
	require.NoError(t, err)
	assert.True(t, v.Restored, "%+v", v)
}
