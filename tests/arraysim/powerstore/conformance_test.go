package powerstore_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/dell/gopowerstore"
	"github.com/dell/gopowerstore/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/tests/arraysim/conformance"
	"github.com/fenced-project/fenced/tests/arraysim/powerstore"
)

// reservedSize is what csi-powerstore adds to an NFS volume's size when it
// creates the file system (pkg/controller/creator.go ReservedSize).
const reservedSize = 1610612736

// apiError returns err as gopowerstore's APIError, as the driver's
// err.(gopowerstore.APIError) assertions read it.
func apiError(t *testing.T, err error) *gopowerstore.APIError {
	t.Helper()
	require.Error(t, err)
	ae, ok := err.(gopowerstore.APIError) //nolint:errorlint // the test reads the error as csi-powerstore does: a type assertion, which a wrapped error would fail

	require.True(t, ok, "the driver asserts gopowerstore.APIError; got %T: %v", err, err)
	return &ae
}

// TestConformancePowerStore replays the rows PS-* of CONFORMANCE.md: the
// requests csi-powerstore's controller and node plugin send for create,
// node registration, publish and unpublish (block and NFS), through the
// gopowerstore calls the driver makes, read as the driver reads them.
func TestConformancePowerStore(t *testing.T) {
	for _, mode := range []string{powerstore.NFSRemoveAbsentRefuse, powerstore.NFSRemoveAbsentIgnore} {
		t.Run(mode, func(t *testing.T) {
			t.Setenv(powerstore.EnvNFSRemoveAbsent, mode)
			conformancePowerStore(t, mode)
		})
	}
}

