package powerstore_test

import (
	"context"
	"testing"

	"github.com/dell/gopowerstore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/tests/arraysim/fixture"
	"github.com/fenced-project/fenced/tests/arraysim/powerstore"
)

const nfsFixture = testFixture + `
      fileSystems:
        - {name: fs-published, readWriteRootHosts: [127.0.10.1], readOnlyHosts: [10.9.0.0/24]}
        - {name: fs-unpublished, noExport: true}
`

func TestNFSExportsWithGopowerstore(t *testing.T) {
	e := newEnvFrom(t, nfsFixture)
	ctx := context.Background()

	fs, err := e.client.GetFSByName(ctx, "fs-published")
	require.NoError(t, err)
	got, err := e.client.GetFS(ctx, fs.ID)
	require.NoError(t, err)
	assert.Equal(t, "fs-published", got.Name)
	x, err := e.client.GetNFSExportByFileSystemID(ctx, fs.ID)
	require.NoError(t, err)
	assert.Equal(t, []string{"127.0.10.1/255.255.255.255"}, x.RWRootHosts, "the array lists an added IP with its netmask")
	assert.Equal(t, []string{"10.9.0.0/255.255.255.0"}, x.ROHosts)
	assert.Equal(t, "No_Access", string(x.DefaultAccess))
	byID, err := e.client.GetNFSExport(ctx, x.ID)
	require.NoError(t, err)
	assert.Equal(t, x, byID)

	// The export csi-powerstore's publish creates when there is none.
	other, err := e.client.GetFSByName(ctx, "fs-unpublished")
	require.NoError(t, err)
	_, err = e.client.GetNFSExportByFileSystemID(ctx, other.ID)
	require.Error(t, err)
	assert.Equal(t, 404, apiStatus(t, err))
	created, err := e.client.CreateNFSExport(ctx, &gopowerstore.NFSExportCreate{Name: other.Name, FileSystemID: other.ID, Path: "/" + other.Name})
	require.NoError(t, err)
	assert.NotEmpty(t, created.ID)

	// Publish: add the node's IP; the array stores ip/255.255.255.255.
	_, err = e.client.ModifyNFSExport(ctx, &gopowerstore.NFSExportModify{AddRWRootHosts: []string{"127.0.10.2"}}, x.ID)
	require.NoError(t, err)
	x, err = e.client.GetNFSExport(ctx, x.ID)
	require.NoError(t, err)
	assert.Equal(t, []string{"127.0.10.1/255.255.255.255", "127.0.10.2/255.255.255.255"}, x.RWRootHosts)

	// Repeats and wrong forms are refused whole, and change nothing.
	before := e.sim.State()
	for name, mod := range map[string]gopowerstore.NFSExportModify{
		"add a listed host":           {AddRWRootHosts: []string{"127.0.10.2"}},
		"add a host another list has": {AddRWHosts: []string{"127.0.10.1/32"}},
		"remove without the netmask":  {RemoveRWRootHosts: []string{"127.0.10.1"}},
		"remove from the wrong list":  {RemoveROHosts: []string{"127.0.10.1/255.255.255.255"}},
		"one bad part of two":         {RemoveRWRootHosts: []string{"127.0.10.1/255.255.255.255"}, AddROHosts: []string{"bad host"}},
	} {
		_, err := e.client.ModifyNFSExport(ctx, &mod, x.ID)
		require.Error(t, err, name)
		assert.Equal(t, 400, apiStatus(t, err), name)
	}
	assert.Equal(t, before, e.sim.State())

	// Unpublish: remove the form the array lists.
	seq := e.srv.LastSeq()
	_, err = e.client.ModifyNFSExport(ctx, &gopowerstore.NFSExportModify{RemoveRWRootHosts: []string{"127.0.10.1/255.255.255.255"}}, x.ID)
	require.NoError(t, err)
	x, err = e.client.GetNFSExport(ctx, x.ID)
	require.NoError(t, err)
	assert.Equal(t, []string{"127.0.10.2/255.255.255.255"}, x.RWRootHosts)
	writes := 0
	for _, a := range e.srv.AuditSince(seq) {
		if a.Changed {
			writes++
			assert.Contains(t, a.Change, "nfsExports", "the audit names the export's change")
		}
	}
	assert.Equal(t, 1, writes)

	st := e.sim.State()
	require.Len(t, st.FileSystems, 2)
	require.Len(t, st.NFSExports, 2)
	_, err = e.client.ModifyNFSExport(ctx, &gopowerstore.NFSExportModify{AddRWRootHosts: []string{"127.0.10.3"}}, "no-such-export")
	assert.Equal(t, 404, apiStatus(t, err))
}

func TestNFSExportModifyKeepsUnsentFields(t *testing.T) {
	e := newEnvFrom(t, nfsFixture)
	ctx := context.Background()
	fs, err := e.client.GetFSByName(ctx, "fs-published")
	require.NoError(t, err)
	x, err := e.client.GetNFSExportByFileSystemID(ctx, fs.ID)
	require.NoError(t, err)
	// gopowerstore always sends is_no_SUID; the array applies what it is sent.
	_, err = e.client.ModifyNFSExport(ctx, &gopowerstore.NFSExportModify{IsNoSUID: true}, x.ID)
	require.NoError(t, err)
	x, err = e.client.GetNFSExport(ctx, x.ID)
	require.NoError(t, err)
	assert.True(t, x.IsNoSUID)
	_, err = e.client.ModifyNFSExport(ctx, &gopowerstore.NFSExportModify{AddRWRootHosts: []string{"127.0.10.3"}}, x.ID)
	require.NoError(t, err)
	x, err = e.client.GetNFSExport(ctx, x.ID)
	require.NoError(t, err)
	assert.False(t, x.IsNoSUID, "ModifyNFSExport sends is_no_SUID false with every change")
}

func TestNFSFixtureErrors(t *testing.T) {
	for _, bad := range []string{
		"{name: fs-a, readWriteRootHosts: [127.0.10.1], readWriteHosts: [127.0.10.1]}",
		"{name: fs-a, readWriteRootHosts: [10.0.0.1/40]}",
		"{name: fs-a, defaultAccess: Everyone}",
		"{name: ''}",
	} {
		fx, err := fixture.Parse([]byte(testFixture + "      fileSystems:\n        - " + bad + "\n"))
		require.NoError(t, err, bad)
		arr, ok := fx.Array("pstore-1")
		require.True(t, ok)
		_, err = powerstore.New(&arr.Spec, fx.Nodes)
		require.Error(t, err, bad)
		assert.Contains(t, err.Error(), "fileSystems[0]")
	}
}
