package e2e

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/tests/arraysim/powerflex"
	"github.com/fenced-project/fenced/tests/invariants"
	"github.com/fenced-project/fenced/tests/testbed"
)

// pflexNVMeNodeIDRE is csi-vxflexos's NVMe/TCP node ID: "<node IP>-<hex
// sha256 of the Node UID>" cut to 31 characters.
var pflexNVMeNodeIDRE = regexp.MustCompile(`^127\.[0-9.]+-[0-9a-f]+$`)

// powerflexNVMeNode (invariants 1 and 5 for PowerFlex NVMe/TCP): two
// nodes attach PowerFlex volumes over NVMe/TCP, so their csi-vxflexos node
// ID is the name of an NVMe host on the array, not an SDC GUID. One of them
// dies with a StatefulSet pod: fenced unmaps its volumes from its NVMe
// host, reads the array back and evicts the pod, which moves to the other
// NVMe node (the emulated driver maps the volume to that host). The dead
// node reboots and is unfenced: its NVMe host gets back the volumes no
// other host took, never the moved one.
func powerflexNVMeNode(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts a control plane and three fenced processes")
	}
	h := Start(t, Options{Timing: fastTiming(), NodeLeaseDurationSeconds: 4, Nodes: 4, NVMeTCPNodes: 2})
	h.WaitLeader(waitLeader)
	nodes := h.NodesOf(ClusterName)
	victim, spare := nodes[0], nodes[1]
	require.True(t, h.Nodes[victim].Spec.NVMeTCP && h.Nodes[spare].Spec.NVMeTCP)
	victimID := csiNodeID(t, h, victim, testbed.DriverPowerFlex)
	require.Len(t, victimID, 31)
	require.Regexp(t, pflexNVMeNodeIDRE, victimID)
	require.True(t, strings.HasPrefix(victimID, h.Nodes[victim].Spec.IP+"-"))
	sim, ok := h.Arrays["pflex-1"].Server.Family().(*powerflex.Sim)
	require.True(t, ok)
	// The node's own volumes on the array (the fixture's per-node ones):
	// Kubernetes knows nothing of them, fenced cuts them with the rest.
	own := sim.MappedVolumes(victimID)
	require.NotEmpty(t, own, "the NVMe host %s has volumes", victimID)

	// One pod on every node but the spare; then the spare is the only
	// node the victim's pod can move to (anti-affinity).
	cordon(t, h, spare, true)
	pods := deployWith(t, h, testbed.StatefulSetSpec{Namespace: "db", Name: "flex", Driver: testbed.DriverPowerFlex,
		Replicas: int32(len(nodes) - 1), AntiAffinity: true})
	cordon(t, h, spare, false)
	old, ok := pods[victim]
	require.True(t, ok, "node %s runs no pod", victim)
	vol := volumeOf(t, h, old)
	requireGivenOnlyTo(t, h, vol, victim)
	require.Contains(t, sim.MappedVolumes(victimID), vol.Object, "published over NVMe to the node's NVMe host")

	h.KillNode(victim)
	f := h.WaitFence(victim, waitFence, phasesEvicted...)
	requireVerified(t, h, f)
	for _, a := range f.Arrays {
		if a.Array == "pflex-1" {
			assert.Contains(t, a.Summary, "from NVMe host "+victimID, "the plan names the NVMe host")
		}
	}
	for _, v := range own {
		require.NotContains(t, sim.MappedVolumes(victimID), v, "cut and read back before the eviction")
	}
	moved := waitMoved(t, h, old)
	require.Equal(t, spare, moved.Spec.NodeName)
	waitVA(t, h, vol, spare)
	requireGivenOnlyTo(t, h, vol, spare)

	h.RebootNode(victim)
	h.WaitFence(victim, waitRecovery, phasesClosed...)
	requireGivenOnlyTo(t, h, vol, spare)
	back := sim.MappedVolumes(victimID)
	assert.NotContains(t, back, vol.Object, "the moved volume is never given back")
	for _, v := range own {
		assert.True(t, slices.Contains(back, v), "volume %s that no other host took is given back", v)
	}
	rep := h.Check()
	require.Positive(t, rep.Checked[invariants.RuleNoRegrant])
	require.Positive(t, rep.Checked[invariants.RuleFootprintCovered])
}
