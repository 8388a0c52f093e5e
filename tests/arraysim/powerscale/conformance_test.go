package powerscale_test

import (
	"context"
	"net/http"
	"slices"
	"testing"

	"github.com/dell/goisilon"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/tests/arraysim/conformance"
	"github.com/fenced-project/fenced/tests/arraysim/powerscale"
)

// TestConformancePowerScale replays the rows SC-* of CONFORMANCE.md: the
// requests csi-isilon (dell/csi-powerscale) sends for create, publish and
// unpublish through the goisilon calls its isiService makes, read as the
// driver reads them.
func TestConformancePowerScale(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c, err := goisilon.NewClientWithArgs(ctx, e.url, true, 2, powerscale.DefaultUsername, "", powerscale.DefaultPassword,
		"/ifs/data/csi", "0777", false, 1)
	require.NoError(t, err)
	n1 := e.nodes[0]
	const volName, zone = "k8s-conform", "System"
	var exportID int
	type lists struct{ Clients, RootClients, ReadOnlyClients, ReadWriteClients []string }
	deref := func(p *[]string) []string {
		if p == nil {
			return nil
		}
		return *p
	}
	clientsOf := func(t *testing.T) lists {
		x, err := c.GetExportByIDWithZone(ctx, exportID, zone)
		require.NoError(t, err)
		return lists{deref(x.Clients), deref(x.RootClients), deref(x.ReadOnlyClients), deref(x.ReadWriteClients)}
	}
	rows := []conformance.Row{
		// Create: service/controller.go CreateVolume, isiService CreateVolumeWithMetaData, ExportVolumeWithZone.
		{ID: "SC-C1", Method: http.MethodPut, Path: `^/namespace/ifs/data/csi/` + volName + `$`, Do: func(ctx context.Context, t *testing.T) {
			_, err := c.CreateVolumeWithIsipathMetaData(ctx, "/ifs/data/csi", volName, "0777",
				map[string]string{"x-csi-pv-name": volName, "x-csi-pv-claimname": "data-0", "x-csi-pv-namespace": "db"})
			require.NoError(t, err)
		}},
		{ID: "SC-C2", Method: http.MethodPost, Path: `^/platform/2/protocols/nfs/exports`, Do: func(ctx context.Context, t *testing.T) {
			id, err := c.ExportVolumeWithZoneAndPath(ctx, "/ifs/data/csi/"+volName, zone, "")
			require.NoError(t, err)
			require.NotZero(t, id)
			exportID = id
		}},
		{ID: "SC-C3", Method: http.MethodPut, Path: `^/platform/2/protocols/nfs/exports/[0-9]+`, Do: func(ctx context.Context, t *testing.T) {
			// The driver adds the dummy client "localhost" to every new export.
			require.NoError(t, c.AddExportClientsByIDWithZone(ctx, exportID, zone, []string{"localhost"}, false))
			assert.Contains(t, clientsOf(t).Clients, "localhost")
		}},
		// Publish: service/controller.go ControllerPublishVolume.
		{ID: "SC-P1", Method: http.MethodGet, Path: `^/platform/1/protocols/nfs/exports`, Do: func(ctx context.Context, t *testing.T) {
			// The per-node volume limit check (GetExportsCountAttachedToNode).
			n, err := c.GetExportsCountAttachedToNode(ctx, n1.IP)
			require.NoError(t, err)
			assert.GreaterOrEqual(t, n, int64(0))
		}},
		{ID: "SC-P2", Method: http.MethodPut, Path: `^/platform/2/protocols/nfs/exports/[0-9]+`, Do: func(ctx context.Context, t *testing.T) {
			// RWO/RWX: clients; the FQDN, the IP when the name does not resolve.
			require.NoError(t, c.AddExportClientsByIDWithZone(ctx, exportID, zone, []string{n1.FQDN}, false))
			assert.Contains(t, clientsOf(t).Clients, n1.FQDN)
		}},
		{ID: "SC-P3", Method: http.MethodPut, Path: `^/platform/2/protocols/nfs/exports/[0-9]+`, Do: func(ctx context.Context, t *testing.T) {
			// RootClientEnabled: root_clients (then clients as well).
			require.NoError(t, c.AddExportRootClientsByIDWithZone(ctx, exportID, zone, []string{n1.FQDN}, false))
			assert.Contains(t, clientsOf(t).RootClients, n1.FQDN)
		}},
		{ID: "SC-P4", Method: http.MethodPut, Path: `^/platform/2/protocols/nfs/exports/[0-9]+`, Do: func(ctx context.Context, t *testing.T) {
			// ReadOnlyMany: read_only_clients.
			require.NoError(t, c.AddExportReadOnlyClientsByIDWithZone(ctx, exportID, zone, []string{e.nodes[1].FQDN}, false))
			assert.Contains(t, clientsOf(t).ReadOnlyClients, e.nodes[1].FQDN)
		}},
		// Unpublish: service/controller.go ControllerUnpublishVolume, isiService RemoveExportClientByIDWithZone.
		{ID: "SC-U1", Method: http.MethodPut, Path: `^/platform/2/protocols/nfs/exports/[0-9]+`, Do: func(ctx context.Context, t *testing.T) {
			require.NoError(t, c.RemoveExportClientsByIDWithZone(ctx, exportID, zone, []string{n1.IP, n1.Name, n1.FQDN}, false))
			x := clientsOf(t)
			for _, l := range [][]string{x.Clients, x.RootClients, x.ReadOnlyClients, x.ReadWriteClients} {
				assert.False(t, slices.Contains(l, n1.FQDN), "the node leaves every list")
			}
			assert.Contains(t, x.Clients, "localhost")
		}},
		{ID: "SC-U2", Method: http.MethodPut, Path: `^/platform/2/protocols/nfs/exports/[0-9]+`, Do: func(ctx context.Context, t *testing.T) {
			// A repeated unpublish writes the lists again and succeeds.
			require.NoError(t, c.RemoveExportClientsByIDWithZone(ctx, exportID, zone, []string{n1.IP, n1.Name, n1.FQDN}, false))
		}},
	}
	conformance.Run(t, e.srv, rows)
}
