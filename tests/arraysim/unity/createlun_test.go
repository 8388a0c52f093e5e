package unity_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCreateLunWithRealClient provisions a LUN as csi-unity does
// (gounity CreateLun, then FindVolumeByName) and checks a name in use and
// an unknown pool are refused.
func TestCreateLunWithRealClient(t *testing.T) {
	e := start(t, false)
	c := e.client(t)
	ctx := context.Background()

	_, err := c.CreateLun(ctx, "csivol-a1b2c3", "pool_1", "", 16<<30, 0, "", true, false)
	require.NoError(t, err)
	v, err := c.FindVolumeByName(ctx, "csivol-a1b2c3")
	require.NoError(t, err)
	assert.Regexp(t, `^sv_\d+$`, v.VolumeContent.ResourceID)
	assert.Equal(t, uint64(16<<30), v.VolumeContent.SizeTotal)
	assert.Empty(t, v.VolumeContent.HostAccessResponse, "a new LUN is given to no host")
	again, err := c.FindVolumeByID(ctx, v.VolumeContent.ResourceID)
	require.NoError(t, err)
	assert.Equal(t, "csivol-a1b2c3", again.VolumeContent.Name)

	_, err = c.CreateLun(ctx, "csivol-a1b2c3", "pool_1", "", 8<<30, 0, "", true, false)
	require.ErrorContains(t, err, "already in use")
	_, err = c.CreateLun(ctx, "csivol-other", "pool_9", "", 8<<30, 0, "", true, false)
	require.ErrorContains(t, err, "pool_9")

	require.NoError(t, c.ModifyVolumeExport(ctx, v.VolumeContent.ResourceID, []string{"Host_1"}))
	v, err = c.FindVolumeByID(ctx, v.VolumeContent.ResourceID)
	require.NoError(t, err)
	require.Len(t, v.VolumeContent.HostAccessResponse, 1)
	assert.Equal(t, "Host_1", v.VolumeContent.HostAccessResponse[0].HostContent.ID)
}
