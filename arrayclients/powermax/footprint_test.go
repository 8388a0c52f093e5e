package powermax_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	pmax "github.com/dell/gopowermax/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/arrayclients/internal/arraytest"
)

// pmaxFootprintFixture is pmaxFixture with a volume in no storage group.
var pmaxFootprintFixture = strings.Replace(pmaxFixture, "      generate:", "      volumes: [\"00500\"]\n      generate:", 1)

const (
	pmaxSG1 = "csi-no-srp-sg-TST-worker-1-FC"
	pmaxSG2 = "csi-no-srp-sg-TST-worker-2-FC"
)

// pmaxDriver is a gopowermax client that does what csi-powermax's
// controller does to the array: publish adds the volume to the node's
// storage group, unpublish removes it (dell/csi-powermax
// service/storage_group_svc.go).
type pmaxDriver struct {
	t testing.TB
	c pmax.Pmax
}

func (e pmaxEnv) driver(t testing.TB) pmaxDriver {
	t.Helper()
	c, err := pmax.NewClientWithArgs(e.cfg.Endpoint, "driver", false, true, e.cfg.CAFile)
	require.NoError(t, err)
	require.NoError(t, c.Authenticate(context.Background(), &pmax.ConfigConnect{Endpoint: e.cfg.Endpoint, Username: e.cfg.Username, Password: e.cfg.Password}))
	return pmaxDriver{t: t, c: c.WithSymmetrixID(pmaxSym)}
}

func (d pmaxDriver) publish(sg, dev string) {
	d.t.Helper()
	require.NoError(d.t, d.c.AddVolumesToStorageGroupS(context.Background(), pmaxSym, sg, true, dev))
}

func (d pmaxDriver) unpublish(sg, dev string) {
	d.t.Helper()
	_, err := d.c.RemoveVolumesFromStorageGroup(context.Background(), pmaxSym, sg, true, dev)
	require.NoError(d.t, err)
}

func (d pmaxDriver) groupsOf(dev string) []string {
	d.t.Helper()
	v, err := d.c.GetVolumeByID(context.Background(), pmaxSym, dev)
	require.NoError(d.t, err)
	return v.StorageGroupIDList
}

func pmaxRef(pv, dev string, attached bool) arrayclients.VolumeRef {
	return arrayclients.VolumeRef{Volume: pv, Object: dev, Protocol: arrayclients.ProtocolBlock, Attached: attached}
}

func TestPowerMaxFootprintPlanAndVerify(t *testing.T) {
	e := startPowerMax(t, pmaxFootprintFixture, 5*time.Second)
	ctx := context.Background()
	id, err := e.adapter.Resolve(ctx, pmaxNode("worker-1"))
	require.NoError(t, err)
	nfs := pmaxRef("pv-nfs", "649112ce-742b-b93a-abcd-026048200208", true)
	nfs.Protocol = arrayclients.ProtocolNFS
	plan, err := e.adapter.Plan(ctx, id, []arrayclients.VolumeRef{
		pmaxRef("pv-mine", "00100", true),
		pmaxRef("pv-gone", "00FFF", true),
		pmaxRef("pv-other", "00103", true),
		pmaxRef("pv-pending", "00104", false),
		pmaxRef("pv-free", "00500", false),
		nfs,
	})
	require.NoError(t, err)
	assert.Empty(t, e.srv.AuditWrites(), "Plan never writes")
	plan = arraytest.RoundTrip(t, plan)
	worker2 := "host csi-node-TST-worker-2-FC"
	tcs := []struct {
		pv      string
		cut     arrayclients.Cut
		gap     arrayclients.GapReason
		holders []string
	}{
		{"pv-mine", arrayclients.CutHostInitiators, "", nil},
		{"pv-gone", "", arrayclients.GapVolumeNotFound, nil},
		{"pv-other", "", arrayclients.GapOtherIdentity, []string{worker2}},
		{"pv-pending", arrayclients.CutNotMapped, "", []string{worker2}},
		{"pv-free", arrayclients.CutNotMapped, "", nil},
		{"pv-nfs", "", arrayclients.GapNotFenceable, nil},
	}
	require.Len(t, plan.Volumes, len(tcs))
	for _, tc := range tcs {
		t.Run(tc.pv, func(t *testing.T) {
			vc := arraytest.CutOf(t, plan, tc.pv)
			assert.Equal(t, tc.cut, vc.Cut)
			if tc.gap == "" {
				assert.Nil(t, vc.Gap)
			} else if assert.NotNil(t, vc.Gap) {
				assert.Equal(t, tc.gap, vc.Gap.Reason)
				assert.Contains(t, vc.Gap.Detail, tc.pv)
			}
			assert.Equal(t, tc.holders, vc.Holders)
		})
	}

	v, err := e.adapter.Verify(ctx, plan)
	require.NoError(t, err)
	assert.False(t, v.Fenced)
	require.Len(t, v.Volumes, 3, "a read-back of every volume with a cut")
	assert.True(t, arraytest.CheckOf(t, v, "pv-mine").NodeAccess)
	assert.False(t, arraytest.CheckOf(t, v, "pv-free").NodeAccess)

	require.NoError(t, e.adapter.Apply(ctx, plan))
	v, err = e.adapter.Verify(ctx, plan)
	require.NoError(t, err)
	assert.True(t, v.Fenced, "remaining: %v", v.Remaining)
	for _, c := range v.Volumes {
		assert.False(t, c.NodeAccess, c.Volume)
	}
	// The pending publish reaches the array after the fence: a host
	// without initiators still reaches nothing.
	e.driver(t).publish(pmaxSG1, "00500")
	v, err = e.adapter.Verify(ctx, plan)
	require.NoError(t, err)
	assert.True(t, v.Fenced, "remaining: %v", v.Remaining)
	assert.False(t, arraytest.CheckOf(t, v, "pv-free").NodeAccess)
}

