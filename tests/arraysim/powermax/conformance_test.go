package powermax_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/tests/arraysim/conformance"
)

const conformanceFixture = `
nodes:
  - {name: worker-1, ip: 127.0.10.1, iqn: "iqn.1994-05.com.redhat:worker-1"}
  - {name: worker-2, ip: 127.0.10.2, iqn: "iqn.1994-05.com.redhat:worker-2"}
arrays:
  - name: pmax-1
    family: powermax
    spec:
      symmetrixID: "000197900046"
      username: smc
      password: secret
      generate: {clusterPrefix: TST, volumesPerNode: 0, nodes: [worker-1]}
`

// TestConformancePowerMax replays the rows PM-* of CONFORMANCE.md: the
// requests csi-powermax sends for create, node registration, publish and
// unpublish (iSCSI) through the gopowermax calls the driver makes, read as
// the driver reads them.
func TestConformancePowerMax(t *testing.T) {
	e := start(t, conformanceFixture, false)
	c := e.client(t, "secret", 10*time.Second)
	const ident = "csi-TST-pmax-conform"
	const volSG = "csi-TST-Bronze-SRP_1-SG"
	const hostID, nodeSG, mvID, pg = "csi-node-TST-worker-1", "csi-no-srp-sg-TST-worker-1", "csi-mv-TST-worker-1", "csi-TST-iscsi-PG"
	var devID string
	rows := []conformance.Row{
		// Create: service/controller.go CreateVolume.
		{ID: "PM-C1", Method: http.MethodPost, Path: `/sloprovisioning/symmetrix/000197900046/storagegroup$`, Do: func(ctx context.Context, t *testing.T) {
			_, err := c.GetStorageGroup(ctx, sym, volSG)
			require.Error(t, err, "no storage group for the service level yet")
			_, err = c.CreateStorageGroup(ctx, sym, volSG, "SRP_1", "Bronze", false, nil)
			require.NoError(t, err)
		}},
		{ID: "PM-C2", Method: http.MethodGet, Path: `/sloprovisioning/symmetrix/000197900046/volume\?.*volume_identifier=`, Do: func(ctx context.Context, t *testing.T) {
			ids, err := c.GetVolumeIDList(ctx, sym, ident, false)
			require.NoError(t, err)
			assert.Empty(t, ids)
		}},
		{ID: "PM-C3", Method: http.MethodPut, Path: `/sloprovisioning/symmetrix/000197900046/storagegroup/` + volSG + `$`, Do: func(ctx context.Context, t *testing.T) {
			v, err := c.CreateVolumeInStorageGroupS(ctx, sym, volSG, ident, 547, nil)
			require.NoError(t, err)
			devID = v.VolumeID
			assert.Equal(t, ident, v.VolumeIdentifier)
		}},
		// Node registration: service/node.go nodeHostSetup (iSCSI host).
		{ID: "PM-R1", Method: http.MethodPost, Path: `/sloprovisioning/symmetrix/000197900046/host$`, Do: func(ctx context.Context, t *testing.T) {
			_, err := c.GetHostByID(ctx, sym, "csi-node-TST-worker-3")
			require.Error(t, err)
			_, err = c.CreateHost(ctx, sym, "csi-node-TST-worker-3", []string{"iqn.1994-05.com.redhat:worker-3"}, nil)
			require.NoError(t, err)
		}},
		// Publish: service/controller.go ControllerPublishVolume, publishVolume.
		{ID: "PM-P1", Method: http.MethodGet, Path: `/sloprovisioning/symmetrix/000197900046/volume/[0-9A-F]+$`, Do: func(ctx context.Context, t *testing.T) {
			v, err := c.GetVolumeByID(ctx, sym, devID)
			require.NoError(t, err)
			assert.NotContains(t, v.StorageGroupIDList, nodeSG)
		}},
		{ID: "PM-P2", Method: http.MethodGet, Path: `/sloprovisioning/symmetrix/000197900046/maskingview/` + mvID + `$`, Do: func(ctx context.Context, t *testing.T) {
			// The node's masking view exists (the fixture's node has
			// published before): the driver checks its host and storage
			// group and adds the volume to that group.
			mv, err := c.GetMaskingViewByID(ctx, sym, mvID)
			require.NoError(t, err)
			assert.True(t, strings.EqualFold(mv.HostID, hostID) && strings.EqualFold(mv.StorageGroupID, nodeSG),
				"host %s, storage group %s", mv.HostID, mv.StorageGroupID)
		}},
		{ID: "PM-P3", Method: http.MethodPut, Path: `/sloprovisioning/symmetrix/000197900046/storagegroup/` + nodeSG + `$`, Do: func(ctx context.Context, t *testing.T) {
			require.NoError(t, c.AddVolumesToStorageGroupS(ctx, sym, nodeSG, true, devID))
			v, err := c.GetVolumeByID(ctx, sym, devID)
			require.NoError(t, err)
			assert.Contains(t, v.StorageGroupIDList, nodeSG)
		}},
		{ID: "PM-P4", Method: http.MethodPost, Path: `/sloprovisioning/symmetrix/000197900046/maskingview$`, Do: func(ctx context.Context, t *testing.T) {
			// A node without a masking view: storage group (no SRP), the
			// volume in it, then the view on the node's host and the port
			// group.
			const sg3, mv3 = "csi-no-srp-sg-TST-worker-3", "csi-mv-TST-worker-3"
			_, err := c.GetMaskingViewByID(ctx, sym, mv3)
			require.Error(t, err)
			_, err = c.CreateStorageGroup(ctx, sym, sg3, "None", "", false, nil)
			require.NoError(t, err)
			require.NoError(t, c.AddVolumesToStorageGroupS(ctx, sym, sg3, true, devID))
			mv, err := c.CreateMaskingView(ctx, sym, mv3, sg3, "csi-node-TST-worker-3", true, pg)
			require.NoError(t, err)
			assert.Equal(t, "csi-node-TST-worker-3", mv.HostID)
		}},
		// Unpublish: service/controller.go unpublishVolume, storage_group_svc.go removeVolumesFromSGMV.
		{ID: "PM-U1", Method: http.MethodPut, Path: `/sloprovisioning/symmetrix/000197900046/storagegroup/` + nodeSG + `$`, Do: func(ctx context.Context, t *testing.T) {
			v, err := c.GetVolumeByID(ctx, sym, devID)
			require.NoError(t, err)
			require.Contains(t, v.StorageGroupIDList, nodeSG, "unpublish acts only when the volume is in the node's storage group")
			sg, err := c.GetStorageGroup(ctx, sym, nodeSG)
			require.NoError(t, err)
			if sg.NumOfVolumes == 1 { // the group's last volume: the view goes first
				require.NoError(t, c.DeleteMaskingView(ctx, sym, mvID))
			}
			_, err = c.RemoveVolumesFromStorageGroup(ctx, sym, nodeSG, true, devID)
			require.NoError(t, err)
		}},
		{ID: "PM-U2", Method: http.MethodDelete, Path: `/sloprovisioning/symmetrix/000197900046/maskingview/csi-mv-TST-worker-3$`, Do: func(ctx context.Context, t *testing.T) {
			// The group's last volume: the view goes first, then the volume, then the group.
			sg, err := c.GetStorageGroup(ctx, sym, "csi-no-srp-sg-TST-worker-3")
			require.NoError(t, err)
			require.Equal(t, 1, sg.NumOfVolumes)
			require.NoError(t, c.DeleteMaskingView(ctx, sym, "csi-mv-TST-worker-3"))
			_, err = c.RemoveVolumesFromStorageGroup(ctx, sym, "csi-no-srp-sg-TST-worker-3", true, devID)
			require.NoError(t, err)
		}},
		{ID: "PM-U3", Method: http.MethodDelete, Path: `/sloprovisioning/symmetrix/000197900046/storagegroup/csi-no-srp-sg-TST-worker-3$`, Do: func(ctx context.Context, t *testing.T) {
			require.NoError(t, c.DeleteStorageGroup(ctx, sym, "csi-no-srp-sg-TST-worker-3"))
		}},
		{ID: "PM-U4", Method: http.MethodGet, Path: `/sloprovisioning/symmetrix/000197900046/volume/FFFFF$`, Status: conformance.AnyStatus, Do: func(ctx context.Context, t *testing.T) {
			_, err := c.GetVolumeByID(ctx, sym, "FFFFF")
			require.Error(t, err)
			assert.True(t, strings.Contains(err.Error(), "Could not find") || strings.Contains(err.Error(), "not found"),
				"a deleted volume: the driver's GetVolumeByID reads 'Could not find' as not found; got %q", err.Error())
		}},
	}
	conformance.Run(t, e.srv, rows)
}
