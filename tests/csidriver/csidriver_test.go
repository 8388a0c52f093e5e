package csidriver_test

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dell/gopowerstore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/tests/arraysim/families"
	"github.com/fenced-project/fenced/tests/arraysim/fixture"
	"github.com/fenced-project/fenced/tests/arraysim/powerflex"
	"github.com/fenced-project/fenced/tests/arraysim/powermax"
	"github.com/fenced-project/fenced/tests/arraysim/powerscale"
	"github.com/fenced-project/fenced/tests/arraysim/simcore"
	"github.com/fenced-project/fenced/tests/arraysim/unity"
	"github.com/fenced-project/fenced/tests/csidriver"
)

const testFixture = `
nodes:
  - {name: worker-1, ip: 127.0.10.1, fqdn: worker-1.cluster.local, machineID: 0a1b2c3d4e5f60718293a4b5c6d7e8f9,
     sdcGUID: 6A1B0001-0000-4000-8000-000000000001, iqn: "iqn.1994-05.com.redhat:worker-1"}
  - {name: worker-2, ip: 127.0.10.2, fqdn: worker-2.cluster.local, machineID: 1a1b2c3d4e5f60718293a4b5c6d7e8f9,
     sdcGUID: 6A1B0002-0000-4000-8000-000000000002, iqn: "iqn.1994-05.com.redhat:worker-2"}
arrays:
  - name: pflex-1
    family: powerflex
    spec:
      systems: [{id: 1a2b3c4d5e6f7a8b, name: sys-1}]
      perNode: {volumes: 0}
  - name: pstore-1
    family: powerstore
    spec:
      perNode: {protocol: iSCSI, volumes: 0}
  - name: unity-1
    family: unity
    spec:
      generate: {lunsPerNode: 0}
  - name: pscale-1
    family: powerscale
    spec:
      perNode: {exports: 0, shared: 0}
  - name: pmax-1
    family: powermax
    spec:
      symmetrixID: "000197900046"
      generate: {clusterPrefix: TST, volumesPerNode: 0}
`

type world struct {
	fx      *fixture.Fixture
	servers map[string]*simcore.Server
	urls    map[string]*simcore.Listener
}

func newWorld(t *testing.T) *world {
	t.Helper()
	fx, err := fixture.Parse([]byte(testFixture))
	require.NoError(t, err)
	w := &world{fx: fx, servers: map[string]*simcore.Server{}, urls: map[string]*simcore.Listener{}}
	for _, fa := range fx.Arrays {
		fam, err := families.New(fa, fx.Nodes)
		require.NoError(t, err)
		srv := simcore.New(fa.Name, fam, nil)
		l, err := csidriver.Serve(srv, true, t.TempDir())
		require.NoError(t, err)
		t.Cleanup(func() { _ = l.Close() })
		w.servers[fa.Name], w.urls[fa.Name] = srv, l
	}
	return w
}

// nodeID is the node's CSI node ID for a driver, as its node plugin
// reports it.
func (w *world) nodeID(i int, driver string) string {
	return w.fx.Nodes[i].CSINodeIDs("")[driver]
}

// driverWrites are the state-changing requests the array saw, each with
// whether the emulated driver made it.
func driverWrites(t *testing.T, srv *simcore.Server) []bool {
	t.Helper()
	var out []bool
	for _, e := range srv.AuditWrites() {
		out = append(out, csidriver.IsDriverRequest(e.Remote))
	}
	return out
}

// exercise runs the CSI life of one volume against a controller: create
// (idempotent), publish (idempotent), the RWO refusal, unpublish
// (idempotent), publish elsewhere, multi-node publish. given reads back
// which node IDs the array gives the volume to.
func exercise(t *testing.T, c csidriver.Controller, n1, n2 string, given func(handle string) int) string {
	t.Helper()
	return exerciseProtocol(t, c, arrayclients.ProtocolBlock, n1, n2, given)
}

// exerciseProtocol is exercise for volumes of a protocol; the other
// protocol is refused as not emulated.
func exerciseProtocol(t *testing.T, c csidriver.Controller, proto arrayclients.Protocol, n1, n2 string, given func(handle string) int) string {
	t.Helper()
	h := exerciseLife(t, c, proto, n1, n2, given)
	other := arrayclients.ProtocolNFS
	if proto == other {
		other = arrayclients.ProtocolBlock
	}
	_, err := c.CreateVolume(context.Background(), "k8s-other", 8<<30, other)
	require.ErrorIs(t, err, csidriver.ErrUnsupported)
	return h
}

