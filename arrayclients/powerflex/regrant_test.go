package powerflex_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/arrayclients/internal/arraytest"
)

// TestPowerFlexNFSDriverRegrantGap: csi-vxflexos with interfaceNames (the
// emulated driver with the ConfigMap's IPs of worker-1 and worker-3)
// publishes an NFS volume to worker-3 and lists worker-1's IP on the
// export too, though worker-1 has no VolumeAttachment to it. A fence of
// worker-3 would be undone by the next publish to any node: the plan
// names it driver-regrant, with the node the IP belongs to. Once worker-1
// holds the volume too (an RWX volume attached to both), or without the
// Unattached map, the export has a cut.
func TestPowerFlexNFSDriverRegrantGap(t *testing.T) {
	ctx := context.Background()
	e := startPowerFlex(t, pflexNFSFixture, arrayclients.Options{}, 5*time.Second)
	csi := pflexCSI(t, e, map[string]string{"worker-1": "127.0.10.1", "worker-3": "127.0.10.3"})
	h, err := csi.CreateVolume(ctx, "k8s-shared", 3<<30, arrayclients.ProtocolNFS)
	require.NoError(t, err)
	require.NoError(t, csi.ControllerPublish(ctx, h, pflexW3UID, true))
	loc, err := arrayclients.ParseVolumeHandle(arrayclients.PowerFlex, h, "nfs")
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"127.0.10.1/255.255.255.255", "127.0.10.3/255.255.255.255"}, pflexHosts(t, e, loc.Object)["rwRoot"],
		"the driver lists every node of interfaceNames")

	id, err := e.adapter.Resolve(ctx, pflexNFSW3)
	require.NoError(t, err)
	ref := nfsRef("pv-shared", loc.Object, true)
	ref.Unattached = map[string]string{"6A1B0001-0000-4000-8000-000000000001": "worker-1", "127.0.10.1": "worker-1",
		"127.0.10.2": "worker-2"}
	seq := e.srv.LastSeq()
	plan, err := e.adapter.Plan(ctx, id, []arrayclients.VolumeRef{ref})
	require.NoError(t, err)
	assert.Empty(t, arraytest.WritesSince(e.srv, seq), "Plan never writes")
	vc := arraytest.CutOf(t, plan, "pv-shared")
	require.NotNil(t, vc.Gap)
	assert.Equal(t, arrayclients.GapDriverRegrant, vc.Gap.Reason)
	assert.Contains(t, vc.Gap.Detail, "127.0.10.1/255.255.255.255 (node worker-1)")
	assert.Contains(t, vc.Gap.Detail, "interfaceNames")
	assert.NotContains(t, vc.Gap.Detail, "worker-2", "worker-2 is not on the export")
	recorded := arraytest.RoundTrip(t, plan)
	assert.Equal(t, arrayclients.GapDriverRegrant, arraytest.CutOf(t, recorded, "pv-shared").Gap.Reason)
	assert.Nil(t, arraytest.CutOf(t, recorded, "pv-shared").Unattached, "the other nodes' keys are never recorded")

	// worker-1 attached too: nothing of a node without the volume is listed.
	ref.Unattached = map[string]string{"127.0.10.2": "worker-2"}
	plan, err = e.adapter.Plan(ctx, id, []arrayclients.VolumeRef{ref})
	require.NoError(t, err)
	assert.Equal(t, arrayclients.CutNFSExportHosts, arraytest.CutOf(t, plan, "pv-shared").Cut)

	// Not known (nil): no such gap can be told.
	ref.Unattached = nil
	plan, err = e.adapter.Plan(ctx, id, []arrayclients.VolumeRef{ref})
	require.NoError(t, err)
	assert.Equal(t, arrayclients.CutNFSExportHosts, arraytest.CutOf(t, plan, "pv-shared").Cut)
}
