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

// CreateHost as csi-powerstore's node plugin calls it (pkg/node/node.go
// registerHost): a host named by the node ID with the node's initiators.
// A port name another host has is refused with the array's "already
// registered with another host", which the driver matches on; so is a
// name in use.
func TestCreateHostLikeTheDriver(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	name, os := "csi-node-0123456789abcdef0123456789abcdef-127.0.10.77", gopowerstore.OSTypeEnumLinux
	p, pt := "iqn.1994-05.com.redhat:new-node", gopowerstore.InitiatorProtocolTypeEnumISCSI
	inits := []gopowerstore.InitiatorCreateModify{{PortName: &p, PortType: &pt}}
	resp, err := e.client.CreateHost(ctx, &gopowerstore.HostCreate{Name: &name, OsType: &os, Initiators: &inits})
	require.NoError(t, err)
	h, err := e.client.GetHost(ctx, resp.ID)
	require.NoError(t, err)
	assert.Equal(t, name, h.Name)
	require.Len(t, h.Initiators, 1)
	assert.Equal(t, p, h.Initiators[0].PortName)

	other := name + "0"
	_, err = e.client.CreateHost(ctx, &gopowerstore.HostCreate{Name: &other, OsType: &os, Initiators: &inits})
	require.Error(t, err)
	assert.Equal(t, 400, apiStatus(t, err))
	assert.Contains(t, err.Error(), "already registered with another host")

	p2 := "iqn.1994-05.com.redhat:new-node-2"
	inits2 := []gopowerstore.InitiatorCreateModify{{PortName: &p2, PortType: &pt}}
	_, err = e.client.CreateHost(ctx, &gopowerstore.HostCreate{Name: &name, OsType: &os, Initiators: &inits2})
	require.Error(t, err, "a host name in use")
	assert.Equal(t, 400, apiStatus(t, err))
}