// exerciseLife is the CSI life of one volume of a protocol (see exercise),
// for controllers that emulate both protocols.
func exerciseLife(t *testing.T, c csidriver.Controller, proto arrayclients.Protocol, n1, n2 string, given func(handle string) int) string {
	t.Helper()
	ctx := context.Background()
	h, err := c.CreateVolume(ctx, "k8s-7f3a09c2d1", 8<<30, proto)
	require.NoError(t, err)
	again, err := c.CreateVolume(ctx, "k8s-7f3a09c2d1", 8<<30, proto)
	require.NoError(t, err)
	assert.Equal(t, h, again, "CreateVolume of an existing name returns the same handle")
	assert.Zero(t, given(h))

	require.NoError(t, c.ControllerPublish(ctx, h, n1, false))
	require.NoError(t, c.ControllerPublish(ctx, h, n1, false), "publish to the same node is idempotent")
	assert.Equal(t, 1, given(h))

	err = c.ControllerPublish(ctx, h, n2, false)
	require.ErrorIs(t, err, csidriver.ErrAlreadyPublished)
	assert.Equal(t, 1, given(h))

	require.NoError(t, c.ControllerUnpublish(ctx, h, n1))
	require.NoError(t, c.ControllerUnpublish(ctx, h, n1), "unpublish of an unpublished volume succeeds")
	assert.Zero(t, given(h))

	require.NoError(t, c.ControllerPublish(ctx, h, n2, false))
	require.NoError(t, c.ControllerPublish(ctx, h, n1, true), "a multi-node volume is given to a second node")
	assert.Equal(t, 2, given(h))
	return h
}

func TestPowerFlexController(t *testing.T) {
	w := newWorld(t)
	l := w.urls["pflex-1"]
	c, err := csidriver.NewPowerFlex(context.Background(), csidriver.PowerFlexConfig{Endpoint: l.URL, CAFile: l.CAFile,
		Username: "admin", Password: "Password123!", SystemID: "1a2b3c4d5e6f7a8b"})
	require.NoError(t, err)
	assert.Equal(t, csidriver.PowerFlexDriver, c.Driver())
	sim := w.servers["pflex-1"].Family()
	given := func(h string) int {
		loc, err := arrayclients.ParseVolumeHandle(arrayclients.PowerFlex, h, "ext4")
		require.NoError(t, err)
		n := 0
		for i := range w.fx.Nodes {
			mapped := sim.(interface{ MappedVolumes(string) []string }).MappedVolumes(w.fx.Nodes[i].SDCGUID)
			for _, v := range mapped {
				if v == loc.Object {
					n++
				}
			}
		}
		return n
	}
	// csi-vxflexos emulates both protocols: the block life here, NFS in
	// TestPowerFlexNFSController.
	h := exerciseLife(t, c, arrayclients.ProtocolBlock, w.nodeID(0, csidriver.PowerFlexDriver), w.nodeID(1, csidriver.PowerFlexDriver), given)

	loc, err := arrayclients.ParseVolumeHandle(arrayclients.PowerFlex, h, "ext4")
	require.NoError(t, err)
	assert.Equal(t, "1a2b3c4d5e6f7a8b", loc.ArrayID, "the handle is <system ID>-<volume ID>")
	assert.Equal(t, arrayclients.ProtocolBlock, loc.Protocol)

	ctx := context.Background()
	require.ErrorIs(t, c.ControllerPublish(ctx, h, "6A1B00FF-0000-4000-8000-0000000000FF", false), csidriver.ErrNotFound)
	require.ErrorIs(t, c.ControllerPublish(ctx, "1a2b3c4d5e6f7a8b-00000000000000ff", w.nodeID(0, csidriver.PowerFlexDriver), false), csidriver.ErrNotFound)
	require.NoError(t, c.ControllerUnpublish(ctx, "1a2b3c4d5e6f7a8b-00000000000000ff", w.nodeID(0, csidriver.PowerFlexDriver)),
		"unpublish of a deleted volume succeeds")
	require.ErrorIs(t, c.ControllerPublish(ctx, "0000000000000001-"+loc.Object, w.nodeID(0, csidriver.PowerFlexDriver), false), csidriver.ErrInvalid)

	writes := driverWrites(t, w.servers["pflex-1"])
	require.NotEmpty(t, writes)
	for _, byDriver := range writes {
		assert.True(t, byDriver, "every write came through the tagged listener")
	}
}

