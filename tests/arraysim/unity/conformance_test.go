package unity_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/dell/gounity"
	gounityapi "github.com/dell/gounity/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/tests/arraysim/conformance"
)

// conformanceFixture's nodes are named by their FQDNs: csi-unity names a
// node's host by the node's name (service/node.go addNewNodeToArray), and
// looks up the short name first.
const conformanceFixture = `
nodes:
  - {name: worker-1.cluster.local, ip: 127.0.10.1, fqdn: worker-1.cluster.local, iqn: "iqn.1994-05.com.redhat:worker-1"}
  - {name: worker-2.cluster.local, ip: 127.0.10.2, fqdn: worker-2.cluster.local, iqn: "iqn.1994-05.com.redhat:worker-2"}
arrays:
  - name: unity-1
    family: unity
    spec:
      username: admin
      password: secret
      generate: {lunsPerNode: 0}
`

// TestConformanceUnity replays the rows UN-* of CONFORMANCE.md: the
// requests csi-unity sends for create, node registration, publish and
// unpublish (block and NFS), through the gounity calls the driver makes,
// read as the driver reads them.
func TestConformanceUnity(t *testing.T) {
	e := startDoc(t, conformanceFixture, false)
	c := e.client(t)
	const lunName, fsName = "csivol-conform", "csivol-conform-nfs"
	var lunID, fsID, shareID, hostID, host2ID string
	rows := []conformance.Row{
		// Create, block: service/controller.go CreateVolume.
		{ID: "UN-C1", Method: http.MethodGet, Path: `^/api/instances/lun/name:` + lunName, Status: http.StatusNotFound, Do: func(ctx context.Context, t *testing.T) {
			v, _ := c.FindVolumeByName(ctx, lunName) // the driver ignores the error and reads nil as absent
			assert.Nil(t, v)
		}},
		{ID: "UN-C2", Method: http.MethodPost, Path: `^/api/types/storageResource/action/createLun$`, Do: func(ctx context.Context, t *testing.T) {
			_, err := c.CreateLun(ctx, lunName, "pool_1", "", 8<<30, 0, "", true, false)
			require.NoError(t, err)
		}},
		{ID: "UN-C3", Method: http.MethodGet, Path: `^/api/instances/lun/name:` + lunName, Do: func(ctx context.Context, t *testing.T) {
			v, err := c.FindVolumeByName(ctx, lunName)
			require.NoError(t, err)
			lunID = v.VolumeContent.ResourceID
			require.NotEmpty(t, lunID)
		}},
		// Node registration: service/node.go addNodeInformationIntoArray, createHost.
		{ID: "UN-R1", Method: http.MethodGet, Path: `^/api/instances/host/name:worker-1\.cluster\.local\?`, Do: func(ctx context.Context, t *testing.T) {
			// The short name first (not found here), then the long.
			_, err := c.FindHostByName(ctx, "worker-1")
			require.Error(t, err)
			h, err := c.FindHostByName(ctx, "worker-1.cluster.local")
			require.NoError(t, err)
			hostID = h.HostContent.ID
		}},
		{ID: "UN-R2", Method: http.MethodPost, Path: `^/api/types/host/instances$`, Status: http.StatusCreated, Do: func(ctx context.Context, t *testing.T) {
			_, err := c.FindHostByName(ctx, "worker-3")
			require.Error(t, err, "no host of the short name")
			h, err := c.CreateHost(ctx, "worker-3.cluster.local", "")
			require.NoError(t, err)
			host2ID = h.HostContent.ID
		}},
		{ID: "UN-R3", Method: http.MethodPost, Path: `^/api/types/hostIPPort/instances$`, Status: http.StatusCreated, Do: func(ctx context.Context, t *testing.T) {
			_, err := c.CreateHostIPPort(ctx, host2ID, "worker-3.cluster.local")
			require.NoError(t, err)
			_, err = c.CreateHostIPPort(ctx, host2ID, "127.0.10.3")
			require.NoError(t, err)
		}},
		{ID: "UN-R4", Method: http.MethodPost, Path: `^/api/types/hostInitiator/instances$`, Status: http.StatusCreated, Do: func(ctx context.Context, t *testing.T) {
			_, err := c.CreateHostInitiator(ctx, host2ID, "iqn.1994-05.com.redhat:worker-3", gounityapi.ISCSCIInitiatorType)
			require.NoError(t, err)
		}},
		// Publish, block: service/controller.go ControllerPublishVolume, exportVolume.
		{ID: "UN-P1", Method: http.MethodGet, Path: `^/api/instances/lun/[^/?]+\?fields=`, Do: func(ctx context.Context, t *testing.T) {
			v, err := c.FindVolumeByID(ctx, lunID)
			require.NoError(t, err)
			assert.Empty(t, v.VolumeContent.HostAccessResponse, "host access is read to refuse a second node")
		}},
		{ID: "UN-P2", Method: http.MethodPost, Path: `^/api/instances/storageResource/[^/]+/action/modifyLun$`, Status: http.StatusNoContent, Do: func(ctx context.Context, t *testing.T) {
			require.NoError(t, c.ModifyVolumeExport(ctx, lunID, []string{hostID}))
			v, err := c.FindVolumeByID(ctx, lunID)
			require.NoError(t, err)
			require.Len(t, v.VolumeContent.HostAccessResponse, 1)
			assert.Equal(t, hostID, v.VolumeContent.HostAccessResponse[0].HostContent.ID)
		}},
		{ID: "UN-P3", Method: http.MethodPost, Path: `^/api/instances/storageResource/[^/]+/action/modifyLun$`, Status: http.StatusNoContent, Do: func(ctx context.Context, t *testing.T) {
			// A multi-node volume is given to a second host.
			require.NoError(t, c.ModifyVolumeExport(ctx, lunID, []string{hostID, host2ID}))
		}},
		// Unpublish, block: service/controller.go ControllerUnpublishVolume.
		{ID: "UN-U1", Method: http.MethodPost, Path: `^/api/instances/storageResource/[^/]+/action/modifyLun$`, Status: http.StatusNoContent, Do: func(ctx context.Context, t *testing.T) {
			require.NoError(t, c.ModifyVolumeExport(ctx, lunID, []string{host2ID}))
		}},
		{ID: "UN-U2", Method: http.MethodPost, Path: `^/api/instances/storageResource/[^/]+/action/modifyLun$`, Status: conformance.AnyStatus, Do: func(ctx context.Context, t *testing.T) {
			// The repeated unpublish writes the unchanged list; the driver
			// reads any error as codes.Unknown (a detach that never ends).
			err := c.ModifyVolumeExport(ctx, lunID, []string{host2ID})
			require.Error(t, err)
			assert.Contains(t, err.Error(), gounity.NothingToModifyErrorCode)
		}},
		{ID: "UN-U3", Method: http.MethodGet, Path: `^/api/instances/lun/sv_999999\?`, Status: conformance.AnyStatus, Do: func(ctx context.Context, t *testing.T) {
			_, err := c.FindVolumeByID(ctx, "sv_999999")
			assert.ErrorIs(t, err, gounity.ErrorVolumeNotFound,
				"a deleted LUN: the driver compares with gounity.ErrorVolumeNotFound (error code %s) and succeeds; got %v", gounity.VolumeNotFoundErrorCode, err)
		}},
		// Create, NFS: service/controller.go CreateVolume (NFS).
		{ID: "UN-N1", Method: http.MethodPost, Path: `^/api/types/storageResource/action/createFilesystem$`, Do: func(ctx context.Context, t *testing.T) {
			_, err := c.CreateFilesystem(ctx, fsName, "pool_1", "", "nas_1", 8<<30, 0, 8192, 0, true, false)
			require.NoError(t, err)
			fs, err := c.FindFilesystemByName(ctx, fsName)
			require.NoError(t, err)
			fsID = fs.FileContent.ID
		}},
		// Publish, NFS: service/controller.go exportFilesystem.
		{ID: "UN-F1", Method: http.MethodPost, Path: `^/api/instances/storageResource/[^/]+/action/modifyFilesystem$`, Do: func(ctx context.Context, t *testing.T) {
			fs, err := c.CreateNFSShare(ctx, "csishare-"+fsName, "/", fsID, gounity.NoneDefaultAccess)
			require.NoError(t, err)
			for _, s := range fs.FileContent.NFSShare {
				if s.Path == "/" && s.ParentSnap.ID == "" {
					shareID = s.ID
				}
			}
			require.NotEmpty(t, shareID, "the driver reads the share's ID from the file system's nfsShare list")
		}},
		{ID: "UN-F2", Method: http.MethodPost, Path: `^/api/instances/storageResource/[^/]+/action/modifyFilesystem$`, Do: func(ctx context.Context, t *testing.T) {
			require.NoError(t, c.ModifyNFSShareHostAccess(ctx, fsID, shareID, []string{hostID}, gounity.ReadWriteRootAccessType))
			s, err := c.FindNFSShareByID(ctx, shareID)
			require.NoError(t, err)
			require.Len(t, s.NFSShareContent.RootAccessHosts, 1)
			assert.Equal(t, hostID, s.NFSShareContent.RootAccessHosts[0].ID)
		}},
		// Unpublish, NFS: service/controller.go unexportFilesystem.
		{ID: "UN-G1", Method: http.MethodPost, Path: `^/api/instances/storageResource/[^/]+/action/modifyFilesystem$`, Do: func(ctx context.Context, t *testing.T) {
			require.NoError(t, c.ModifyNFSShareHostAccess(ctx, fsID, shareID, []string{}, gounity.ReadWriteRootAccessType))
			s, err := c.FindNFSShareByID(ctx, shareID)
			require.NoError(t, err)
			assert.Empty(t, s.NFSShareContent.RootAccessHosts)
		}},
	}
	conformance.Run(t, e.srv, rows)
}
