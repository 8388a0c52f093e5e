package unity_test

import (
	"context"
	"strings"
	"testing"

	"github.com/dell/gounity"
	unitytypes "github.com/dell/gounity/apitypes"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/tests/arraysim/fixture"
	"github.com/fenced-project/fenced/tests/arraysim/unity"
)

const nfsFixture = testFixture + `
      filesystems:
        - name: csivol-nfs-1
          shares:
            - {rootAccessHosts: [worker-1.cluster.local, backup], readOnlyHosts: [twin-ro]}
        - name: csivol-nfs-2
`

// nfsFixtureDoc adds a uniquely named host for a read-only entry (the
// fixture's "twin" hosts share a name).
var nfsFixtureDoc = strings.Replace(nfsFixture, "        - {name: backup,", "        - {name: twin-ro, iqns: [\"iqn.2001-04.com.example:twin-ro\"]}\n        - {name: backup,", 1)

func hostIDs(hs []unitytypes.HostContent) []string {
	out := []string{}
	for _, h := range hs {
		out = append(out, h.ID)
	}
	return out
}

// TestNFSShareHostAccessWithRealClient drives file systems and NFS shares
// as csi-unity does through gounity: create a file system, create its
// share, modify one host list at a time (the list sent replaces that list
// only), delete the share; every write is audited with its state change.
func TestNFSShareHostAccessWithRealClient(t *testing.T) {
	e := startDoc(t, nfsFixtureDoc, true)
	c := e.client(t)
	ctx := context.Background()
	w1, err := e.sim.HostID("worker-1.cluster.local")
	require.NoError(t, err)
	w2, err := e.sim.HostID("worker-2.cluster.local")
	require.NoError(t, err)
	backup, err := e.sim.HostID("backup")
	require.NoError(t, err)
	ro, err := e.sim.HostID("twin-ro")
	require.NoError(t, err)

	fs, err := c.FindFilesystemByID(ctx, "fs_1")
	require.NoError(t, err)
	assert.Equal(t, "csivol-nfs-1", fs.FileContent.Name)
	assert.Equal(t, "res_1", fs.FileContent.StorageResource.ID)
	require.Len(t, fs.FileContent.NFSShare, 1)
	sh := fs.FileContent.NFSShare[0]
	assert.Equal(t, "csishare-csivol-nfs-1", sh.Name)
	assert.Equal(t, "/", sh.Path)

	share, err := c.FindNFSShareByID(ctx, sh.ID)
	require.NoError(t, err)
	assert.Equal(t, []string{w1, backup}, hostIDs(share.NFSShareContent.RootAccessHosts))
	assert.Equal(t, []string{ro}, hostIDs(share.NFSShareContent.ReadOnlyHosts))
	assert.Empty(t, share.NFSShareContent.ReadWriteHosts)
	assert.Equal(t, "fs_1", share.NFSShareContent.Filesystem.ID)

	// Removing worker-1 from rootAccessHosts leaves the other lists.
	e.srv.ClearAudit()
	require.NoError(t, c.ModifyNFSShareHostAccess(ctx, "fs_1", sh.ID, []string{backup}, gounity.ReadWriteRootAccessType))
	share, err = c.FindNFSShareByID(ctx, sh.ID)
	require.NoError(t, err)
	assert.Equal(t, []string{backup}, hostIDs(share.NFSShareContent.RootAccessHosts))
	assert.Equal(t, []string{ro}, hostIDs(share.NFSShareContent.ReadOnlyHosts))
	writes := e.srv.AuditWrites()
	require.Len(t, writes, 1)
	assert.Equal(t, "/api/instances/storageResource/res_1/action/modifyFilesystem", writes[0].Path)
	assert.Contains(t, writes[0].Change, "nfsShares")

	// An unknown host is refused, and nothing changes.
	before := dump(t, e.sim)
	require.Error(t, c.ModifyNFSShareHostAccess(ctx, "fs_1", sh.ID, []string{"Host_999"}, gounity.ReadWriteAccessType))
	assert.Equal(t, before, dump(t, e.sim))

	// csi-unity's NFS volume: a file system, then its share on publish.
	created, err := c.CreateFilesystem(ctx, "csivol-nfs-3", "pool_1", "", "nas_1", 9<<30, 0, 8192, 0, true, false)
	require.NoError(t, err)
	assert.NotEmpty(t, created.FileContent.StorageResource.ID)
	fs3, err := c.FindFilesystemByName(ctx, "csivol-nfs-3")
	require.NoError(t, err)
	assert.Empty(t, fs3.FileContent.NFSShare)
	_, err = c.CreateFilesystem(ctx, "csivol-nfs-3", "pool_1", "", "nas_1", 9<<30, 0, 8192, 0, true, false)
	require.Error(t, err, "a name in use")
	_, err = c.CreateFilesystem(ctx, "csivol-nfs-4", "pool_1", "", "nas_9", 9<<30, 0, 8192, 0, true, false)
	require.Error(t, err, "an unknown NAS server")

	fs3, err = c.CreateNFSShare(ctx, "csishare-csivol-nfs-3", "/", fs3.FileContent.ID, gounity.NoneDefaultAccess)
	require.NoError(t, err)
	require.Len(t, fs3.FileContent.NFSShare, 1)
	id3 := fs3.FileContent.NFSShare[0].ID
	require.NoError(t, c.ModifyNFSShareHostAccess(ctx, fs3.FileContent.ID, id3, []string{w2}, gounity.ReadWriteRootAccessType))
	share, err = c.FindNFSShareByName(ctx, "csishare-csivol-nfs-3")
	require.NoError(t, err)
	assert.Equal(t, []string{w2}, hostIDs(share.NFSShareContent.RootAccessHosts))
	require.NoError(t, c.ModifyNFSShareHostAccess(ctx, fs3.FileContent.ID, id3, []string{}, gounity.ReadWriteRootAccessType),
		"an empty list empties it")
	share, err = c.FindNFSShareByID(ctx, id3)
	require.NoError(t, err)
	assert.Empty(t, share.NFSShareContent.RootAccessHosts)

	require.NoError(t, c.DeleteNFSShare(ctx, fs3.FileContent.ID, id3))
	_, err = c.FindNFSShareByID(ctx, id3)
	require.ErrorContains(t, err, "0x7d13005")
	fs3, err = c.FindFilesystemByID(ctx, fs3.FileContent.ID)
	require.NoError(t, err)
	assert.Empty(t, fs3.FileContent.NFSShare)

	_, err = c.FindFilesystemByID(ctx, "fs_99")
	require.ErrorIs(t, err, gounity.ErrorFilesystemNotFound)
}

func TestNFSSpecErrors(t *testing.T) {
	for _, fs := range []string{
		`[{name: a, shares: [{rootAccessHosts: [nobody]}]}]`,
		`[{name: a, shares: [{rootAccessHosts: [twin]}]}]`,
		`[{name: a, shares: [{rootAccessHosts: [backup, backup]}]}]`,
		`[{name: a, shares: [{defaultAccess: "9"}]}]`,
		`[{name: a}, {name: a}]`,
		`[{name: a, shares: [{}, {}]}]`,
	} {
		f, err := fixture.Parse([]byte(testFixture + "      filesystems: " + fs + "\n"))
		require.NoError(t, err, fs)
		_, err = unity.New(&f.Arrays[0].Spec, f.Nodes)
		assert.Error(t, err, fs)
	}
}