// TestPowerFlexNFSController: an NFS volume is a file system whose export
// lists the node's SDC IPs as "<ip>/255.255.255.255" in
// read_write_root_hosts; unpublish removes them. With the ConfigMap's
// interface IPs set, publish gives the export every IP listed there.
func TestPowerFlexNFSController(t *testing.T) {
	w := newWorld(t)
	l := w.urls["pflex-1"]
	ctx := context.Background()
	cfg := csidriver.PowerFlexConfig{Endpoint: l.URL, CAFile: l.CAFile, Username: "admin", Password: "Password123!",
		SystemID: "1a2b3c4d5e6f7a8b"}
	c, err := csidriver.NewPowerFlex(ctx, cfg)
	require.NoError(t, err)
	sim := w.servers["pflex-1"].Family().(*powerflex.Sim)
	export := func(h string) powerflex.NFSExport {
		loc, err := arrayclients.ParseVolumeHandle(arrayclients.PowerFlex, h, "nfs")
		require.NoError(t, err)
		x, _ := sim.ExportOf(loc.Object)
		return x
	}
	given := func(h string) int {
		x := export(h)
		n := 0
		for _, node := range w.fx.Nodes {
			if slices.Contains(x.ReadWriteRootHosts, node.IP+"/255.255.255.255") {
				n++
			}
		}
		return n
	}
	h := exerciseLife(t, c, arrayclients.ProtocolNFS, w.nodeID(0, csidriver.PowerFlexDriver), w.nodeID(1, csidriver.PowerFlexDriver), given)
	loc, err := arrayclients.ParseVolumeHandle(arrayclients.PowerFlex, h, "nfs")
	require.NoError(t, err)
	assert.Equal(t, arrayclients.ProtocolNFS, loc.Protocol)
	assert.Equal(t, "1a2b3c4d5e6f7a8b", loc.ArrayID, "the handle is <system ID>/<file system ID>")
	x := export(h)
	assert.Equal(t, "csishare-k8s-7f3a09c2d1", x.Name)
	assert.Equal(t, []string{"127.0.10.2/255.255.255.255", "127.0.10.1/255.255.255.255"}, x.ReadWriteRootHosts)
	assert.Empty(t, x.ReadWriteHosts)

	require.NoError(t, c.ControllerUnpublish(ctx, h, w.nodeID(1, csidriver.PowerFlexDriver)))
	assert.Equal(t, []string{"127.0.10.1/255.255.255.255"}, export(h).ReadWriteRootHosts)
	require.ErrorIs(t, c.ControllerPublish(ctx, "1a2b3c4d5e6f7a8b/no-such-fs", w.nodeID(0, csidriver.PowerFlexDriver), false), csidriver.ErrNotFound)
	require.ErrorIs(t, c.ControllerPublish(ctx, h, "0c6e2f4a-1d3b-4a5c-8e7f-9b0a1c2d3e4f", false), csidriver.ErrNotFound,
		"a node without an SDC has no IPs unless the ConfigMap names its interfaces")

	// An NFS-only node (node ID = Node UID): the IPs come from the
	// ConfigMap's interfaceNames.
	cfg.InterfaceIPs = map[string]string{"worker-3": "127.0.10.3"}
	nfsOnly, err := csidriver.NewPowerFlex(ctx, cfg)
	require.NoError(t, err)
	h2, err := nfsOnly.CreateVolume(ctx, "k8s-nfs-only", 1<<30, arrayclients.ProtocolNFS)
	require.NoError(t, err)
	require.NoError(t, nfsOnly.ControllerPublish(ctx, h2, "0c6e2f4a-1d3b-4a5c-8e7f-9b0a1c2d3e4f", false))
	assert.Equal(t, []string{"127.0.10.3/255.255.255.255"}, export(h2).ReadWriteRootHosts)
	require.NoError(t, nfsOnly.ControllerUnpublish(ctx, h2, "0c6e2f4a-1d3b-4a5c-8e7f-9b0a1c2d3e4f"))
	assert.Empty(t, export(h2).ReadWriteRootHosts)

	for _, byDriver := range driverWrites(t, w.servers["pflex-1"]) {
		assert.True(t, byDriver, "every write came through the tagged listener")
	}
}

