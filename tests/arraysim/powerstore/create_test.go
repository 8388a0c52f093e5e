package powerstore_test

import (
	"context"
	"testing"

	"github.com/dell/gopowerstore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// CreateVolume as csi-powerstore calls it (pkg/controller/creator.go): a
// new volume is unmapped; a second create of the name is the 422 the
// driver reads as VolumeNameIsAlreadyUse.
func TestCreateVolumeLikeTheDriver(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	name, size := "csivol-0a1b2c3d", int64(8<<30)
	resp, err := e.client.CreateVolume(ctx, &gopowerstore.VolumeCreate{Name: &name, Size: &size})
	require.NoError(t, err)
	require.NotEmpty(t, resp.ID)
	v, err := e.client.GetVolume(ctx, resp.ID)
	require.NoError(t, err)
	assert.Equal(t, name, v.Name)
	m, err := e.client.GetHostVolumeMappingByVolumeID(ctx, resp.ID)
	require.NoError(t, err)
	assert.Empty(t, m)

	_, err = e.client.CreateVolume(ctx, &gopowerstore.VolumeCreate{Name: &name, Size: &size})
	var apiErr gopowerstore.APIError
	require.ErrorAs(t, err, &apiErr)
	assert.True(t, apiErr.VolumeNameIsAlreadyUse())
}
