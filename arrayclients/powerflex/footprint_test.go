package powerflex_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/dell/goscaleio"
	siotypes "github.com/dell/goscaleio/types/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/arrayclients/internal/arraytest"
)

// pflexFootprintFixture is pflexFixture with a volume mapped to nobody.
var pflexFootprintFixture = pflexFixture + "        - name: free-vol\n"

// pflexDriver is a goscaleio client that does what csi-vxflexos's
// controller does to the array (dell/csi-powerflex service/publisher.go,
// service/controller.go): an RWO publish is refused while another SDC has
// the volume and maps without multiple mappings; unpublish unmaps.
type pflexDriver struct {
	t testing.TB
	c *goscaleio.Client
}

func (e pflexEnv) driver(t testing.TB) pflexDriver {
	t.Helper()
	c, err := goscaleio.NewClientWithArgs(e.url, "", 5, false, false, e.caFile)
	require.NoError(t, err)
	_, err = c.WithContext(context.Background()).Authenticate(&goscaleio.ConfigConnect{Endpoint: e.url, Username: e.cfg.Username, Password: e.cfg.Password})
	require.NoError(t, err)
	return pflexDriver{t: t, c: c}
}

func (d pflexDriver) volume(id string) (*goscaleio.Volume, *siotypes.Volume) {
	d.t.Helper()
	vols, err := d.c.WithContext(context.Background()).GetVolume("", id, "", "", false)
	require.NoError(d.t, err)
	require.Len(d.t, vols, 1)
	v := goscaleio.NewVolume(d.c.WithContext(context.Background()))
	v.Volume = vols[0]
	return v, vols[0]
}

func (d pflexDriver) publish(sdcID, volID string) {
	d.t.Helper()
	v, info := d.volume(volID)
	for _, m := range info.MappedSdcInfo {
		if m.SdcID == sdcID {
			return
		}
	}
	require.Empty(d.t, info.MappedSdcInfo, "volume already published to SDC")
	require.NoError(d.t, v.MapVolumeSdc(&siotypes.MapVolumeSdcParam{SdcID: sdcID, AllowMultipleMappings: "FALSE", AccessMode: "ReadWrite"}))
}

func (d pflexDriver) unpublish(sdcID, volID string) {
	d.t.Helper()
	v, info := d.volume(volID)
	for _, m := range info.MappedSdcInfo {
		if m.SdcID == sdcID {
			require.NoError(d.t, v.UnmapVolumeSdc(&siotypes.UnmapVolumeSdcParam{SdcID: sdcID, IgnoreScsiInitiators: "TRUE"}))
		}
	}
}

func pflexVolumeID(t testing.TB, e pflexEnv, name string) string {
	t.Helper()
	id, ok := e.sim.VolumeID(name)
	require.True(t, ok, name)
	return id
}

func pflexSdcsOf(e pflexEnv, volID string) []string {
	var out []string
	for _, v := range e.sim.State().Volumes {
		if v.ID == volID {
			for _, m := range v.Mappings {
				out = append(out, m.SdcID)
			}
		}
	}
	return out
}