func TestPowerStoreController(t *testing.T) {
	w := newWorld(t)
	l := w.urls["pstore-1"]
	c, err := csidriver.NewPowerStore(csidriver.PowerStoreConfig{Endpoint: l.URL, CAFile: l.CAFile,
		Username: "admin", Password: "Password123!", GlobalID: "PSA10000"})
	require.NoError(t, err)
	assert.Equal(t, csidriver.PowerStoreDriver, c.Driver())
	reader, err := gopowerstore.NewClientWithArgs(l.URL+"/api/rest", "admin", "Password123!",
		gopowerstore.NewClientOptions().SetCAFilePath(l.CAFile))
	require.NoError(t, err)
	given := func(h string) int {
		loc, err := arrayclients.ParseVolumeHandle(arrayclients.PowerStore, h, "ext4")
		require.NoError(t, err)
		m, err := reader.GetHostVolumeMappingByVolumeID(context.Background(), loc.Object)
		require.NoError(t, err)
		return len(m)
	}
	n1, n2 := w.nodeID(0, csidriver.PowerStoreDriver), w.nodeID(1, csidriver.PowerStoreDriver)
	require.Equal(t, "csi-node-0a1b2c3d4e5f60718293a4b5c6d7e8f9-127.0.10.1", n1)
	// Block and NFS are both emulated (TestPowerStoreNFSController).
	h := exerciseLife(t, c, arrayclients.ProtocolBlock, n1, n2, given)

	loc, err := arrayclients.ParseVolumeHandle(arrayclients.PowerStore, h, "ext4")
	require.NoError(t, err)
	assert.Equal(t, "PSA10000", loc.ArrayID, "the handle is <UUID>/<global ID>/scsi")
	assert.Equal(t, arrayclients.ProtocolBlock, loc.Protocol)

	ctx := context.Background()
	require.ErrorIs(t, c.ControllerPublish(ctx, h, "csi-node-ffffffffffffffffffffffffffffffff-127.0.10.9", false), csidriver.ErrNotFound)
	require.ErrorIs(t, c.ControllerPublish(ctx, "0a6e2b34-5c1d-4f7e-9a8b-000000000001/PSA10000/scsi", n1, false), csidriver.ErrNotFound)
	require.NoError(t, c.ControllerUnpublish(ctx, "0a6e2b34-5c1d-4f7e-9a8b-000000000001/PSA10000/scsi", n1))
	require.ErrorIs(t, c.ControllerPublish(ctx, loc.Object+"/PSOTHER/scsi", n1, false), csidriver.ErrInvalid)

	for _, byDriver := range driverWrites(t, w.servers["pstore-1"]) {
		assert.True(t, byDriver)
	}
}

func TestUnityController(t *testing.T) {
	w := newWorld(t)
	srv := w.servers["unity-1"]
	e, err := csidriver.ForSim(context.Background(), srv, "", "", t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Close() })
	c := e.Controller
	assert.Equal(t, csidriver.UnityDriver, c.Driver())
	assert.Regexp(t, `^APM\d{11}$`, e.ArrayID)
	sim := srv.Family().(*unity.Sim)
	given := func(h string) int {
		loc, err := arrayclients.ParseVolumeHandle(arrayclients.Unity, h, "ext4")
		require.NoError(t, err)
		var st struct {
			LUNs []struct {
				ID         string `json:"id"`
				HostAccess []struct {
					Host string `json:"host"`
				} `json:"hostAccess"`
			} `json:"luns"`
		}
		b, err := json.Marshal(sim.Snapshot())
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(b, &st))
		for _, l := range st.LUNs {
			if l.ID == loc.Object {
				return len(l.HostAccess)
			}
		}
		t.Fatalf("no LUN %s", loc.Object)
		return 0
	}
	n1, n2 := w.nodeID(0, csidriver.UnityDriver), w.nodeID(1, csidriver.UnityDriver)
	require.Equal(t, "worker-1,worker-1", n1, "csi-unity: <short>,<node name>")
	h := exerciseLife(t, c, arrayclients.ProtocolBlock, n1, n2, given)

	loc, err := arrayclients.ParseVolumeHandle(arrayclients.Unity, h, "ext4")
	require.NoError(t, err)
	assert.Equal(t, "k8s-7f3a09c2d1-iSCSI-"+strings.ToLower(e.ArrayID)+"-"+loc.Object, h,
		"the handle is <name>-<protocol>-<array ID>-<LUN ID>")
	assert.Equal(t, arrayclients.ProtocolBlock, loc.Protocol)
	assert.True(t, arrayclients.Config{Family: arrayclients.Unity, ArrayIDs: []string{e.ArrayID}}.Holds(loc),
		"unity.arrayID as the secret spells it places the handle")

	ctx := context.Background()
	require.ErrorIs(t, c.ControllerPublish(ctx, h, "worker-9,worker-9.cluster.local", false), csidriver.ErrNotFound)
	gone := "k8s-gone-iSCSI-" + strings.ToLower(e.ArrayID) + "-sv_999"
	require.ErrorIs(t, c.ControllerPublish(ctx, gone, n1, false), csidriver.ErrNotFound)
	require.NoError(t, c.ControllerUnpublish(ctx, gone, n1), "unpublish of a deleted volume succeeds")
	require.ErrorIs(t, c.ControllerPublish(ctx, "k8s-x-iSCSI-apm00000000000-"+loc.Object, n1, false), csidriver.ErrInvalid)
	require.ErrorIs(t, c.ControllerPublish(ctx, "k8s-x-FCoE-"+strings.ToLower(e.ArrayID)+"-"+loc.Object, n1, false), csidriver.ErrInvalid)

	for _, byDriver := range driverWrites(t, srv) {
		assert.True(t, byDriver, "every write came through the tagged listener")
	}
}

