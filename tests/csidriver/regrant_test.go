package csidriver_test

import (
	"context"
	"testing"

	"github.com/dell/gopowerstore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/tests/arraysim/powerflex"
	"github.com/fenced-project/fenced/tests/csidriver"
)

// A cut of one node's IP from a PowerFlex NFS export is undone by the
// driver itself when interfaceNames is set: the detach of the cut node's
// attachment removes every node's IP, and the publish to the next node
// adds every node's IP back, the cut one's included.
func TestPowerFlexNFSInterfaceNamesGiveAccessBack(t *testing.T) {
	w := newWorld(t)
	l := w.urls["pflex-1"]
	ctx := context.Background()
	base := csidriver.PowerFlexConfig{Endpoint: l.URL, CAFile: l.CAFile, Username: "admin", Password: "Password123!",
		SystemID: "1a2b3c4d5e6f7a8b"}
	cfg := base
	cfg.InterfaceIPs = map[string]string{"worker-1": "127.0.10.1"}
	c, err := csidriver.NewPowerFlex(ctx, cfg)
	require.NoError(t, err)
	cfg.InterfaceIPs["worker-9"] = "127.0.10.9"
	// The node plugin of worker-2 starts and writes its entry.
	c.SetInterfaceIPs("worker-2", "127.0.10.2")
	sim := w.servers["pflex-1"].Family().(*powerflex.Sim)
	hosts := func(h string) []string {
		loc, err := arrayclients.ParseVolumeHandle(arrayclients.PowerFlex, h, "nfs")
		require.NoError(t, err)
		x, _ := sim.ExportOf(loc.Object)
		return x.ReadWriteRootHosts
	}
	n1, n2 := w.nodeID(0, csidriver.PowerFlexDriver), w.nodeID(1, csidriver.PowerFlexDriver)
	h, err := c.CreateVolume(ctx, "k8s-rwx-shared", 8<<30, arrayclients.ProtocolNFS)
	require.NoError(t, err)

	require.NoError(t, c.ControllerPublish(ctx, h, n1, true))
	assert.ElementsMatch(t, []string{"127.0.10.1/255.255.255.255", "127.0.10.2/255.255.255.255"}, hosts(h),
		"a publish to worker-1 gives every node of the map access; the caller's later change of its map is not seen")

	// worker-1's IP alone is cut (what a fence does), here through a
	// controller without interfaceNames, whose unpublish removes the SDC's IPs.
	cutter, err := csidriver.NewPowerFlex(ctx, base)
	require.NoError(t, err)
	require.NoError(t, cutter.ControllerUnpublish(ctx, h, n1))
	assert.Equal(t, []string{"127.0.10.2/255.255.255.255"}, hosts(h))

	// A publish to worker-2 while worker-2's IP is listed is idempotent.
	require.NoError(t, c.ControllerPublish(ctx, h, n2, true))
	assert.Equal(t, []string{"127.0.10.2/255.255.255.255"}, hosts(h))

	// The force-detach of worker-1's attachment removes every IP of the
	// map; the next publish to worker-2 gives worker-1 its access back.
	require.NoError(t, c.ControllerUnpublish(ctx, h, n1))
	assert.Empty(t, hosts(h))
	require.NoError(t, c.ControllerPublish(ctx, h, n2, true))
	assert.ElementsMatch(t, []string{"127.0.10.1/255.255.255.255", "127.0.10.2/255.255.255.255"}, hosts(h),
		"the publish to worker-2 put worker-1's IP back")

	// A node plugin that leaves the map stops being added.
	c.SetInterfaceIPs("worker-1", "")
	require.NoError(t, c.ControllerUnpublish(ctx, h, n2))
	require.NoError(t, c.ControllerPublish(ctx, h, n2, true))
	assert.ElementsMatch(t, []string{"127.0.10.1/255.255.255.255", "127.0.10.2/255.255.255.255"}, hosts(h),
		"unpublish with the smaller map leaves worker-1's IP, the publish finds worker-2's gone and adds it")
}