func TestPowerMaxUnfenceReconciles(t *testing.T) {
	e := startPowerMax(t, pmaxFootprintFixture, 5*time.Second)
	ctx := context.Background()
	drv := e.driver(t)
	id, err := e.adapter.Resolve(ctx, pmaxNode("worker-1"))
	require.NoError(t, err)
	plan, err := e.adapter.Plan(ctx, id, []arrayclients.VolumeRef{
		pmaxRef("pv-moved", "00100", true), pmaxRef("pv-unwanted", "00101", true), pmaxRef("pv-kept", "00102", true)})
	require.NoError(t, err)
	plan = arraytest.RoundTrip(t, plan)
	require.NoError(t, e.adapter.Apply(ctx, plan))

	// Kubernetes force-detaches pv-moved (the driver removes it from
	// worker-1's storage group) and publishes it to worker-2. The unpublish
	// of pv-unwanted never reached the array: it is still in worker-1's
	// storage group.
	drv.unpublish(pmaxSG1, "00100")
	drv.publish(pmaxSG2, "00100")

	scope := arrayclients.RestoreScope{Wanted: []string{"pv-moved", "pv-kept"}}
	seq := e.srv.LastSeq()
	require.NoError(t, e.adapter.Undo(ctx, plan, scope))
	writes := arraytest.WritesSince(e.srv, seq)
	require.Len(t, writes, 2, "%v", writes)
	assert.Contains(t, writes[0].Path, "/storagegroup/"+pmaxSG1)
	assert.Contains(t, writes[0].Body, "00101")
	assert.Contains(t, writes[1].Path, "/host/csi-node-TST-worker-1-FC", "initiators come back only after the unwanted volume left")
	assert.Equal(t, []string{pmaxSG2}, drv.groupsOf("00100"), "a moved volume is never given back")
	assert.Empty(t, drv.groupsOf("00101"), "an unwanted volume is not given back")
	assert.Equal(t, []string{pmaxSG1}, drv.groupsOf("00102"), "a wanted volume stays")

	v, err := e.adapter.VerifyRestore(ctx, plan, scope)
	require.NoError(t, err)
	assert.True(t, v.Restored, "missing: %v, remaining: %v", v.Missing, v.Remaining)
	c := arraytest.CheckOf(t, v, "pv-moved")
	assert.False(t, c.NodeAccess)
	assert.Equal(t, "moved to host csi-node-TST-worker-2-FC", c.Note)
	c = arraytest.CheckOf(t, v, "pv-unwanted")
	assert.False(t, c.NodeAccess)
	assert.Equal(t, "not wanted by Kubernetes on the node", c.Note)
	c = arraytest.CheckOf(t, v, "pv-kept")
	assert.True(t, c.NodeAccess)
	assert.Empty(t, c.Note)

	seq = e.srv.LastSeq()
	require.NoError(t, e.adapter.Undo(ctx, plan, scope), "Undo twice")
	assert.Empty(t, arraytest.WritesSince(e.srv, seq), "the second Undo writes nothing")

	// The pod moves back: the driver's publish to worker-1 succeeds.
	drv.unpublish(pmaxSG2, "00100")
	drv.publish(pmaxSG1, "00100")
}