// unityShareState is a simulated Unity's NFS shares as its snapshot shows
// them.
type unityShareState struct {
	ID                      string   `json:"id"`
	Name                    string   `json:"name"`
	Filesystem              string   `json:"filesystem"`
	ReadOnlyHosts           []string `json:"readOnlyHosts"`
	ReadWriteHosts          []string `json:"readWriteHosts"`
	ReadOnlyRootAccessHosts []string `json:"readOnlyRootAccessHosts"`
	RootAccessHosts         []string `json:"rootAccessHosts"`
}

func unityShares(t *testing.T, sim *unity.Sim) []unityShareState {
	t.Helper()
	var st struct {
		Shares []unityShareState `json:"nfsShares"`
	}
	b, err := json.Marshal(sim.Snapshot())
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &st))
	return st.Shares
}

// TestUnityControllerNFS: csi-unity's NFS volume is a file system whose
// share (csishare-<name>, created on the first publish) lists the hosts in
// rootAccessHosts; the unpublish that leaves no host deletes the share.
func TestUnityControllerNFS(t *testing.T) {
	w := newWorld(t)
	srv := w.servers["unity-1"]
	e, err := csidriver.ForSim(context.Background(), srv, "", "", t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Close() })
	c := e.Controller
	sim := srv.Family().(*unity.Sim)
	given := func(h string) int {
		loc, err := arrayclients.ParseVolumeHandle(arrayclients.Unity, h, "")
		require.NoError(t, err)
		n := 0
		for _, sh := range unityShares(t, sim) {
			if sh.Filesystem == loc.Object {
				n += len(sh.ReadOnlyHosts) + len(sh.ReadWriteHosts) + len(sh.ReadOnlyRootAccessHosts) + len(sh.RootAccessHosts)
			}
		}
		return n
	}
	n1, n2 := w.nodeID(0, csidriver.UnityDriver), w.nodeID(1, csidriver.UnityDriver)
	h := exerciseLife(t, c, arrayclients.ProtocolNFS, n1, n2, given)

	loc, err := arrayclients.ParseVolumeHandle(arrayclients.Unity, h, "")
	require.NoError(t, err)
	assert.Equal(t, "k8s-7f3a09c2d1-NFS-"+strings.ToLower(e.ArrayID)+"-"+loc.Object, h,
		"the handle is <name>-NFS-<array ID>-<file system ID>")
	assert.Equal(t, arrayclients.ProtocolNFS, loc.Protocol)
	assert.Regexp(t, `^fs_\d+$`, loc.Object)
	assert.True(t, arrayclients.Config{Family: arrayclients.Unity, ArrayIDs: []string{e.ArrayID}}.Holds(loc))
	h1, err := sim.HostID("worker-1")
	require.NoError(t, err)
	h2, err := sim.HostID("worker-2")
	require.NoError(t, err)
	shares := unityShares(t, sim)
	require.Len(t, shares, 1)
	assert.Equal(t, "csishare-k8s-7f3a09c2d1", shares[0].Name)
	assert.Equal(t, []string{h2, h1}, shares[0].RootAccessHosts, "both hosts in rootAccessHosts, in publish order")
	assert.Empty(t, shares[0].ReadWriteHosts)
	first := shares[0].ID

	ctx := context.Background()
	require.NoError(t, c.ControllerUnpublish(ctx, h, n2))
	require.NoError(t, c.ControllerUnpublish(ctx, h, n1))
	assert.Empty(t, unityShares(t, sim), "the unpublish that leaves the share to no host deletes it")
	require.NoError(t, c.ControllerUnpublish(ctx, h, n1), "unpublish without a share succeeds")
	require.NoError(t, c.ControllerPublish(ctx, h, n1, false))
	shares = unityShares(t, sim)
	require.Len(t, shares, 1)
	assert.NotEqual(t, first, shares[0].ID, "the next publish creates a new share")
	assert.Equal(t, []string{h1}, shares[0].RootAccessHosts)

	gone := "k8s-gone-NFS-" + strings.ToLower(e.ArrayID) + "-fs_999"
	require.ErrorIs(t, c.ControllerPublish(ctx, gone, n1, false), csidriver.ErrNotFound)
	require.NoError(t, c.ControllerUnpublish(ctx, gone, n1), "unpublish of a deleted file system succeeds")
	again, err := c.CreateVolume(ctx, "k8s-7f3a09c2d1", 8<<30, arrayclients.ProtocolNFS)
	require.NoError(t, err)
	assert.Equal(t, h, again)
	_, err = c.CreateVolume(ctx, "k8s-7f3a09c2d1", 16<<30, arrayclients.ProtocolNFS)
	require.ErrorIs(t, err, csidriver.ErrInvalid, "a file system of that name and another size")

	for _, byDriver := range driverWrites(t, srv) {
		assert.True(t, byDriver, "every write came through the tagged listener")
	}
}

