package powerstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/dell/gopowerstore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/arrayclients/internal/arraytest"
)

// psFootprintFixture is psFixture with a volume attached to nobody.
var psFootprintFixture = strings.Replace(psFixture, "      pageSize: 2\n", "      pageSize: 2\n      volumes: [{name: free-1}]\n", 1)

// psVolumeID is the UUID of the volume named name.
func (e *psEnv) volumeID(t testing.TB, name string) string {
	t.Helper()
	for _, v := range e.state(t).Volumes {
		if v.Name == name {
			return v.ID
		}
	}
	t.Fatalf("no volume %s", name)
	return ""
}

// hostOf is the id of the host csi-powerstore created for a fixture node.
func (e *psEnv) hostOf(t testing.TB, node string) string {
	t.Helper()
	id, ok := e.sim.HostID(e.node(node).CSINodeIDs[arrayclients.DriverPowerStore])
	require.True(t, ok, node)
	return id
}

// holdersOf lists the hosts a volume is attached to, by id.
func (e *psEnv) holdersOf(t testing.TB, volID string) []string {
	t.Helper()
	var out []string
	for _, m := range e.state(t).Mappings {
		if m.VolumeID == volID && m.HostID != "" {
			out = append(out, m.HostID)
		}
	}
	return out
}

// psDriver is a gopowerstore client that does what csi-powerstore's
// controller does to the array: publish attaches a volume to a host,
// unpublish detaches it (dell/csi-powerstore pkg/controller/publisher.go,
// pkg/controller/base.go).
type psDriver struct {
	t testing.TB
	c gopowerstore.Client
}

func (e *psEnv) driver(t testing.TB) psDriver {
	t.Helper()
	opts := gopowerstore.NewClientOptions().SetCAFilePath(e.cfg.CAFile)
	c, err := gopowerstore.NewClientWithArgs(e.url+"/api/rest", e.cfg.Username, e.cfg.Password, opts)
	require.NoError(t, err)
	return psDriver{t: t, c: c}
}

func (d psDriver) unpublish(hostID, volID string) {
	d.t.Helper()
	_, err := d.c.DetachVolumeFromHost(context.Background(), hostID, &gopowerstore.HostVolumeDetach{VolumeID: &volID})
	var apiErr gopowerstore.APIError
	if err != nil && (!errors.As(err, &apiErr) || apiErr.StatusCode != 400) { // 400: not attached
		require.NoError(d.t, err)
	}
}

// publish attaches an RWO volume, refusing as the driver does when another
// host has it.
func (d psDriver) publish(hostID, volID string) {
	d.t.Helper()
	maps, err := d.c.GetHostVolumeMappingByVolumeID(context.Background(), volID)
	require.NoError(d.t, err)
	for _, m := range maps {
		if m.HostID == hostID {
			return
		}
	}
	require.Empty(d.t, maps, "volume already present in a different lun mapping")
	_, err = d.c.AttachVolumeToHost(context.Background(), hostID, &gopowerstore.HostVolumeAttach{VolumeID: &volID})
	require.NoError(d.t, err)
}