func conformancePowerStore(t *testing.T, mode string) {
	e := newEnv(t)
	c := e.client
	n1, n3 := e.nodes[0], e.nodes[2]
	node1 := "csi-node-" + n1.MachineID + "-" + n1.IP
	node3 := "csi-node-" + n3.MachineID + "-" + n3.IP
	const volName, fsName = "csivol-conform", "csivol-conform-nfs"
	const size = int64(8 << 30)
	var volID, fsID, nasID, host3ID, exportID, ifaceID string
	visibility := func() { // the header the driver sets around metadata creates
		h := api.NewSafeHeader().GetHeader()
		h.Add("DELL-VISIBILITY", "internal")
		c.SetCustomHTTPHeaders(h)
	}
	rows := []conformance.Row{
		// Create, block: controller.go CreateVolume, creator.go SCSICreator.
		{ID: "PS-C1", Method: http.MethodGet, Path: `^/api/rest/software_installed\?`, Do: func(ctx context.Context, t *testing.T) {
			v, err := c.GetSoftwareMajorMinorVersion(ctx)
			require.NoError(t, err)
			assert.GreaterOrEqual(t, v, float32(3.0), "identifiers.IsK8sMetadataSupported: >= 3.0 sends metadata")
		}},
		{ID: "PS-C2", Method: http.MethodGet, Path: `^/api/rest/volume\?.*name=eq\.` + volName, Do: func(ctx context.Context, t *testing.T) {
			_, err := c.GetVolumeByName(ctx, volName)
			ae := apiError(t, err)
			assert.True(t, ae.NotFound(), "no volume of that name: NotFound, the driver creates it")
		}},
		{ID: "PS-C3", Method: http.MethodPost, Path: `^/api/rest/volume$`, Status: http.StatusCreated, Do: func(ctx context.Context, t *testing.T) {
			visibility()
			defer c.SetCustomHTTPHeaders(nil)
			name, sz := volName, size
			md := map[string]string{"k8s_pvol_name": volName, "k8s_claim_name": "data-0", "k8s_claim_namespace": "db"}
			resp, err := c.CreateVolume(ctx, &gopowerstore.VolumeCreate{Name: &name, Size: &sz, Metadata: &md})
			require.NoError(t, err)
			require.NotEmpty(t, resp.ID)
			volID = resp.ID
		}},
		{ID: "PS-C4", Method: http.MethodGet, Path: `^/api/rest/volume/[0-9a-f-]+\?`, Do: func(ctx context.Context, t *testing.T) {
			v, err := c.GetVolume(ctx, volID)
			require.NoError(t, err)
			assert.NotEmpty(t, v.ApplianceID, "GetServiceTag reads appliance_id")
		}},
		{ID: "PS-C5", Method: http.MethodGet, Path: `^/api/rest/appliance/A1\?`, Do: func(ctx context.Context, t *testing.T) {
			a, err := c.GetAppliance(ctx, "A1")
			require.NoError(t, err)
			assert.NotEmpty(t, a.ServiceTag)
		}},
		// Create, NFS: controller.go CreateVolume, creator.go NfsCreator.
		{ID: "PS-N1", Method: http.MethodGet, Path: `^/api/rest/job\?.*resource_name=eq\.` + fsName, Do: func(ctx context.Context, t *testing.T) {
			jobs, err := c.GetInProgressJobsByFsName(ctx, fsName)
			require.NoError(t, err)
			assert.Empty(t, jobs, "no job in progress: the driver goes on")
		}},
		{ID: "PS-N2", Method: http.MethodGet, Path: `^/api/rest/file_system\?.*name=eq\.` + fsName, Do: func(ctx context.Context, t *testing.T) {
			_, err := c.GetFSByName(ctx, fsName)
			assert.True(t, apiError(t, err).NotFound())
		}},
		{ID: "PS-N3", Method: http.MethodGet, Path: `^/api/rest/nas_server\?.*name=eq\.`, Do: func(ctx context.Context, t *testing.T) {
			nas, err := c.GetNASByName(ctx, powerstore.DefaultNASName)
			require.NoError(t, err)
			nasID = nas.ID
		}},
		{ID: "PS-N4", Method: http.MethodPost, Path: `^/api/rest/file_system$`, Status: http.StatusCreated, Do: func(ctx context.Context, t *testing.T) {
			resp, err := c.CreateFS(ctx, &gopowerstore.FsCreate{Name: fsName, NASServerID: nasID, Size: size + reservedSize})
			require.NoError(t, err)
			fsID = resp.ID
		}},
		{ID: "PS-N5", Method: http.MethodGet, Path: `^/api/rest/file_system\?.*name=eq\.` + fsName, Do: func(ctx context.Context, t *testing.T) {
			fs, err := c.GetFSByName(ctx, fsName) // a repeated CreateVolume
			require.NoError(t, err)
			assert.GreaterOrEqual(t, fs.SizeTotal, size)
			assert.Equal(t, nasID, fs.NasServerID)
		}},
		{ID: "PS-N6", Method: http.MethodGet, Path: `^/api/rest/nas_server/[0-9a-f-]+\?`, Do: func(ctx context.Context, t *testing.T) {
			nas, err := c.GetNAS(ctx, nasID)
			require.NoError(t, err)
			assert.Contains(t, nas.CurrentNodeID, "-node-", "GetServiceTag cuts current_node_id at -node-")
			assert.NotEmpty(t, nas.CurrentPreferredIPv4InterfaceID)
			ifaceID = nas.CurrentPreferredIPv4InterfaceID
		}},
		{ID: "PS-N7", Method: http.MethodGet, Path: `^/api/rest/appliance\?.*name=eq\.`, Do: func(ctx context.Context, t *testing.T) {
			nas, err := c.GetNAS(ctx, nasID)
			require.NoError(t, err)
			a, err := c.GetApplianceByName(ctx, strings.Split(nas.CurrentNodeID, "-node-")[0])
			require.NoError(t, err, "exactly one appliance of that name")
			assert.NotEmpty(t, a.ServiceTag)
		}},
		// Node registration: node.go setupHost, registerHost, modifyHostName.
		{ID: "PS-R1", Method: http.MethodGet, Path: `^/api/rest/host\?`, Do: func(ctx context.Context, t *testing.T) {
			hosts, err := c.GetHosts(ctx)
			require.NoError(t, err)
			for _, h := range hosts {
				for _, in := range h.Initiators {
					assert.NotEqual(t, n3.IQN, in.PortName, "worker-3 has no host yet")
				}
			}
		}},
		{ID: "PS-R2", Method: http.MethodPost, Path: `^/api/rest/host$`, Status: http.StatusCreated, Do: func(ctx context.Context, t *testing.T) {
			visibility()
			defer c.SetCustomHTTPHeaders(nil)
			os, pt, desc := gopowerstore.OSTypeEnumLinux, gopowerstore.InitiatorProtocolTypeEnumISCSI, "k8s node: "+n3.Name
			iqn := n3.IQN
			md := map[string]string{"k8s_node_name": n3.Name}
			resp, err := c.CreateHost(ctx, &gopowerstore.HostCreate{Name: &node3, OsType: &os, Description: &desc,
				Initiators:       &[]gopowerstore.InitiatorCreateModify{{PortName: &iqn, PortType: &pt}},
				HostConnectivity: gopowerstore.HostConnectivityEnumLocalOnly, Metadata: &md})
			require.NoError(t, err)
			host3ID = resp.ID
		}},
		{ID: "PS-R3", Method: http.MethodPost, Path: `^/api/rest/host$`, Status: http.StatusBadRequest, Do: func(ctx context.Context, t *testing.T) {
			// A node back with a new IP registers a new host with the same
			// initiators: refused, with the text registerHost matches.
			os, pt, iqn, name := gopowerstore.OSTypeEnumLinux, gopowerstore.InitiatorProtocolTypeEnumISCSI, n3.IQN, node3+"x"
			_, err := c.CreateHost(ctx, &gopowerstore.HostCreate{Name: &name, OsType: &os,
				Initiators: &[]gopowerstore.InitiatorCreateModify{{PortName: &iqn, PortType: &pt}}})
			assert.Contains(t, apiError(t, err).Error(), "already registered with another host")
		}},
		{ID: "PS-R4", Method: http.MethodPatch, Path: `^/api/rest/host/[0-9a-f-]+$`, Status: http.StatusNoContent, Do: func(ctx context.Context, t *testing.T) {
			// setupHost renames a host holding the node's initiators
			// whenever the node ID differs from the host's ID, i.e. always.
			name := node3
			_, err := c.ModifyHost(ctx, &gopowerstore.HostModify{Name: &name}, host3ID)
			require.NoError(t, err)
		}},
		{ID: "PS-R5", Method: http.MethodPatch, Path: `^/api/rest/host/[0-9a-f-]+$`, Status: http.StatusNoContent, Do: func(ctx context.Context, t *testing.T) {
			// EnableCHAP: modify_initiators with user and secret.
			iqn, user, secret := n3.IQN, "admin", "s3cretS3cret"
			_, err := c.ModifyHost(ctx, &gopowerstore.HostModify{ModifyInitiators: &[]gopowerstore.UpdateInitiatorInHost{
				{PortName: &iqn, ChapSingleUsername: &user, ChapSinglePassword: &secret}}}, host3ID)
			require.NoError(t, err)
		}},
		// Publish, block: publisher.go SCSIPublisher.Publish.
		{ID: "PS-P1", Method: http.MethodGet, Path: `^/api/rest/volume/[0-9a-f-]+\?`, Do: func(ctx context.Context, t *testing.T) {
			_, err := c.GetVolume(ctx, volID)
			require.NoError(t, err)
		}},
		{ID: "PS-P2", Method: http.MethodGet, Path: `^/api/rest/host\?.*name=eq\.` + node1, Do: func(ctx context.Context, t *testing.T) {
			h, err := c.GetHostByName(ctx, node1)
			require.NoError(t, err)
			assert.Equal(t, node1, h.Name)
		}},
		{ID: "PS-P3", Method: http.MethodGet, Path: `^/api/rest/host\?.*name=eq\.csi-node-` + n1.MachineID + `(&|$)`, Do: func(ctx context.Context, t *testing.T) {
			// The fall-back lookup without "-<IP>" of a node ID no host has.
			_, err := c.GetHostByName(ctx, node1+"0")
			assert.True(t, apiError(t, err).HostIsNotExist())
			_, err = c.GetHostByName(ctx, "csi-node-"+n1.MachineID)
			assert.True(t, apiError(t, err).HostIsNotExist())
		}},
		{ID: "PS-P4", Method: http.MethodGet, Path: `^/api/rest/host_volume_mapping\?.*volume_id=eq\.`, Do: func(ctx context.Context, t *testing.T) {
			m, err := c.GetHostVolumeMappingByVolumeID(ctx, volID)
			require.NoError(t, err)
			assert.Empty(t, m)
		}},
		{ID: "PS-P5", Method: http.MethodPost, Path: `^/api/rest/host/[0-9a-f-]+/attach$`, Status: http.StatusNoContent, Do: func(ctx context.Context, t *testing.T) {
			h, err := c.GetHostByName(ctx, node1)
			require.NoError(t, err)
			_, err = c.AttachVolumeToHost(ctx, h.ID, &gopowerstore.HostVolumeAttach{VolumeID: &volID})
			require.NoError(t, err)
		}},
		{ID: "PS-P6", Method: http.MethodGet, Path: `^/api/rest/host_volume_mapping\?.*volume_id=eq\.`, Do: func(ctx context.Context, t *testing.T) {
			h, err := c.GetHostByName(ctx, node1)
			require.NoError(t, err)
			m, err := c.GetHostVolumeMappingByVolumeID(ctx, volID)
			require.NoError(t, err)
			require.Len(t, m, 1)
			assert.Equal(t, h.ID, m[0].HostID)
			assert.NotZero(t, m[0].LogicalUnitNumber, "the LUN goes into the publish context")
		}},
		// Unpublish, block: controller.go unpublishVolume, base.go detachVolumeFromHost.
		{ID: "PS-U1", Method: http.MethodPost, Path: `^/api/rest/host/[0-9a-f-]+/detach$`, Status: http.StatusNoContent, Do: func(ctx context.Context, t *testing.T) {
			h, err := c.GetHostByName(ctx, node1)
			require.NoError(t, err)
			_, err = c.DetachVolumeFromHost(ctx, h.ID, &gopowerstore.HostVolumeDetach{VolumeID: &volID})
			require.NoError(t, err)
		}},
		{ID: "PS-U2", Method: http.MethodPost, Path: `^/api/rest/host/[0-9a-f-]+/detach$`, Status: http.StatusBadRequest, Do: func(ctx context.Context, t *testing.T) {
			h, err := c.GetHostByName(ctx, node1)
			require.NoError(t, err)
			_, err = c.DetachVolumeFromHost(ctx, h.ID, &gopowerstore.HostVolumeDetach{VolumeID: &volID})
			ae := apiError(t, err)
			assert.Contains(t, ae.Message, "Host is not attached to volume",
				"detachVolumeFromHost takes a repeated detach as done only with this text; any other 400 is NotFound")
		}},
		{ID: "PS-U3", Method: http.MethodGet, Path: `^/api/rest/volume/0a6e2b34-5c1d-4f7e-9a8b-000000000001\?`, Status: http.StatusNotFound, Do: func(ctx context.Context, t *testing.T) {
			_, err := c.GetVolume(ctx, "0a6e2b34-5c1d-4f7e-9a8b-000000000001")
			assert.True(t, apiError(t, err).NotFound(), "an unpublish of a deleted volume succeeds")
		}},
		// Publish, NFS: publisher.go NfsPublisher.Publish.
		{ID: "PS-F1", Method: http.MethodGet, Path: `^/api/rest/file_system/[0-9a-f-]+\?`, Do: func(ctx context.Context, t *testing.T) {
			fs, err := c.GetFS(ctx, fsID)
			require.NoError(t, err)
			assert.Equal(t, fsName, fs.Name)
		}},
		{ID: "PS-F2", Method: http.MethodGet, Path: `^/api/rest/nfs_export\?.*file_system_id=eq\.`, Do: func(ctx context.Context, t *testing.T) {
			_, err := c.GetNFSExportByFileSystemID(ctx, fsID)
			assert.True(t, apiError(t, err).NotFound(), "no export yet: the driver creates it")
		}},
		{ID: "PS-F3", Method: http.MethodPost, Path: `^/api/rest/nfs_export$`, Status: http.StatusCreated, Do: func(ctx context.Context, t *testing.T) {
			resp, err := c.CreateNFSExport(ctx, &gopowerstore.NFSExportCreate{Name: fsName, FileSystemID: fsID, Path: "/" + fsName})
			require.NoError(t, err)
			exportID = resp.ID
		}},
		{ID: "PS-F4", Method: http.MethodPatch, Path: `^/api/rest/nfs_export/[0-9a-f-]+$`, Status: http.StatusNoContent, Do: func(ctx context.Context, t *testing.T) {
			_, err := c.ModifyNFSExport(ctx, &gopowerstore.NFSExportModify{AddRWRootHosts: []string{n1.IP}}, exportID)
			require.NoError(t, err)
			x, err := c.GetNFSExportByFileSystemID(ctx, fsID)
			require.NoError(t, err)
			assert.Equal(t, []string{n1.IP + "/255.255.255.255"}, x.RWRootHosts, "the array lists the IP with its netmask")
		}},
		{ID: "PS-F5", Method: http.MethodPatch, Path: `^/api/rest/nfs_export/[0-9a-f-]+$`, Status: http.StatusBadRequest, Do: func(ctx context.Context, t *testing.T) {
			_, err := c.ModifyNFSExport(ctx, &gopowerstore.NFSExportModify{AddRWRootHosts: []string{n1.IP}}, exportID)
			assert.True(t, apiError(t, err).HostAlreadyPresentInNFSExport(), "a repeated add is read as already present")
		}},
		{ID: "PS-F6", Method: http.MethodGet, Path: `^/api/rest/file_interface/[0-9a-f-]+\?`, Do: func(ctx context.Context, t *testing.T) {
			fi, err := c.GetFileInterface(ctx, ifaceID)
			require.NoError(t, err)
			assert.NotEmpty(t, fi.IPAddress, "the export path in the publish context is <ip_address>:/<export name>")
		}},
		// Unpublish, NFS: controller.go unpublishVolume (case "nfs").
		{ID: "PS-G1", Method: http.MethodPatch, Path: `^/api/rest/nfs_export/[0-9a-f-]+$`, Status: http.StatusNoContent, Do: func(ctx context.Context, t *testing.T) {
			_, err := c.ModifyNFSExport(ctx, &gopowerstore.NFSExportModify{RemoveRWRootHosts: []string{n1.IP + "/255.255.255.255"}}, exportID)
			require.NoError(t, err)
		}},
		{ID: "PS-G2", Method: http.MethodPatch, Path: `^/api/rest/nfs_export/[0-9a-f-]+$`, Do: func(ctx context.Context, t *testing.T) {
			// The driver asks to remove the node from a non-empty
			// read-only list whether or not the list holds it. Unsourced:
			// refused whole (400, read as already removed) or skipped.
			require.NoError(t, e.sim.SetExportHosts(fsName, "read_only_hosts", []string{"10.1.1.1"}))
			_, err := c.ModifyNFSExport(ctx, &gopowerstore.NFSExportModify{AddRWRootHosts: []string{n1.IP}}, exportID)
			require.NoError(t, err)
			_, err = c.ModifyNFSExport(ctx, &gopowerstore.NFSExportModify{
				RemoveROHosts: []string{n1.IP + "/255.255.255.255"}, RemoveRWRootHosts: []string{n1.IP + "/255.255.255.255"}}, exportID)
			x, xerr := c.GetNFSExportByFileSystemID(ctx, fsID)
			require.NoError(t, xerr)
			if mode == powerstore.NFSRemoveAbsentRefuse {
				assert.True(t, apiError(t, err).HostAlreadyRemovedFromNFSExport(), "the driver reads the 400 as already removed")
				assert.Equal(t, []string{n1.IP + "/255.255.255.255"}, x.RWRootHosts, "nothing of the PATCH applied")
			} else {
				require.NoError(t, err)
				assert.Empty(t, x.RWRootHosts)
			}
		}},
	}
	if mode == powerstore.NFSRemoveAbsentIgnore {
		// G2's status differs by mode; the row checks it itself.
		rows[len(rows)-1].Status = http.StatusNoContent
	} else {
		rows[len(rows)-1].Status = http.StatusBadRequest
	}
	conformance.Run(t, e.srv, rows)
}