func TestPowerScaleController(t *testing.T) {
	w := newWorld(t)
	srv := w.servers["pscale-1"]
	e, err := csidriver.ForSim(context.Background(), srv, "", "", t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Close() })
	c := e.Controller
	assert.Equal(t, csidriver.PowerScaleDriver, c.Driver())
	assert.Equal(t, "pscale-1", e.ArrayID)
	sim := srv.Family().(*powerscale.Sim)
	exportOf := func(h string) powerscale.ExportState {
		loc, err := arrayclients.ParseVolumeHandle(arrayclients.PowerScale, h, "")
		require.NoError(t, err)
		for _, ex := range sim.State().Exports {
			if strconv.Itoa(ex.ID) == loc.Object {
				return ex
			}
		}
		t.Fatalf("no export %s", loc.Object)
		return powerscale.ExportState{}
	}
	// given counts the nodes an export lists, by any of their forms.
	given := func(h string) int {
		ex := exportOf(h)
		all := append(append(append(slices.Clone(ex.Clients), ex.RootClients...), ex.ReadWriteClients...), ex.ReadOnlyClients...)
		n := 0
		for _, node := range w.fx.Nodes {
			if slices.Contains(all, node.IP) || slices.Contains(all, node.Name) || slices.Contains(all, node.LongName()) {
				n++
			}
		}
		return n
	}
	n1, n2 := w.nodeID(0, csidriver.PowerScaleDriver), w.nodeID(1, csidriver.PowerScaleDriver)
	require.Equal(t, "worker-1=#=#=worker-1.cluster.local=#=#=127.0.10.1", n1)
	h := exerciseProtocol(t, c, arrayclients.ProtocolNFS, n1, n2, given)

	loc, err := arrayclients.ParseVolumeHandle(arrayclients.PowerScale, h, "")
	require.NoError(t, err)
	assert.Equal(t, "k8s-7f3a09c2d1=_=_="+loc.Object+"=_=_=System=_=_=pscale-1", h,
		"the handle is <name>=_=_=<export ID>=_=_=<zone>=_=_=<cluster>")
	assert.True(t, arrayclients.Config{Family: arrayclients.PowerScale, ArrayIDs: []string{"pscale-1"}}.Holds(loc),
		"powerscale.clusterName places the handle")
	ex := exportOf(h)
	assert.Equal(t, []string{"/ifs/data/csi/k8s-7f3a09c2d1"}, ex.Paths)
	assert.Equal(t, []string{"localhost", "worker-2.cluster.local", "worker-1.cluster.local"}, ex.Clients,
		"localhost from CreateVolume, then each node's FQDN in clients")
	assert.Contains(t, sim.State().Directories, "/ifs/data/csi/k8s-7f3a09c2d1", "the volume's directory exists")

	ctx := context.Background()
	require.ErrorIs(t, c.ControllerPublish(ctx, "k8s-gone=_=_=999=_=_=System=_=_=pscale-1", n1, false), csidriver.ErrNotFound)
	require.NoError(t, c.ControllerUnpublish(ctx, "k8s-gone=_=_=999=_=_=System=_=_=pscale-1", n1),
		"unpublish of a deleted volume succeeds")
	require.ErrorIs(t, c.ControllerPublish(ctx, "k8s-x=_=_="+loc.Object+"=_=_=System=_=_=other", n1, false), csidriver.ErrInvalid)
	require.ErrorIs(t, c.ControllerPublish(ctx, h, "worker-1", false), csidriver.ErrInvalid)

	for _, byDriver := range driverWrites(t, srv) {
		assert.True(t, byDriver, "every write came through the tagged listener")
	}
}