func TestPowerFlexNFSExternalAccess(t *testing.T) {
	w := newWorld(t)
	l := w.urls["pflex-1"]
	ctx := context.Background()
	cfg := csidriver.PowerFlexConfig{Endpoint: l.URL, CAFile: l.CAFile, Username: "admin", Password: "Password123!",
		SystemID: "1a2b3c4d5e6f7a8b", ExternalAccess: "10.20.30.0/24"}
	c, err := csidriver.NewPowerFlex(ctx, cfg)
	require.NoError(t, err)
	sim := w.servers["pflex-1"].Family().(*powerflex.Sim)
	hosts := func(h string) []string {
		loc, err := arrayclients.ParseVolumeHandle(arrayclients.PowerFlex, h, "nfs")
		require.NoError(t, err)
		x, _ := sim.ExportOf(loc.Object)
		return x.ReadWriteRootHosts
	}
	n1, n2 := w.nodeID(0, csidriver.PowerFlexDriver), w.nodeID(1, csidriver.PowerFlexDriver)
	h, err := c.CreateVolume(ctx, "k8s-nat", 8<<30, arrayclients.ProtocolNFS)
	require.NoError(t, err)
	require.NoError(t, c.ControllerPublish(ctx, h, n1, true))
	assert.Equal(t, []string{"127.0.10.1/255.255.255.255", "10.20.30.0/255.255.255.0"}, hosts(h))
	require.NoError(t, c.ControllerPublish(ctx, h, n2, true))
	assert.Equal(t, []string{"127.0.10.1/255.255.255.255", "10.20.30.0/255.255.255.0", "127.0.10.2/255.255.255.255"}, hosts(h),
		"the entry is added once")
	require.NoError(t, c.ControllerUnpublish(ctx, h, n1))
	require.NoError(t, c.ControllerUnpublish(ctx, h, n2))
	assert.Equal(t, []string{"10.20.30.0/255.255.255.0"}, hosts(h), "no unpublish removes the external-access entry")

	cfg.ExternalAccess = "10.20.30.400"
	_, err = csidriver.NewPowerFlex(ctx, cfg)
	require.ErrorIs(t, err, csidriver.ErrInvalid)
	assert.ErrorContains(t, err, "10.20.30.400")
}

func TestPowerStoreNFSExternalAccessAndListVolumes(t *testing.T) {
	w := newWorld(t)
	l := w.urls["pstore-1"]
	ctx := context.Background()
	reader, err := gopowerstore.NewClientWithArgs(l.URL+"/api/rest", "admin", "Password123!",
		gopowerstore.NewClientOptions().SetCAFilePath(l.CAFile))
	require.NoError(t, err)
	cl, err := reader.GetCluster(ctx)
	require.NoError(t, err)
	cfg := csidriver.PowerStoreConfig{Endpoint: l.URL, CAFile: l.CAFile, Username: "admin", Password: "Password123!",
		GlobalID: cl.GlobalID, NASName: "nas-1", ExternalAccess: "10.9.8.7"}
	nas, err := reader.GetNASServers(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, nas)
	cfg.NASName = nas[0].Name
	c, err := csidriver.NewPowerStore(cfg)
	require.NoError(t, err)
	n1, n2 := w.nodeID(0, csidriver.PowerStoreDriver), w.nodeID(1, csidriver.PowerStoreDriver)

	h, err := c.CreateVolume(ctx, "k8s-nat", 8<<30, arrayclients.ProtocolNFS)
	require.NoError(t, err)
	require.NoError(t, c.ControllerPublish(ctx, h, n1, false))
	require.NoError(t, c.ControllerPublish(ctx, h, n1, false), "a publish with every entry present succeeds")
	require.NoError(t, c.ControllerPublish(ctx, h, n2, false))
	assert.Equal(t, []string{"127.0.10.1/255.255.255.255", "10.9.8.7/255.255.255.255", "127.0.10.2/255.255.255.255"},
		psExportHosts(t, reader, h)["rwRoot"])
	require.NoError(t, c.ControllerUnpublish(ctx, h, n1))
	require.NoError(t, c.ControllerUnpublish(ctx, h, n2))
	assert.Equal(t, []string{"10.9.8.7/255.255.255.255"}, psExportHosts(t, reader, h)["rwRoot"],
		"no unpublish removes the external-access entry")

	// ListVolumes: only with the health monitor on; NFS volumes with no
	// published nodes, block volumes with their hosts' names.
	_, ok, err := c.ListVolumesPublishedNodes(ctx)
	require.NoError(t, err)
	assert.False(t, ok, "without X_CSI_HEALTH_MONITOR_ENABLED the driver does not advertise it")
	c.SetHealthMonitor(true)
	require.NoError(t, c.ControllerPublish(ctx, h, n1, false))
	bh, err := c.CreateVolume(ctx, "k8s-block", 8<<30, arrayclients.ProtocolBlock)
	require.NoError(t, err)
	require.NoError(t, c.ControllerPublish(ctx, bh, n2, false))
	published, ok, err := c.ListVolumesPublishedNodes(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	require.Contains(t, published, h)
	assert.Empty(t, published[h], "an NFS volume is listed with no published nodes although the export lists worker-1")
	assert.Equal(t, []string{n2}, published[bh])

	cfg.ExternalAccess = "not-an-ip"
	_, err = csidriver.NewPowerStore(cfg)
	require.ErrorIs(t, err, csidriver.ErrInvalid)
}
