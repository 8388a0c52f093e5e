package powerflex_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	sio "github.com/dell/goscaleio"
	siotypes "github.com/dell/goscaleio/types/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/tests/arraysim/conformance"
	"github.com/fenced-project/fenced/tests/arraysim/powerflex"
)

// TestConformancePowerFlex replays the rows PF-* of CONFORMANCE.md: the
// requests csi-vxflexos (dell/csi-powerflex) sends for create, publish
// and unpublish of block volumes and NFS file systems, through the
// goscaleio calls the driver makes, read as the driver reads them.
func TestConformancePowerFlex(t *testing.T) {
	b := newBed(t, false)
	c := b.client(t)
	sys := system(t, c)
	n1 := b.fx.Nodes[0]
	const volName, fsName = "k8s-conform", "k8s-conform-nfs"
	var volID, fsID, exportID, sdcID string
	var pool *siotypes.StoragePool
	var nasID string
	rows := []conformance.Row{
		// Create, block: service/controller.go CreateVolume.
		{ID: "PF-C1", Method: http.MethodPost, Path: `^/api/types/Volume/instances$`, Do: func(_ context.Context, t *testing.T) {
			resp, err := c.CreateVolume(&siotypes.VolumeParam{Name: volName, VolumeSizeInKb: "8388608", VolumeType: "ThinProvisioned"}, powerflex.PoolName, "")
			require.NoError(t, err)
			volID = resp.ID
		}},
		{ID: "PF-C2", Method: http.MethodPost, Path: `^/api/types/Volume/instances$`, Status: conformance.AnyStatus, Do: func(_ context.Context, t *testing.T) {
			_, err := c.CreateVolume(&siotypes.VolumeParam{Name: volName, VolumeSizeInKb: "8388608", VolumeType: "ThinProvisioned"}, powerflex.PoolName, "")
			require.Error(t, err)
			assert.True(t, strings.EqualFold(err.Error(), "Volume name already in use. Please use a different name."),
				"the driver matches the whole text (sioGatewayVolumeNameInUse), then FindVolumeID; got %q", err.Error())
		}},
		{ID: "PF-C3", Method: http.MethodPost, Path: `^/api/types/Volume/instances/action/queryIdByKey$`, Do: func(_ context.Context, t *testing.T) {
			id, err := c.FindVolumeID(volName)
			require.NoError(t, err)
			assert.Equal(t, volID, id)
		}},
		{ID: "PF-C4", Method: http.MethodGet, Path: `^/api/instances/Volume::[0-9a-f]+$`, Do: func(_ context.Context, t *testing.T) {
			vols, err := c.GetVolume("", volID, "", "", false) // getVolByID
			require.NoError(t, err)
			require.Len(t, vols, 1)
			assert.Empty(t, vols[0].MappedSdcInfo)
		}},
		// Publish, block: service/controller.go ControllerPublishVolume, publisher.go SDCPublisher.Publish.
		{ID: "PF-P1", Method: http.MethodGet, Path: `^/api/instances/System::[0-9a-f]+/relationships/Sdc$`, Do: func(_ context.Context, t *testing.T) {
			sdc, err := sys.FindSdc("SdcGUID", strings.ToUpper(n1.SDCGUID)) // getSDCID
			require.NoError(t, err)
			sdcID = sdc.Sdc.ID
		}},
		{ID: "PF-P2", Method: http.MethodPost, Path: `^/api/instances/Volume::[0-9a-f]+/action/addMappedSdc$`, Do: func(_ context.Context, t *testing.T) {
			tv := sio.NewVolume(c)
			tv.Volume = &siotypes.Volume{ID: volID}
			require.NoError(t, tv.MapVolumeSdc(&siotypes.MapVolumeSdcParam{SdcID: sdcID, AllowMultipleMappings: "FALSE"}))
			vols, err := c.GetVolume("", volID, "", "", false)
			require.NoError(t, err)
			require.Len(t, vols[0].MappedSdcInfo, 1, "publish reads mappedSdcInfo to refuse a second node")
			assert.Equal(t, sdcID, vols[0].MappedSdcInfo[0].SdcID)
		}},
		// Unpublish, block: service/controller.go ControllerUnpublishVolume.
		{ID: "PF-U1", Method: http.MethodPost, Path: `^/api/instances/Volume::[0-9a-f]+/action/removeMappedSdc$`, Do: func(_ context.Context, t *testing.T) {
			vols, err := c.GetVolume("", volID, "", "", false)
			require.NoError(t, err)
			tv := sio.NewVolume(c)
			tv.Volume = vols[0]
			require.NoError(t, tv.UnmapVolumeSdc(&siotypes.UnmapVolumeSdcParam{SdcID: sdcID}))
		}},
		{ID: "PF-U2", Method: http.MethodGet, Path: `^/api/instances/Volume::ffffffffffffffff$`, Status: conformance.AnyStatus, Do: func(_ context.Context, t *testing.T) {
			_, err := c.GetVolume("", "ffffffffffffffff", "", "", false)
			require.Error(t, err)
			assert.True(t, strings.EqualFold(err.Error(), "Could not find the volume"),
				"a deleted volume: the driver matches the whole text (sioGatewayVolumeNotFound) and succeeds; got %q", err.Error())
		}},
		// Create, NFS: service/controller.go CreateVolume (NFS branch).
		{ID: "PF-N1", Method: http.MethodGet, Path: `^/rest/v1/file-systems`, Do: func(_ context.Context, t *testing.T) {
			pools, err := c.GetStoragePool("")
			require.NoError(t, err)
			pool = pools[0]
			nas, err := sys.GetNASByIDName("", powerflex.NASName)
			require.NoError(t, err)
			nasID = nas.ID
			fs, err := sys.GetFileSystemByIDName("", fsName)
			require.Error(t, err)
			assert.Nil(t, fs, "no file system of that name: the driver creates it")
		}},
		{ID: "PF-N2", Method: http.MethodPost, Path: `^/rest/v1/file-systems$`, Status: http.StatusCreated, Do: func(_ context.Context, t *testing.T) {
			resp, err := sys.CreateFileSystem(&siotypes.FsCreate{Name: fsName, SizeTotal: 8 << 30, StoragePoolID: pool.ID, NasServerID: nasID})
			require.NoError(t, err)
			fsID = resp.ID
		}},
		// Publish, NFS: service/service.go exportFilesystem.
		{ID: "PF-F1", Method: http.MethodGet, Path: `^/rest/v1/nfs-exports`, Do: func(_ context.Context, t *testing.T) {
			xs, err := c.GetNFSExport()
			require.NoError(t, err)
			for _, x := range xs {
				assert.NotEqual(t, fsID, x.FileSystemID, "no export of the new file system yet")
			}
		}},
		{ID: "PF-F2", Method: http.MethodPost, Path: `^/rest/v1/nfs-exports$`, Status: http.StatusCreated, Do: func(_ context.Context, t *testing.T) {
			resp, err := c.CreateNFSExport(&siotypes.NFSExportCreate{Name: "csishare-" + fsName, FileSystemID: fsID, Path: "/" + fsName})
			require.NoError(t, err)
			exportID = resp.ID
		}},
		{ID: "PF-F3", Method: http.MethodPatch, Path: `^/rest/v1/nfs-exports/[^/]+$`, Status: http.StatusNoContent, Do: func(_ context.Context, t *testing.T) {
			require.NoError(t, c.ModifyNFSExport(&siotypes.NFSExportModify{AddReadWriteRootHosts: []string{n1.IP + "/255.255.255.255"}}, exportID))
			x, err := c.GetNFSExportByIDName(exportID, "")
			require.NoError(t, err)
			assert.Equal(t, []string{n1.IP + "/255.255.255.255"}, x.ReadWriteRootHosts)
		}},
		// Unpublish, NFS: service/service.go unexportFilesystem.
		{ID: "PF-G1", Method: http.MethodPatch, Path: `^/rest/v1/nfs-exports/[^/]+$`, Status: http.StatusNoContent, Do: func(_ context.Context, t *testing.T) {
			require.NoError(t, c.ModifyNFSExport(&siotypes.NFSExportModify{AddReadOnlyHosts: []string{"10.1.1.1/255.255.255.255"}}, exportID))
			// The driver asks to remove the node from a non-empty
			// read-only list whether or not it holds it; any error is
			// NotFound to the driver. The simulator skips the absent entry.
			require.NoError(t, c.ModifyNFSExport(&siotypes.NFSExportModify{
				RemoveReadOnlyHosts:      []string{n1.IP + "/255.255.255.255"},
				RemoveReadWriteRootHosts: []string{n1.IP + "/255.255.255.255"}}, exportID))
			x, err := c.GetNFSExportByIDName(exportID, "")
			require.NoError(t, err)
			assert.Empty(t, x.ReadWriteRootHosts)
			assert.Equal(t, []string{"10.1.1.1/255.255.255.255"}, x.ReadOnlyHosts)
		}},
	}
	conformance.Run(t, b.srv, rows)
}