func TestPowerStoreFootprintPlanAndVerify(t *testing.T) {
	for _, mode := range []string{arrayclients.PowerStoreModeInitiators, arrayclients.PowerStoreModeDetach} {
		t.Run(mode, func(t *testing.T) {
			e := newPSEnv(t, psFootprintFixture)
			a := e.adapter(t, func(c *arrayclients.Config) { c.PowerStoreFenceMode = mode })
			ctx := context.Background()
			id, err := a.Resolve(ctx, e.node("worker-1"))
			require.NoError(t, err)
			mine := e.volumeID(t, "pvc-worker-1-0")
			nfs := arraytest.BlockRef("pv-nfs", e.volumeID(t, "pvc-worker-1-1"), true)
			nfs.Protocol = arrayclients.ProtocolNFS
			vols := []arrayclients.VolumeRef{
				arraytest.BlockRef("pv-mine", mine, true),
				arraytest.BlockRef("pv-gone", "0badc0de-0000-4000-8000-000000000000", true),
				arraytest.BlockRef("pv-other", e.volumeID(t, "pvc-worker-2-0"), true),
				arraytest.BlockRef("pv-pending", e.volumeID(t, "pvc-worker-2-1"), false),
				arraytest.BlockRef("pv-free", e.volumeID(t, "free-1"), false),
				nfs,
			}
			seq := e.srv.LastSeq()
			plan, err := a.Plan(ctx, id, vols)
			require.NoError(t, err)
			assert.Empty(t, arraytest.WritesSince(e.srv, seq), "Plan never writes")
			plan = arraytest.RoundTrip(t, plan)
			worker2 := "host " + e.node("worker-2").CSINodeIDs[arrayclients.DriverPowerStore]

			wantCut := arrayclients.CutHostInitiators
			if mode == arrayclients.PowerStoreModeDetach {
				wantCut = arrayclients.CutHostDetach
			}
			tcs := []struct {
				pv      string
				cut     arrayclients.Cut
				gap     arrayclients.GapReason
				holders []string
			}{
				{"pv-mine", wantCut, "", nil},
				{"pv-gone", "", arrayclients.GapVolumeNotFound, nil},
				{"pv-other", "", arrayclients.GapOtherIdentity, []string{worker2}},
				{"pv-pending", arrayclients.CutNotMapped, "", []string{worker2}},
				{"pv-free", arrayclients.CutNotMapped, "", nil},
				// NFS volumes are cut now (TestPowerStoreNFS*); an NFS
				// handle names a file system, and a block volume's UUID
				// is none.
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

			v, err := a.Verify(ctx, plan)
			require.NoError(t, err)
			assert.False(t, v.Fenced)
			require.Len(t, v.Volumes, 3, "a read-back of every volume with a cut")
			assert.True(t, arraytest.CheckOf(t, v, "pv-mine").NodeAccess)
			assert.False(t, arraytest.CheckOf(t, v, "pv-pending").NodeAccess)
			assert.False(t, arraytest.CheckOf(t, v, "pv-free").NodeAccess)

			require.NoError(t, a.Apply(ctx, plan))
			v, err = a.Verify(ctx, plan)
			require.NoError(t, err)
			assert.True(t, v.Fenced, "remaining: %v", v.Remaining)
			for _, c := range v.Volumes {
				assert.False(t, c.NodeAccess, c.Volume)
			}
			assert.Equal(t, []string{worker2}, arraytest.CheckOf(t, v, "pv-pending").Holders)

			// The driver's pending attach reaches the array after the
			// fence: the read-back sees it, and in detach mode a repeated
			// Apply removes it.
			e.driver(t).publish(e.hostOf(t, "worker-1"), e.volumeID(t, "free-1"))
			v, err = a.Verify(ctx, plan)
			require.NoError(t, err)
			if mode == arrayclients.PowerStoreModeDetach {
				assert.False(t, v.Fenced)
				assert.True(t, arraytest.CheckOf(t, v, "pv-free").NodeAccess)
				require.NoError(t, a.Apply(ctx, plan))
				v, err = a.Verify(ctx, plan)
				require.NoError(t, err)
			}
			assert.True(t, v.Fenced, "remaining: %v", v.Remaining)
			assert.False(t, arraytest.CheckOf(t, v, "pv-free").NodeAccess, "a host without initiators reaches nothing")
		})
	}
}

func TestPowerStoreUnfenceReconciles(t *testing.T) {
	for _, mode := range []string{arrayclients.PowerStoreModeInitiators, arrayclients.PowerStoreModeDetach} {
		t.Run(mode, func(t *testing.T) {
			e := newPSEnv(t, psFootprintFixture)
			a := e.adapter(t, func(c *arrayclients.Config) { c.PowerStoreFenceMode = mode })
			ctx := context.Background()
			drv := e.driver(t)
			h1, h2 := e.hostOf(t, "worker-1"), e.hostOf(t, "worker-2")
			moved, unwanted, kept := e.volumeID(t, "pvc-worker-1-0"), e.volumeID(t, "pvc-worker-1-1"), e.volumeID(t, "pvc-worker-1-2")
			id, err := a.Resolve(ctx, e.node("worker-1"))
			require.NoError(t, err)
			plan, err := a.Plan(ctx, id, []arrayclients.VolumeRef{
				arraytest.BlockRef("pv-moved", moved, true), arraytest.BlockRef("pv-unwanted", unwanted, true), arraytest.BlockRef("pv-kept", kept, true)})
			require.NoError(t, err)
			plan = arraytest.RoundTrip(t, plan)
			require.NoError(t, a.Apply(ctx, plan))
			v, err := a.Verify(ctx, plan)
			require.NoError(t, err)
			require.True(t, v.Fenced, "remaining: %v", v.Remaining)

			// Out-of-service taint: Kubernetes force-detaches pv-moved
			// (the driver's unpublish) and publishes it to worker-2.
			// pv-unwanted's VolumeAttachment is gone but its unpublish
			// never reached the array (in initiators mode it is still
			// attached to worker-1's host).
			drv.unpublish(h1, moved)
			drv.publish(h2, moved)

			// Kubernetes still (wrongly) lists pv-moved as wanted: it is
			// held by worker-2 now, so it stays there.
			scope := arrayclients.RestoreScope{Wanted: []string{"pv-moved", "pv-kept"}}
			seq := e.srv.LastSeq()
			require.NoError(t, a.Undo(ctx, plan, scope))
			writes := arraytest.WritesSince(e.srv, seq)
			if mode == arrayclients.PowerStoreModeInitiators {
				require.Len(t, writes, 2, "one detach, then the initiators: %v", writes)
				assert.Contains(t, writes[0].Path, "/host/"+h1+"/detach")
				assert.Contains(t, writes[0].Body, unwanted)
				assert.Equal(t, "PATCH", writes[1].Method, "initiators come back only after the unwanted volume is detached")
			}
			assert.Equal(t, []string{h2}, e.holdersOf(t, moved), "a moved volume is never given back")
			assert.Empty(t, e.holdersOf(t, unwanted), "an unwanted volume is not given back")
			assert.Equal(t, []string{h1}, e.holdersOf(t, kept), "a wanted, unheld volume is given back")

			v, err = a.VerifyRestore(ctx, plan, scope)
			require.NoError(t, err)
			assert.True(t, v.Restored, "missing: %v, remaining: %v", v.Missing, v.Remaining)
			c := arraytest.CheckOf(t, v, "pv-moved")
			assert.False(t, c.NodeAccess)
			assert.Equal(t, "moved to host "+e.node("worker-2").CSINodeIDs[arrayclients.DriverPowerStore], c.Note)
			c = arraytest.CheckOf(t, v, "pv-unwanted")
			assert.False(t, c.NodeAccess)
			assert.Equal(t, "not wanted by Kubernetes on the node", c.Note)
			c = arraytest.CheckOf(t, v, "pv-kept")
			assert.True(t, c.NodeAccess)
			assert.Empty(t, c.Note)

			seq = e.srv.LastSeq()
			require.NoError(t, a.Undo(ctx, plan, scope), "Undo twice")
			assert.Empty(t, arraytest.WritesSince(e.srv, seq), "the second Undo writes nothing")

			// The pod moves back: the driver's publish to worker-1 succeeds.
			drv.unpublish(h2, moved)
			drv.publish(h1, moved)
		})
	}
}

// A restore read-back is not Restored while a volume the node may not keep
// reaches its host (here re-attached behind fenced's back).
func TestPowerStoreVerifyRestoreCatchesRegrant(t *testing.T) {
	e := newPSEnv(t, psFootprintFixture)
	a := e.adapter(t, nil)
	ctx := context.Background()
	vol := e.volumeID(t, "pvc-worker-1-0")
	id, err := a.Resolve(ctx, e.node("worker-1"))
	require.NoError(t, err)
	plan, err := a.Plan(ctx, id, []arrayclients.VolumeRef{arraytest.BlockRef("pv-a", vol, true)})
	require.NoError(t, err)
	require.NoError(t, a.Apply(ctx, plan))
	require.NoError(t, a.Undo(ctx, plan, arrayclients.RestoreScope{}))
	assert.Empty(t, e.holdersOf(t, vol))
	e.driver(t).publish(e.hostOf(t, "worker-1"), vol)
	v, err := a.VerifyRestore(ctx, plan, arrayclients.RestoreScope{})
	require.NoError(t, err)
	assert.False(t, v.Restored)
	assert.True(t, arraytest.CheckOf(t, v, "pv-a").NodeAccess)
	assert.NotEmpty(t, v.Remaining)
}

// Plans written before footprints (ledger v1) decode and undo: every
// attachment comes back except one another host holds now.
func TestPowerStoreUndoV1Plan(t *testing.T) {
	t.Run("detach", func(t *testing.T) {
		e := newPSEnv(t, psFootprintFixture)
		a := e.adapter(t, func(c *arrayclients.Config) { c.PowerStoreFenceMode = arrayclients.PowerStoreModeDetach })
		ctx := context.Background()
		h1, h2 := e.hostOf(t, "worker-1"), e.hostOf(t, "worker-2")
		moved := e.volumeID(t, "pvc-worker-1-0")
		id, err := a.Resolve(ctx, e.node("worker-1"))
		require.NoError(t, err)
		plan, err := a.Plan(ctx, id, nil)
		require.NoError(t, err)
		raw, err := json.Marshal(plan)
		require.NoError(t, err)
		assert.NotContains(t, string(raw), `"volumes"`, "a plan without footprint is what ledger v1 wrote")
		plan = arraytest.RoundTrip(t, plan)
		require.NoError(t, a.Apply(ctx, plan))
		e.driver(t).publish(h2, moved)

		require.NoError(t, a.Undo(ctx, plan, arrayclients.RestoreScope{}))
		assert.Equal(t, []string{h2}, e.holdersOf(t, moved), "moved: not given back")
		for _, name := range []string{"pvc-worker-1-1", "pvc-worker-1-2"} {
			assert.Equal(t, []string{h1}, e.holdersOf(t, e.volumeID(t, name)), name)
		}
		v, err := a.VerifyRestore(ctx, plan, arrayclients.RestoreScope{})
		require.NoError(t, err)
		assert.True(t, v.Restored, "missing: %v", v.Missing)
		assert.Empty(t, v.Volumes)
		seq := e.srv.LastSeq()
		require.NoError(t, a.Undo(ctx, plan, arrayclients.RestoreScope{}))
		assert.Empty(t, arraytest.WritesSince(e.srv, seq))
	})
	t.Run("initiators", func(t *testing.T) {
		e := newPSEnv(t, psFootprintFixture)
		a := e.adapter(t, nil)
		ctx := context.Background()
		before := arraytest.DumpJSON(t, e.state(t))
		n := e.node("worker-2")
		host := n.CSINodeIDs[arrayclients.DriverPowerStore]
		// A v1 fence record's plan, as that version wrote it.
		raw := fmt.Sprintf(`{"array":"pstore-1","family":"powerstore","identity":{"array":"pstore-1","family":"powerstore",
			"node":"worker-2","objectID":%q,"objectName":%q,"resolvedAt":"2025-01-01T00:00:00Z"},
			"entries":{"mode":"initiators","hostID":%q,"hostName":%q,"initiators":[
			{"portName":"iqn.1994-05.com.redhat:worker-2","portType":"iSCSI"},
			{"portName":"10:00:00:00:c9:a0:b0:03","portType":"FC"}]},
			"summary":"remove 2 initiators","createdAt":"2025-01-01T00:00:00Z"}`, e.hostOf(t, "worker-2"), host, e.hostOf(t, "worker-2"), host)
		var plan arrayclients.Plan
		require.NoError(t, json.Unmarshal([]byte(raw), &plan))
		require.NoError(t, a.Apply(ctx, plan))
		v, err := a.Verify(ctx, plan)
		require.NoError(t, err)
		require.True(t, v.Fenced, "remaining: %v", v.Remaining)
		require.NoError(t, a.Undo(ctx, plan, arrayclients.RestoreScope{}))
		v, err = a.VerifyRestore(ctx, plan, arrayclients.RestoreScope{})
		require.NoError(t, err)
		assert.True(t, v.Restored, "missing: %v", v.Missing)
		assert.Equal(t, before, arraytest.DumpJSON(t, e.state(t)))
	})
}
