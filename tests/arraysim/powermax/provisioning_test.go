package powermax_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Provisioning as csi-powermax makes it through gopowermax
// (dell/csi-powermax service/controller.go CreateVolume,
// service/storage_group_svc.go addVolumesToSGMV and removeVolumesFromSGMV).
func TestProvisioningWithRealClient(t *testing.T) {
	e := start(t, testFixture, true)
	c := e.client(t, "secret", 5*time.Second)
	ctx := context.Background()

	sg1 := "csi-no-srp-sg-TST-worker-1"
	g, err := c.GetStorageGroup(ctx, sym, sg1)
	require.NoError(t, err)
	assert.Empty(t, g.SRP, "a masking group has no storage resource pool")

	const prov = "csi-TST-Diamond-SRP_1-SG"
	_, err = c.CreateStorageGroup(ctx, sym, prov, "SRP_1", "Diamond", false, nil)
	require.NoError(t, err)
	g, err = c.GetStorageGroup(ctx, sym, prov)
	require.NoError(t, err)
	assert.Equal(t, "SRP_1", g.SRP)
	assert.Equal(t, "Diamond", g.SLO)
	_, err = c.CreateStorageGroup(ctx, sym, prov, "SRP_1", "Diamond", false, nil)
	require.Error(t, err, "a storage group that exists")

	vol, err := c.CreateVolumeInStorageGroupS(ctx, sym, prov, "csi-TST-k8s-1a2b3c", 4370, nil)
	require.NoError(t, err)
	assert.Equal(t, "csi-TST-k8s-1a2b3c", vol.VolumeIdentifier)
	assert.Equal(t, 4370, vol.CapacityCYL)
	assert.Equal(t, []string{prov}, vol.StorageGroupIDList)
	assert.Zero(t, vol.NumberOfFrontEndPaths, "in no masking view")
	ids, err := c.GetVolumeIDList(ctx, sym, "csi-TST-k8s-1a2b3c", false)
	require.NoError(t, err)
	assert.Equal(t, []string{vol.VolumeID}, ids)
	_, err = c.CreateVolumeInStorageGroupS(ctx, sym, sg1, "csi-TST-k8s-nosrp", 4370, nil)
	require.ErrorContains(t, err, "SRP", "new volumes need a pool")

	require.NoError(t, c.AddVolumesToStorageGroupS(ctx, sym, sg1, true, vol.VolumeID))
	vol, err = c.GetVolumeByID(ctx, sym, vol.VolumeID)
	require.NoError(t, err)
	assert.Positive(t, vol.NumberOfFrontEndPaths, "masked to worker-1")

	// The masking view comes back after the driver removed it with the
	// node's last volume.
	require.NoError(t, c.DeleteMaskingView(ctx, sym, "csi-mv-TST-worker-1"))
	_, err = c.RemoveVolumesFromStorageGroup(ctx, sym, sg1, true, "00100", "00101", "00102", vol.VolumeID)
	require.NoError(t, err)
	require.NoError(t, c.DeleteStorageGroup(ctx, sym, sg1))
	_, err = c.CreateStorageGroup(ctx, sym, sg1, "None", "", false, nil)
	require.NoError(t, err)
	require.NoError(t, c.AddVolumesToStorageGroupS(ctx, sym, sg1, true, vol.VolumeID))
	_, err = c.CreateMaskingView(ctx, sym, "csi-mv-TST-worker-1", sg1, "csi-node-TST-worker-1", true, "csi-TST-iscsi-PG")
	require.NoError(t, err)
	mv, err := c.GetMaskingViewByID(ctx, sym, "csi-mv-TST-worker-1")
	require.NoError(t, err)
	assert.Equal(t, "csi-node-TST-worker-1", mv.HostID)
	assert.Equal(t, sg1, mv.StorageGroupID)
	h, err := c.GetHostByID(ctx, sym, "csi-node-TST-worker-1")
	require.NoError(t, err)
	assert.Equal(t, []string{"csi-mv-TST-worker-1"}, h.MaskingviewIDs)
	require.Error(t, c.DeleteStorageGroup(ctx, sym, sg1), "a storage group in a masking view")
}
