package powerscale_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/tests/arraysim/powerscale"
)

// TestRealClientNamespace creates and looks up a volume directory as
// csi-isilon's CreateVolume does through goisilon.
func TestRealClientNamespace(t *testing.T) {
	e := newEnv(t)
	c, err := e.client(t, powerscale.DefaultPassword, 1, 5*time.Second)
	require.NoError(t, err)
	ctx := context.Background()

	_, err = c.GetVolumeWithIsiPath(ctx, "/ifs/data/csi", "", "k8s-new")
	assert.Equal(t, 404, jsonStatus(t, err))
	_, err = c.CreateVolumeWithIsipath(ctx, "/ifs/data/csi", "k8s-new", "0777")
	require.NoError(t, err)
	v, err := c.GetVolumeWithIsiPath(ctx, "/ifs/data/csi", "", "k8s-new")
	require.NoError(t, err)
	assert.Equal(t, "k8s-new", v.Name)
	assert.Contains(t, e.sim.State().Directories, "/ifs/data/csi/k8s-new")

	_, err = c.CreateVolumeWithIsipath(ctx, "/ifs/data/none", "k8s-new", "0777")
	assert.Equal(t, 404, jsonStatus(t, err), "the parent must exist")
}