func TestPowerMaxController(t *testing.T) {
	w := newWorld(t)
	srv := w.servers["pmax-1"]
	e, err := csidriver.ForSim(context.Background(), srv, "", "", t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Close() })
	c := e.Controller
	assert.Equal(t, csidriver.PowerMaxDriver, c.Driver())
	assert.Equal(t, "000197900046", e.ArrayID)
	sim := srv.Family().(*powermax.Sim)
	type state struct {
		MaskingViews []struct {
			ID           string `json:"maskingViewId"`
			StorageGroup string `json:"storageGroupId"`
		} `json:"maskingViews"`
		Volumes []struct {
			ID     string   `json:"volumeId"`
			Groups []string `json:"storageGroupId"`
		} `json:"volumes"`
	}
	read := func() state {
		var st state
		b, err := json.Marshal(sim.Snapshot())
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(b, &st))
		return st
	}
	// given counts the masking views the volume is in.
	given := func(h string) int {
		loc, err := arrayclients.ParseVolumeHandle(arrayclients.PowerMax, h, "ext4")
		require.NoError(t, err)
		st := read()
		n := 0
		for _, v := range st.Volumes {
			if v.ID != loc.Object {
				continue
			}
			for _, mv := range st.MaskingViews {
				if slices.Contains(v.Groups, mv.StorageGroup) {
					n++
				}
			}
		}
		return n
	}
	n1, n2 := w.nodeID(0, csidriver.PowerMaxDriver), w.nodeID(1, csidriver.PowerMaxDriver)
	require.Equal(t, "worker-1", n1)
	h := exercise(t, c, n1, n2, given)

	loc, err := arrayclients.ParseVolumeHandle(arrayclients.PowerMax, h, "ext4")
	require.NoError(t, err)
	assert.Equal(t, "csi-TST-k8s-7f3a09c2d1-000197900046-"+loc.Object, h,
		"the handle is csi-<prefix>-<name>-<symmetrix ID>-<device ID>")
	assert.True(t, arrayclients.Config{Family: arrayclients.PowerMax, ArrayIDs: []string{"000197900046"}}.Holds(loc))
	// The node's masking view was removed with its last volume and made
	// again on the next publish.
	var views []string
	for _, mv := range read().MaskingViews {
		views = append(views, mv.ID+"/"+mv.StorageGroup)
	}
	assert.ElementsMatch(t, []string{"csi-mv-TST-worker-1/csi-no-srp-sg-TST-worker-1",
		"csi-mv-TST-worker-2/csi-no-srp-sg-TST-worker-2"}, views)

	ctx := context.Background()
	require.ErrorIs(t, c.ControllerPublish(ctx, h, "worker-9", false), csidriver.ErrNotFound)
	gone := "csi-TST-k8s-gone-000197900046-0FFFF"
	require.ErrorIs(t, c.ControllerPublish(ctx, gone, n1, false), csidriver.ErrNotFound)
	require.NoError(t, c.ControllerUnpublish(ctx, gone, n1), "unpublish of a deleted volume succeeds")
	require.ErrorIs(t, c.ControllerPublish(ctx, "csi-TST-k8s-7f3a09c2d1-000197900999-"+loc.Object, n1, false), csidriver.ErrInvalid)
	require.ErrorIs(t, c.ControllerPublish(ctx, "csi-TST-other-000197900046-"+loc.Object, n1, false), csidriver.ErrInvalid,
		"a handle whose name is not the volume's identifier")

	for _, byDriver := range driverWrites(t, srv) {
		assert.True(t, byDriver, "every write came through the tagged listener")
	}
}

// psExportHosts reads the host lists of the NFS export of an NFS handle's
// file system; none when it has no export yet.
func psExportHosts(t *testing.T, reader gopowerstore.Client, h string) map[string][]string {
	t.Helper()
	loc, err := arrayclients.ParseVolumeHandle(arrayclients.PowerStore, h, "nfs")
	require.NoError(t, err)
	require.Equal(t, arrayclients.ProtocolNFS, loc.Protocol)
	xs, err := reader.GetNFSExportByFilter(context.Background(), map[string]string{"file_system_id": "eq." + loc.Object})
	require.NoError(t, err)
	out := map[string][]string{}
	for _, x := range xs {
		out["ro"] = append(out["ro"], x.ROHosts...)
		out["roRoot"] = append(out["roRoot"], x.RORootHosts...)
		out["rw"] = append(out["rw"], x.RWHosts...)
		out["rwRoot"] = append(out["rwRoot"], x.RWRootHosts...)
	}
	return out
}