func TestPowerFlexFootprintPlanAndVerify(t *testing.T) {
	ctx := context.Background()
	e := startPowerFlex(t, pflexFootprintFixture, arrayclients.Options{}, 5*time.Second)
	w1, _ := e.sim.SDCID("worker-1")
	w2, _ := e.sim.SDCID("worker-2")
	id, err := e.adapter.Resolve(ctx, pflexW1)
	require.NoError(t, err)
	nfs := arrayclients.VolumeRef{Volume: "pv-nfs", Object: "64b0b3a5-1f0b-4c5e-9f0e-0a1b2c3d4e5f", Protocol: arrayclients.ProtocolNFS, Attached: true}
	vols := []arrayclients.VolumeRef{
		arraytest.BlockRef("pv-mine", pflexVolumeID(t, e, "worker-1-vol-0"), true),
		arraytest.BlockRef("pv-gone", "deadbeef00000000", true),
		arraytest.BlockRef("pv-other", pflexVolumeID(t, e, "worker-2-vol-0"), true),
		arraytest.BlockRef("pv-pending", pflexVolumeID(t, e, "worker-2-vol-1"), false),
		arraytest.BlockRef("pv-free", pflexVolumeID(t, e, "free-vol"), false),
		nfs,
	}
	plan, err := e.adapter.Plan(ctx, id, vols)
	require.NoError(t, err)
	assert.Zero(t, pflexWriteRequests(e), "Plan never writes")
	plan = arraytest.RoundTrip(t, plan)
	worker2 := "sdc worker-2 (" + w2 + ")"
	tcs := []struct {
		pv      string
		cut     arrayclients.Cut
		gap     arrayclients.GapReason
		holders []string
	}{
		{"pv-mine", arrayclients.CutSDCUnmap, "", nil},
		{"pv-gone", "", arrayclients.GapVolumeNotFound, nil},
		{"pv-other", "", arrayclients.GapOtherIdentity, []string{worker2}},
		{"pv-pending", arrayclients.CutNotMapped, "", []string{worker2}},
		{"pv-free", arrayclients.CutNotMapped, "", nil},
		// NFS volumes are cut on their export (nfs_test.go);
		// this file system is not on the array.
		{"pv-nfs", "", arrayclients.GapVolumeNotFound, nil},
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

	// The pending attach reaches the array after the fence: the read-back
	// sees it and a repeated Apply removes it.
	e.driver(t).publish(w1, pflexVolumeID(t, e, "free-vol"))
	v, err = e.adapter.Verify(ctx, plan)
	require.NoError(t, err)
	assert.False(t, v.Fenced)
	assert.True(t, arraytest.CheckOf(t, v, "pv-free").NodeAccess)
	require.NoError(t, e.adapter.Apply(ctx, plan))
	v, err = e.adapter.Verify(ctx, plan)
	require.NoError(t, err)
	assert.True(t, v.Fenced, "remaining: %v", v.Remaining)
}

// A plan reads the SDC and its mapped volumes (GET Sdc::<id> and its
// relationships/Volume, whole volume objects with every SDC each is mapped
// to) and answers the footprint volumes listed there from that listing: it
// reads by ID only the footprint volumes not mapped to the SDC, with the
// same cuts and holders a read by ID gives. A read-back after the fence
// lists no volume of the SDC, so it reads each footprint volume by ID.
func TestPowerFlexPlanReadsMappedVolumesFromTheSDCListing(t *testing.T) {
	ctx := context.Background()
	e := startPowerFlex(t, pflexFootprintFixture, arrayclients.Options{}, 5*time.Second)
	w1, _ := e.sim.SDCID("worker-1")
	w2, _ := e.sim.SDCID("worker-2")
	id, err := e.adapter.Resolve(ctx, pflexW1)
	require.NoError(t, err)
	mine := []string{pflexVolumeID(t, e, "worker-1-vol-0"), pflexVolumeID(t, e, "worker-1-vol-1"), pflexVolumeID(t, e, "shared-vol")}
	free := pflexVolumeID(t, e, "free-vol")
	vols := []arrayclients.VolumeRef{
		arraytest.BlockRef("pv-a", mine[0], true),
		arraytest.BlockRef("pv-b", mine[1], true),
		arraytest.BlockRef("pv-shared", mine[2], true),
		arraytest.BlockRef("pv-free", free, false),
	}
	_, err = e.adapter.Plan(ctx, id, vols) // the first plan also finds the system
	require.NoError(t, err)

	seq := e.srv.LastSeq()
	plan, err := e.adapter.Plan(ctx, id, vols)
	require.NoError(t, err)
	var paths []string
	for _, a := range pflexReads(e, seq) {
		paths = append(paths, a.Path)
	}
	require.Len(t, paths, 3, "the SDC, its volumes and the one footprint volume not mapped to it: %v", paths)
	assert.Equal(t, "/api/instances/Sdc::"+w1, paths[0])
	assert.Equal(t, "/api/instances/Sdc::"+w1+"/relationships/Volume", paths[1])
	assert.Contains(t, paths[2], free)
	assert.Equal(t, arrayclients.CutSDCUnmap, arraytest.CutOf(t, plan, "pv-a").Cut)
	assert.Equal(t, arrayclients.CutSDCUnmap, arraytest.CutOf(t, plan, "pv-b").Cut)
	shared := arraytest.CutOf(t, plan, "pv-shared")
	assert.Equal(t, arrayclients.CutSDCUnmap, shared.Cut)
	assert.Equal(t, []string{"sdc worker-2 (" + w2 + ")"}, shared.Holders, "the listing names the other holders")
	assert.Equal(t, arrayclients.CutNotMapped, arraytest.CutOf(t, plan, "pv-free").Cut)
	assert.Nil(t, arraytest.CutOf(t, plan, "pv-free").Holders)

	require.NoError(t, e.adapter.Apply(ctx, plan))
	seq = e.srv.LastSeq()
	v, err := e.adapter.Verify(ctx, plan)
	require.NoError(t, err)
	assert.True(t, v.Fenced, "remaining: %v", v.Remaining)
	assert.Len(t, pflexReads(e, seq), 2+len(vols), "a read-back reads every footprint volume by ID once fenced")
	assert.Equal(t, []string{"sdc worker-2 (" + w2 + ")"}, arraytest.CheckOf(t, v, "pv-shared").Holders)
}

func TestPowerFlexUnfenceReconciles(t *testing.T) {
	ctx := context.Background()
	e := startPowerFlex(t, pflexFootprintFixture, arrayclients.Options{}, 5*time.Second)
	drv := e.driver(t)
	w1, _ := e.sim.SDCID("worker-1")
	w2, _ := e.sim.SDCID("worker-2")
	moved, unwanted, kept := pflexVolumeID(t, e, "worker-1-vol-0"), pflexVolumeID(t, e, "worker-1-vol-1"), pflexVolumeID(t, e, "worker-1-vol-2")
	shared := pflexVolumeID(t, e, "shared-vol")
	id, err := e.adapter.Resolve(ctx, pflexW1)
	require.NoError(t, err)
	sharedRef := arraytest.BlockRef("pv-shared", shared, true)
	sharedRef.MultiNode = true
	plan, err := e.adapter.Plan(ctx, id, []arrayclients.VolumeRef{
		arraytest.BlockRef("pv-moved", moved, true), arraytest.BlockRef("pv-unwanted", unwanted, true), arraytest.BlockRef("pv-kept", kept, true), sharedRef})
	require.NoError(t, err)
	plan = arraytest.RoundTrip(t, plan)
	require.NoError(t, e.adapter.Apply(ctx, plan))

	// Kubernetes force-detaches pv-moved and publishes it to worker-2;
	// pv-unwanted's VolumeAttachment is gone.
	drv.publish(w2, moved)
	scope := arrayclients.RestoreScope{Wanted: []string{"pv-moved", "pv-kept", "pv-shared"}}
	seq := e.srv.LastSeq()
	require.NoError(t, e.adapter.Undo(ctx, plan, scope))
	assert.Equal(t, []string{w2}, pflexSdcsOf(e, moved), "a moved volume is never given back")
	assert.Empty(t, pflexSdcsOf(e, unwanted), "an unwanted volume is not given back")
	assert.Equal(t, []string{w1}, pflexSdcsOf(e, kept), "a wanted, unheld volume is given back")
	assert.ElementsMatch(t, []string{w1, w2}, pflexSdcsOf(e, shared), "a multi-node volume is given back beside its other holder")
	var maps int
	for _, w := range arraytest.WritesSince(e.srv, seq) {
		if !strings.Contains(w.Path, "addMappedSdc") {
			continue
		}
		maps++
		if strings.Contains(w.Path, kept) {
			assert.Contains(t, w.Body, `"allowMultipleMappings":"FALSE"`, "never multiple mappings for a single-node volume")
		}
	}
	assert.Equal(t, 2, maps, "kept and shared are mapped back, nothing else")

	v, err := e.adapter.VerifyRestore(ctx, plan, scope)
	require.NoError(t, err)
	assert.True(t, v.Restored, "missing: %v, remaining: %v", v.Missing, v.Remaining)
	c := arraytest.CheckOf(t, v, "pv-moved")
	assert.False(t, c.NodeAccess)
	assert.Equal(t, "moved to sdc worker-2 ("+w2+")", c.Note)
	c = arraytest.CheckOf(t, v, "pv-unwanted")
	assert.False(t, c.NodeAccess)
	assert.Equal(t, "not wanted by Kubernetes on the node", c.Note)
	assert.True(t, arraytest.CheckOf(t, v, "pv-kept").NodeAccess)
	assert.True(t, arraytest.CheckOf(t, v, "pv-shared").NodeAccess)

	seq = e.srv.LastSeq()
	require.NoError(t, e.adapter.Undo(ctx, plan, scope), "Undo twice")
	assert.Empty(t, arraytest.WritesSince(e.srv, seq), "the second Undo writes nothing")

	// The pod moves back: the driver's publish to worker-1 succeeds.
	drv.unpublish(w2, moved)
	drv.publish(w1, moved)
}

// Plans written before footprints (ledger v1: no holders recorded) decode
// and undo: each mapping comes back unless another SDC has the volume now.
func TestPowerFlexUndoV1Plan(t *testing.T) {
	ctx := context.Background()
	e := startPowerFlex(t, pflexFootprintFixture, arrayclients.Options{}, 5*time.Second)
	w1, _ := e.sim.SDCID("worker-1")
	w2, _ := e.sim.SDCID("worker-2")
	id, err := e.adapter.Resolve(ctx, pflexW1)
	require.NoError(t, err)
	plan, err := e.adapter.Plan(ctx, id, nil)
	require.NoError(t, err)
	var entries map[string]any
	require.NoError(t, json.Unmarshal(plan.Entries, &entries))
	delete(entries, "holdersRecorded")
	for _, m := range entries["mappings"].([]any) {
		delete(m.(map[string]any), "holders")
	}
	plan.Entries, err = json.Marshal(entries)
	require.NoError(t, err)
	plan = arraytest.RoundTrip(t, plan)
	require.NoError(t, e.adapter.Apply(ctx, plan))
	moved := pflexVolumeID(t, e, "worker-1-vol-0")
	e.driver(t).publish(w2, moved)

	seq := e.srv.LastSeq()
	require.NoError(t, e.adapter.Undo(ctx, plan, arrayclients.RestoreScope{}))
	for _, w := range arraytest.WritesSince(e.srv, seq) {
		if strings.Contains(w.Path, "addMappedSdc") {
			assert.Contains(t, w.Body, `"allowMultipleMappings":"FALSE"`, w.Path)
		}
	}
	assert.Equal(t, []string{w2}, pflexSdcsOf(e, moved), "moved: not given back")
	for _, name := range []string{"worker-1-vol-1", "worker-1-vol-2"} {
		assert.Equal(t, []string{w1}, pflexSdcsOf(e, pflexVolumeID(t, e, name)), name)
	}
	// A v1 plan did not record that shared-vol was shared: another SDC
	// has it now, so it is left as it is.
	assert.Equal(t, []string{w2}, pflexSdcsOf(e, pflexVolumeID(t, e, "shared-vol")))
	v, err := e.adapter.VerifyRestore(ctx, plan, arrayclients.RestoreScope{})
	require.NoError(t, err)
	assert.True(t, v.Restored, "missing: %v", v.Missing)
	seq = e.srv.LastSeq()
	require.NoError(t, e.adapter.Undo(ctx, plan, arrayclients.RestoreScope{}))
	assert.Empty(t, arraytest.WritesSince(e.srv, seq))
}
