package csidriver_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/dell/gopowerstore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/tests/arraysim/powerstore"
	"github.com/fenced-project/fenced/tests/arraysim/simcore"
	"github.com/fenced-project/fenced/tests/csidriver"
)

// TestPowerStoreUnpublishReadsTheDetachAnswerAsTheDriver checks that the
// emulated csi-powerstore reads a failed detach as detachVolumeFromHost
// (pkg/controller/base.go) does, so a detach the real driver would never
// finish fails here too.
func TestPowerStoreUnpublishReadsTheDetachAnswerAsTheDriver(t *testing.T) {
	w := newWorld(t)
	srv := w.servers["pstore-1"]
	e, err := csidriver.ForSim(context.Background(), srv, "", "", t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Close() })
	c := e.Controller
	ctx := context.Background()
	n1 := w.nodeID(0, csidriver.PowerStoreDriver)
	h, err := c.CreateVolume(ctx, "k8s-detach-answers", 8<<30, arrayclients.ProtocolBlock)
	require.NoError(t, err)
	require.NoError(t, c.ControllerPublish(ctx, h, n1, false))
	require.NoError(t, c.ControllerUnpublish(ctx, h, n1))
	// The simulator's own answer to a repeated detach carries the text
	// the driver matches.
	require.NoError(t, c.ControllerUnpublish(ctx, h, n1), "repeated detach: 400 'Host is not attached to volume'")

	detach := `/api/rest/host/[^/]+/detach$`
	for _, tc := range []struct {
		name    string
		status  int
		message string
		want    error // nil: success
	}{
		{"400 with another text is the driver's host-not-found", http.StatusBadRequest, "volume is not mapped", csidriver.ErrNotFound},
		{"404 is host-not-found", http.StatusNotFound, "not found", csidriver.ErrNotFound},
		{"422 is already detached (PR #147)", http.StatusUnprocessableEntity, "anything", nil},
		{"400 with the text is already detached", http.StatusBadRequest, "Host is not attached to volume x", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, err := srv.AddFaultChecked(simcore.Fault{Kind: simcore.FaultError, Method: http.MethodPost, Path: detach,
				Status: tc.status, Message: tc.message})
			require.NoError(t, err)
			t.Cleanup(func() { srv.RemoveFault(id) })
			err = c.ControllerUnpublish(ctx, h, n1)
			if tc.want == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tc.want)
		})
	}
}

// TestPowerStoreNFSUnpublishWithAReadOnlyNeighbour replays the driver's
// NFS unpublish of a node whose export also lists another address in
// read_only_hosts: the driver asks to remove the node from that list too.
// What the array does with that removal has no public source: an array
// that refuses the whole PATCH leaves the node's read-write root entry
// while the driver, reading the 400 as "already removed", reports
// success; one that skips it removes the node.
func TestPowerStoreNFSUnpublishWithAReadOnlyNeighbour(t *testing.T) {
	for _, mode := range []string{powerstore.NFSRemoveAbsentRefuse, powerstore.NFSRemoveAbsentIgnore} {
		t.Run(mode, func(t *testing.T) {
			t.Setenv(powerstore.EnvNFSRemoveAbsent, mode)
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
			ctx := context.Background()
			n1 := w.nodeID(0, csidriver.PowerStoreDriver)
			h, err := c.CreateVolume(ctx, "k8s-ro-neighbour", 8<<30, arrayclients.ProtocolNFS)
			require.NoError(t, err)
			require.NoError(t, c.ControllerPublish(ctx, h, n1, false))
			sim := srv.Family().(interface {
				SetExportHosts(fsName, list string, hosts []string) error
			})
			require.NoError(t, sim.SetExportHosts("k8s-ro-neighbour", "read_only_hosts", []string{"10.1.1.1"}))

			require.NoError(t, c.ControllerUnpublish(ctx, h, n1), "the driver reports success either way")
			hosts := psExportHosts(t, reader, h)
			assert.Equal(t, []string{"10.1.1.1/255.255.255.255"}, hosts["ro"])
			if mode == powerstore.NFSRemoveAbsentRefuse {
				assert.Equal(t, []string{"127.0.10.1/255.255.255.255"}, hosts["rwRoot"],
					"the refused PATCH left the node's read-write root access")
			} else {
				assert.Empty(t, hosts["rwRoot"])
			}
		})
	}
}

// TestUnityRepeatedUnpublishOfASharedLUNFails checks that the emulated
// csi-unity unpublishes as ControllerUnpublishVolume does: it writes the
// LUN's host list without the node's host whenever any host has access,
// and reads any error as codes.Unknown. A repeated unpublish of a LUN
// another host still has writes the unchanged list; Unity answers "nothing
// to modify", so the detach fails, as the real driver's does.
func TestUnityRepeatedUnpublishOfASharedLUNFails(t *testing.T) {
	w := newWorld(t)
	e, err := csidriver.ForSim(context.Background(), w.servers["unity-1"], "", "", t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Close() })
	c := e.Controller
	ctx := context.Background()
	n1, n2 := w.nodeID(0, csidriver.UnityDriver), w.nodeID(1, csidriver.UnityDriver)
	h, err := c.CreateVolume(ctx, "k8s-shared-lun", 8<<30, arrayclients.ProtocolBlock)
	require.NoError(t, err)
	require.NoError(t, c.ControllerPublish(ctx, h, n1, true))
	require.NoError(t, c.ControllerPublish(ctx, h, n2, true))
	require.NoError(t, c.ControllerUnpublish(ctx, h, n1))
	err = c.ControllerUnpublish(ctx, h, n1)
	require.Error(t, err, "the unchanged host list is 'nothing to modify'")
	assert.Contains(t, err.Error(), "0x6701020")
	require.NoError(t, c.ControllerUnpublish(ctx, h, n2))
	require.NoError(t, c.ControllerUnpublish(ctx, h, n2), "no host has access: success without a write")
}