// A restore read-back is not Restored while a volume the node may not keep
// is masked to its host with initiators.
func TestPowerMaxVerifyRestoreCatchesRegrant(t *testing.T) {
	e := startPowerMax(t, pmaxFootprintFixture, 5*time.Second)
	ctx := context.Background()
	id, err := e.adapter.Resolve(ctx, pmaxNode("worker-1"))
	require.NoError(t, err)
	plan, err := e.adapter.Plan(ctx, id, []arrayclients.VolumeRef{pmaxRef("pv-a", "00100", true)})
	require.NoError(t, err)
	require.NoError(t, e.adapter.Apply(ctx, plan))
	require.NoError(t, e.adapter.Undo(ctx, plan, arrayclients.RestoreScope{}))
	e.driver(t).publish(pmaxSG1, "00100")
	v, err := e.adapter.VerifyRestore(ctx, plan, arrayclients.RestoreScope{})
	require.NoError(t, err)
	assert.False(t, v.Restored)
	assert.True(t, arraytest.CheckOf(t, v, "pv-a").NodeAccess)
}

// Removing the last volumes of the node's storage group: the masking view
// goes first, as csi-powermax does, and the array refuses otherwise.
func TestPowerMaxUndoRemovesLastVolumes(t *testing.T) {
	e := startPowerMax(t, pmaxFootprintFixture, 5*time.Second)
	ctx := context.Background()
	drv := e.driver(t)
	_, err := drv.c.RemoveVolumesFromStorageGroup(ctx, pmaxSym, pmaxSG1, true, "00100", "00101", "00102")
	require.ErrorContains(t, err, "masking view", "the array will not empty a masked storage group")

	id, err := e.adapter.Resolve(ctx, pmaxNode("worker-1"))
	require.NoError(t, err)
	plan, err := e.adapter.Plan(ctx, id, []arrayclients.VolumeRef{
		pmaxRef("pv-a", "00100", true), pmaxRef("pv-b", "00101", true), pmaxRef("pv-c", "00102", true)})
	require.NoError(t, err)
	require.NoError(t, e.adapter.Apply(ctx, plan))
	require.NoError(t, e.adapter.Undo(ctx, plan, arrayclients.RestoreScope{}))
	for _, dev := range []string{"00100", "00101", "00102"} {
		assert.Empty(t, drv.groupsOf(dev), dev)
	}
	h, err := drv.c.GetHostByID(ctx, pmaxSym, "csi-node-TST-worker-1-FC")
	require.NoError(t, err)
	assert.Empty(t, h.MaskingviewIDs)
	assert.Len(t, h.Initiators, 2, "initiators are back")
	v, err := e.adapter.VerifyRestore(ctx, plan, arrayclients.RestoreScope{})
	require.NoError(t, err)
	assert.True(t, v.Restored, "missing: %v, remaining: %v", v.Missing, v.Remaining)
}

// Plans written before footprints (ledger v1) decode and undo: the
// initiators come back.
func TestPowerMaxUndoV1Plan(t *testing.T) {
	e := startPowerMax(t, pmaxFootprintFixture, 5*time.Second)
	ctx := context.Background()
	before, _ := pmaxState(t, e.sim)
	id, err := e.adapter.Resolve(ctx, pmaxNode("worker-2"))
	require.NoError(t, err)
	plan, err := e.adapter.Plan(ctx, id, nil)
	require.NoError(t, err)
	raw, err := json.Marshal(plan)
	require.NoError(t, err)
	assert.NotContains(t, string(raw), `"volumes"`, "a plan without footprint is what ledger v1 wrote")
	plan = arraytest.RoundTrip(t, plan)
	require.NoError(t, e.adapter.Apply(ctx, plan))
	require.NoError(t, e.adapter.Undo(ctx, plan, arrayclients.RestoreScope{}))
	v, err := e.adapter.VerifyRestore(ctx, plan, arrayclients.RestoreScope{})
	require.NoError(t, err)
	assert.True(t, v.Restored, "missing: %v", v.Missing)
	assert.Empty(t, v.Volumes)
	after, _ := pmaxState(t, e.sim)
	assert.Equal(t, before, after)
}

