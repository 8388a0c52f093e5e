package stonith

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/cluster/ledger"
)

// TestWithUnattachedNamesNodesWithoutTheVolume: the PowerFlex NFS
// volumes of a node's footprint carry the identity keys of the cluster's
// other nodes without a VolumeAttachment to them (what the plan needs to
// find an export csi-vxflexos with interfaceNames filled with every
// node); nodes attached to the volume, the node itself and block volumes
// get none.
func TestWithUnattachedNamesNodesWithoutTheVolume(t *testing.T) {
	w := newWorld(t)
	for node, ip := range map[string]string{"n2": "10.0.0.2", "n3": "10.0.0.3"} {
		w.group.must(t, &ledger.SetIdentities{Meta: w.group.meta(), Cluster: "c1", Node: node, BootID: "b-" + node,
			Identities: map[string]arrayclients.Identity{"a1": {Array: "a1", Family: arrayclients.PowerFlex, Node: node,
				ObjectID: "sdc-" + node, Keys: []string{"GUID-" + node, ip}}}})
	}
	// n3 holds the RWX file system too; n2 holds nothing of it.
	w.fp.add("n3", arrayclients.KubeVolume{PV: "pv-files", Driver: arrayclients.DriverPowerFlex, Handle: "a1/fs1", Attached: true, MultiNode: true})
	vols := map[string][]arrayclients.VolumeRef{"a1": {
		{Volume: "pv-files", Object: "fs1", Protocol: arrayclients.ProtocolNFS, Attached: true, MultiNode: true},
		{Volume: "pv-a1", Object: "pva1", Protocol: arrayclients.ProtocolBlock, Attached: true},
	}}
	cl := w.ctrl.clusters["c1"]
	w.ctrl.withUnattached(cl, "n1", vols)
	require.Len(t, vols["a1"], 2)
	assert.Equal(t, map[string]string{"GUID-n2": "n2", "10.0.0.2": "n2"}, vols["a1"][0].Unattached)
	assert.Nil(t, vols["a1"][1].Unattached, "a block volume needs none")

	// Footprints not readable: nothing is set.
	vols["a1"][0].Unattached = nil
	w.fp.broken = assert.AnError
	w.ctrl.withUnattached(cl, "n1", vols)
	assert.Nil(t, vols["a1"][0].Unattached)
}
