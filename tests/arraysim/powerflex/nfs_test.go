package powerflex_test

import (
	"testing"

	sio "github.com/dell/goscaleio"
	siotypes "github.com/dell/goscaleio/types/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/tests/arraysim/fixture"
	"github.com/fenced-project/fenced/tests/arraysim/powerflex"
	"github.com/fenced-project/fenced/tests/arraysim/simcore"
)

const nfsFixture = `
nodes:
  - {name: worker-1, ip: 127.0.10.1}
arrays:
  - name: pflex-1
    family: powerflex
    spec:
      systems: [{id: 1a2b3c4d5e6f7a8b, name: sys-1}]
      fileSystems:
        - name: fs-listed
          export:
            readWriteRootHosts: [127.0.10.2/255.255.255.255, 127.0.10.9]
        - name: fs-bare
`

func newNFSBed(t *testing.T) (*powerflex.Sim, *simcore.Server, *sio.Client) {
	t.Helper()
	fx, err := fixture.Parse([]byte(nfsFixture))
	require.NoError(t, err)
	sim, err := powerflex.New(&fx.Arrays[0].Spec, fx.Nodes)
	require.NoError(t, err)
	srv := simcore.New("pflex-1", sim, nil)
	l, err := simcore.Serve(srv, "127.0.0.1:0", true, t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	c, err := sio.NewClientWithArgs(l.URL, "", 5, false, false, l.CAFile)
	require.NoError(t, err)
	user, pass := sim.Credentials()
	_, err = c.Authenticate(&sio.ConfigConnect{Endpoint: l.URL, Username: user, Password: pass})
	require.NoError(t, err)
	return sim, srv, c
}

// TestNFSExportsWithRealClient drives the file API as csi-vxflexos does
// (service/controller.go CreateVolume, service/service.go exportFilesystem
// and unexportFilesystem) through goscaleio, and checks what the array
// lists and what the audit log records.
func TestNFSExportsWithRealClient(t *testing.T) {
	sim, srv, c := newNFSBed(t)
	sys, err := c.FindSystem("1a2b3c4d5e6f7a8b", "", "")
	require.NoError(t, err)

	nas, err := sys.GetNASByIDName("", powerflex.NASName)
	require.NoError(t, err)
	pools, err := c.GetStoragePool("")
	require.NoError(t, err)
	require.Len(t, pools, 1)
	resp, err := sys.CreateFileSystem(&siotypes.FsCreate{Name: "k8s-nfs", SizeTotal: 3 << 30, StoragePoolID: pools[0].ID, NasServerID: nas.ID})
	require.NoError(t, err)
	_, err = sys.CreateFileSystem(&siotypes.FsCreate{Name: "k8s-nfs", SizeTotal: 3 << 30, StoragePoolID: pools[0].ID, NasServerID: nas.ID})
	require.Error(t, err, "a name in use is refused")
	fs, err := sys.GetFileSystemByIDName(resp.ID, "")
	require.NoError(t, err)
	assert.Equal(t, "k8s-nfs", fs.Name)
	fss, err := sys.GetAllFileSystems()
	require.NoError(t, err)
	assert.Len(t, fss, 3)

	xr, err := c.CreateNFSExport(&siotypes.NFSExportCreate{Name: "csishare-k8s-nfs", FileSystemID: fs.ID, Path: "/k8s-nfs"})
	require.NoError(t, err)
	srv.ClearAudit()
	require.NoError(t, c.ModifyNFSExport(&siotypes.NFSExportModify{AddReadWriteRootHosts: []string{"127.0.10.1/255.255.255.255", "10.1.0.0/24"}}, xr.ID))
	require.NoError(t, c.ModifyNFSExport(&siotypes.NFSExportModify{AddReadOnlyRootHosts: []string{"127.0.10.3"}}, xr.ID))
	x, err := c.GetNFSExportByIDName(xr.ID, "")
	require.NoError(t, err)
	assert.Equal(t, siotypes.NFSExportDefaultAccessEnum("No_Access"), x.DefaultAccess)
	assert.Equal(t, []string{"127.0.10.1/255.255.255.255", "10.1.0.0/255.255.255.0"}, x.ReadWriteRootHosts)
	assert.Equal(t, []string{"127.0.10.3/255.255.255.255"}, x.ReadOnlyRootHosts, "the array lists an IP with its netmask")
	writes := srv.AuditWrites()
	require.Len(t, writes, 2)
	assert.Contains(t, writes[0].Change, "read_write_root_hosts", "the audit log records the host list change")

	// Removing needs the exact listed form (csi-vxflexos: "we can't remove
	// without netmask"); an entry not listed is ignored.
	require.NoError(t, c.ModifyNFSExport(&siotypes.NFSExportModify{RemoveReadWriteRootHosts: []string{"127.0.10.1"}}, xr.ID))
	x, err = c.GetNFSExportByIDName(xr.ID, "")
	require.NoError(t, err)
	assert.Contains(t, x.ReadWriteRootHosts, "127.0.10.1/255.255.255.255")
	require.NoError(t, c.ModifyNFSExport(&siotypes.NFSExportModify{RemoveReadWriteRootHosts: []string{"127.0.10.1/255.255.255.255"},
		RemoveReadOnlyRootHosts: []string{"127.0.10.3/255.255.255.255"}}, xr.ID))
	x, err = c.GetNFSExportByIDName(xr.ID, "")
	require.NoError(t, err)
	assert.Equal(t, []string{"10.1.0.0/255.255.255.0"}, x.ReadWriteRootHosts)
	assert.Empty(t, x.ReadOnlyRootHosts)

	all, err := c.GetNFSExport()
	require.NoError(t, err)
	require.Len(t, all, 2)
	listedID, ok := sim.FileSystemID("fs-listed")
	require.True(t, ok)
	listed, ok := sim.ExportOf(listedID)
	require.True(t, ok)
	assert.Equal(t, []string{"127.0.10.2/255.255.255.255", "127.0.10.9"}, listed.ReadWriteRootHosts, "fixture entries are kept as written")

	again, err := c.CreateNFSExport(&siotypes.NFSExportCreate{Name: "again", FileSystemID: fs.ID, Path: "/k8s-nfs"})
	require.NoError(t, err, "a file system may have several exports")
	assert.Len(t, sim.ExportsOf(fs.ID), 2)
	assert.NotEqual(t, xr.ID, again.ID)
	_, err = c.CreateNFSExport(&siotypes.NFSExportCreate{Name: "again", FileSystemID: fs.ID, Path: "/k8s-nfs"})
	require.Error(t, err, "export names are unique")
	require.Error(t, c.ModifyNFSExport(&siotypes.NFSExportModify{AddReadWriteHosts: []string{"127.0.10.1"}}, "no-such-export"))
	_, err = c.GetNFSExportByIDName("no-such-export", "")
	require.Error(t, err)
}
