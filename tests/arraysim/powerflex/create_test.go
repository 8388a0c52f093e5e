package powerflex_test

import (
	"testing"

	siotypes "github.com/dell/goscaleio/types/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/tests/arraysim/powerflex"
)

// CreateVolume as csi-powerflex calls it (service/controller.go: the admin
// client's CreateVolume with the storage pool's name): the volume exists
// unmapped, and a second create of the name is the MDM's "name in use".
func TestCreateVolumeLikeTheDriver(t *testing.T) {
	b := newBed(t, false)
	c := b.client(t)
	resp, err := c.CreateVolume(&siotypes.VolumeParam{Name: "k8s-0a1b2c3d", VolumeSizeInKb: "8388608",
		VolumeType: "ThinProvisioned"}, powerflex.PoolName, "")
	require.NoError(t, err)
	require.NotEmpty(t, resp.ID)
	vols, err := c.GetVolume("", resp.ID, "", "", false)
	require.NoError(t, err)
	require.Len(t, vols, 1)
	assert.Equal(t, "k8s-0a1b2c3d", vols[0].Name)
	assert.Empty(t, vols[0].MappedSdcInfo)
	id, err := c.FindVolumeID("k8s-0a1b2c3d")
	require.NoError(t, err)
	assert.Equal(t, resp.ID, id)

	_, err = c.CreateVolume(&siotypes.VolumeParam{Name: "k8s-0a1b2c3d", VolumeSizeInKb: "8388608"}, powerflex.PoolName, "")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Volume name already in use")

	_, err = c.CreateVolume(&siotypes.VolumeParam{Name: "x", VolumeSizeInKb: "8"}, "no-such-pool", "")
	require.Error(t, err)
}