// TestPowerMaxEmptyInitiatorGroupRefused: an array that refuses to empty
// an initiator group still in a masking view (no Dell document says a
// PowerMax accepts it) gets the fallback cut. The host's masking view is
// deleted, the read-back shows the node reaching none of its volumes, and
// the unfence removes the moved and the unwanted volume from the node's
// storage group before it makes the view again.
func TestPowerMaxEmptyInitiatorGroupRefused(t *testing.T) {
	doc := strings.Replace(pmaxFootprintFixture, "      generate:", "      refuseEmptyInitiatorGroupInView: true\n      generate:", 1)
	e := startPowerMax(t, doc, 5*time.Second)
	ctx := context.Background()
	drv := e.driver(t)
	const hostID = "csi-node-TST-worker-1-FC"
	h, err := drv.c.GetHostByID(ctx, pmaxSym, hostID)
	require.NoError(t, err)
	views := h.MaskingviewIDs
	require.NotEmpty(t, views)
	_, err = drv.c.UpdateHostInitiators(ctx, pmaxSym, h, nil)
	require.ErrorContains(t, err, "masking view", "the simulator refuses an empty initiator group in a view")

	id, err := e.adapter.Resolve(ctx, pmaxNode("worker-1"))
	require.NoError(t, err)
	plan, err := e.adapter.Plan(ctx, id, []arrayclients.VolumeRef{
		pmaxRef("pv-moved", "00100", true), pmaxRef("pv-unwanted", "00101", true), pmaxRef("pv-kept", "00102", true)})
	require.NoError(t, err)
	plan = arraytest.RoundTrip(t, plan)
	require.NoError(t, e.adapter.Apply(ctx, plan), "the fence completes by the fallback")

	h, err = drv.c.GetHostByID(ctx, pmaxSym, hostID)
	require.NoError(t, err)
	assert.Empty(t, h.MaskingviewIDs, "the host's masking view is deleted")
	assert.Len(t, h.Initiators, 2, "the initiators stay")
	v, err := e.adapter.Verify(ctx, plan)
	require.NoError(t, err)
	assert.True(t, v.Fenced, "remaining: %v", v.Remaining)
	require.Len(t, v.Volumes, 3)
	for _, c := range v.Volumes {
		assert.False(t, c.NodeAccess, c.Volume)
	}
	seq := e.srv.LastSeq()
	require.NoError(t, e.adapter.Apply(ctx, plan), "Apply again")
	for _, w := range arraytest.WritesSince(e.srv, seq) {
		assert.NotContains(t, w.Path, "maskingview", "a second Apply deletes nothing more: %v", w)
	}

	// pv-moved is force-detached and published to worker-2; Kubernetes no
	// longer wants pv-unwanted on worker-1.
	drv.unpublish(pmaxSG1, "00100")
	drv.publish(pmaxSG2, "00100")
	scope := arrayclients.RestoreScope{Wanted: []string{"pv-moved", "pv-kept"}}
	v, err = e.adapter.VerifyRestore(ctx, plan, scope)
	require.NoError(t, err)
	assert.False(t, v.Restored, "the view is not back yet")
	assert.Contains(t, v.Missing, "masking view "+views[0])

	require.NoError(t, e.adapter.Undo(ctx, plan, scope))
	h, err = drv.c.GetHostByID(ctx, pmaxSym, hostID)
	require.NoError(t, err)
	assert.Equal(t, views, h.MaskingviewIDs, "the masking view is made again")
	assert.Equal(t, []string{pmaxSG2}, drv.groupsOf("00100"), "a moved volume is never given back")
	assert.Empty(t, drv.groupsOf("00101"), "an unwanted volume left the storage group before the view came back")
	assert.Equal(t, []string{pmaxSG1}, drv.groupsOf("00102"), "a wanted volume stays")
	v, err = e.adapter.VerifyRestore(ctx, plan, scope)
	require.NoError(t, err)
	assert.True(t, v.Restored, "missing: %v, remaining: %v", v.Missing, v.Remaining)
	assert.True(t, arraytest.CheckOf(t, v, "pv-kept").NodeAccess)
	assert.False(t, arraytest.CheckOf(t, v, "pv-moved").NodeAccess)

	seq = e.srv.LastSeq()
	require.NoError(t, e.adapter.Undo(ctx, plan, scope), "Undo twice")
	assert.Empty(t, arraytest.WritesSince(e.srv, seq), "the second Undo writes nothing")
}