func TestPowerStoreNFSController(t *testing.T) {
	w := newWorld(t)
	srv := w.servers["pstore-1"]
	e, err := csidriver.ForSim(context.Background(), srv, "", "", t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Close() })
	c := e.Controller
	l := w.urls["pstore-1"]
	reader, err := gopowerstore.NewClientWithArgs(l.URL+"/api/rest", "admin", "Password123!",
		gopowerstore.NewClientOptions().SetCAFilePath(l.CAFile))
	require.NoError(t, err)
	n1, n2 := w.nodeID(0, csidriver.PowerStoreDriver), w.nodeID(1, csidriver.PowerStoreDriver)
	ctx := context.Background()

	h, err := c.CreateVolume(ctx, "k8s-5d1e0a9b7c", 8<<30, arrayclients.ProtocolNFS)
	require.NoError(t, err)
	again, err := c.CreateVolume(ctx, "k8s-5d1e0a9b7c", 8<<30, arrayclients.ProtocolNFS)
	require.NoError(t, err)
	assert.Equal(t, h, again, "CreateVolume of an existing name returns the same handle")
	loc, err := arrayclients.ParseVolumeHandle(arrayclients.PowerStore, h, "nfs")
	require.NoError(t, err)
	assert.Equal(t, e.ArrayID, loc.ArrayID, "the handle is <UUID>/<global ID>/nfs")
	assert.Empty(t, psExportHosts(t, reader, h), "the export is created by the first publish")

	// Publish adds the node's IP to RWRootHosts; the array lists it with
	// its netmask. Repeating it succeeds (the array's 400 is tolerated).
	require.NoError(t, c.ControllerPublish(ctx, h, n1, false))
	require.NoError(t, c.ControllerPublish(ctx, h, n1, false))
	assert.Equal(t, []string{"127.0.10.1/255.255.255.255"}, psExportHosts(t, reader, h)["rwRoot"])

	// csi-powerstore's NFS publish does not refuse a single-node volume
	// another node has (only its SCSI publisher does).
	require.NoError(t, c.ControllerPublish(ctx, h, n2, false))
	assert.Equal(t, []string{"127.0.10.1/255.255.255.255", "127.0.10.2/255.255.255.255"}, psExportHosts(t, reader, h)["rwRoot"])

	require.NoError(t, c.ControllerUnpublish(ctx, h, n1))
	require.NoError(t, c.ControllerUnpublish(ctx, h, n1), "unpublish of an unpublished volume succeeds")
	assert.Equal(t, []string{"127.0.10.2/255.255.255.255"}, psExportHosts(t, reader, h)["rwRoot"])

	// Unpublish removes the node's entry from whichever list holds it.
	sim := srv.Family().(interface {
		SetExportHosts(fsName, list string, hosts []string) error
	})
	require.NoError(t, sim.SetExportHosts("k8s-5d1e0a9b7c", "read_only_hosts", []string{"127.0.10.1", "10.1.1.1"}))
	require.NoError(t, c.ControllerUnpublish(ctx, h, n1))
	hosts := psExportHosts(t, reader, h)
	assert.Equal(t, []string{"10.1.1.1/255.255.255.255"}, hosts["ro"])
	assert.Equal(t, []string{"127.0.10.2/255.255.255.255"}, hosts["rwRoot"])

	gone := "0a6e2b34-5c1d-4f7e-9a8b-000000000001/" + e.ArrayID + "/nfs"
	require.ErrorIs(t, c.ControllerPublish(ctx, gone, n1, false), csidriver.ErrNotFound)
	require.NoError(t, c.ControllerUnpublish(ctx, gone, n1), "unpublish of a deleted volume succeeds")
	require.ErrorIs(t, c.ControllerPublish(ctx, h, "csi-node-0a1b2c3d4e5f60718293a4b5c6d7e8f9", false), csidriver.ErrNotFound,
		"a node ID without an IP cannot be published to")

	// The block protocol still works beside it.
	bh, err := c.CreateVolume(ctx, "k8s-block", 8<<30, arrayclients.ProtocolBlock)
	require.NoError(t, err)
	require.NoError(t, c.ControllerPublish(ctx, bh, n1, false))

	for _, byDriver := range driverWrites(t, srv) {
		assert.True(t, byDriver)
	}
}
