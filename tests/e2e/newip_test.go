package e2e

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/dell/gopowerstore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fenced-project/fenced/tests/arraysim/powerstore"
	"github.com/fenced-project/fenced/tests/csidriver"
	"github.com/fenced-project/fenced/tests/testbed"
)

// TestNVMeAndNewIPNodes: a PowerFlex NVMe/TCP node fenced and unfenced
// (powerflexNVMeNode), and a PowerStore node that comes back
// from its fence with a new IP: its unfence settles without retrying
// forever.
func TestNVMeAndNewIPNodes(t *testing.T) {
	t.Run("powerflex-nvme-tcp", powerflexNVMeNode)
	t.Run("powerstore-new-ip", powerstoreNodeWithNewIP)
}

// powerstoreNodeWithNewIP: a node with a PowerStore volume dies and is
// fenced (its host's initiators removed) and evicted; its pod moves. It
// reboots with a new IP. csi-powerstore's node plugin then reports a new
// node ID, <prefix>-<machine ID>-<new IP>, and registers a new host by that
// name with the node's initiators, which the fence left free
// (pkg/node/node.go NodeGetInfo, setupHost, registerHost; the kubelet
// re-registers the driver in the node's CSINode). fenced's unfence cannot
// give the initiators back to the old host (the array refuses: they are
// registered with another host); it finds them on the node's new host,
// which it has learned as the node's identity, and settles: the fence
// closes, nothing moves between hosts, and fenced wrote to the old host
// only a bounded number of times.
func powerstoreNodeWithNewIP(t *testing.T) {
	h := startFast(t)
	h.WaitLeader(waitLeader)
	pods := deployWith(t, h, testbed.StatefulSetSpec{Namespace: "db", Name: "store", Driver: testbed.DriverPowerStore, Replicas: 1})
	victim := withPods(pods, 1)[0]
	old := pods[victim]
	v := volumeOf(t, h, old)
	requireGivenOnlyTo(t, h, v, victim)
	arr := familyArray(t, h, "powerstore")
	oldID := csiNodeID(t, h, victim, testbed.DriverPowerStore)
	oldHost, ok := psHostNamed(t, arr, oldID)
	require.True(t, ok, "no host %s", oldID)
	require.NotEmpty(t, oldHost.Initiators)

	h.KillNode(victim)
	requireVerified(t, h, h.WaitFence(victim, waitFence, phasesEvicted...))
	moved := waitMoved(t, h, old)
	waitVA(t, h, v, moved.Spec.NodeName)
	oldHost, _ = psHostNamed(t, arr, oldID)
	require.Empty(t, oldHost.Initiators, "the fence removed the host's initiators")

	// The node comes back with a new IP: it boots (the kubelet posts its
	// new boot ID), then csi-powerstore's node plugin starts on it and
	// registers its new host (NodeGetInfo, setupHost), and the kubelet
	// records the plugin's new node ID in the CSINode. Until the node
	// boots, its initiators registered with any host are access the fence
	// must not leave (a held check would cut them).
	h.RebootNode(victim)
	i := strings.LastIndexByte(oldID, '-')
	newID := oldID[:i+1] + "127.0.250." + oldID[strings.LastIndexByte(oldID, '.')+1:]
	require.NotEqual(t, oldID, newID)
	ps, ok := arr.Driver.Controller.(*csidriver.PowerStore)
	require.True(t, ok, "the PowerStore array's emulated controller")
	var inits []gopowerstore.InitiatorCreateModify
	for _, in := range psHostInitiators(t, h, oldHost.ID) {
		pt := gopowerstore.InitiatorProtocolTypeEnum(in.PortType)
		inits = append(inits, gopowerstore.InitiatorCreateModify{PortName: &in.PortName, PortType: &pt})
	}
	require.NotEmpty(t, inits)
	newHostID, err := ps.RegisterNode(h.ctx, newID, inits)
	require.NoError(t, err)
	setCSINodeID(t, h, victim, testbed.DriverPowerStore, newID)
	h.WaitFence(victim, waitRecovery, phasesClosed...)

	oldHost, _ = psHostNamed(t, arr, oldID)
	assert.Empty(t, oldHost.Initiators, "no initiator went back to the old host")
	newHost, ok := psHostNamed(t, arr, newID)
	require.True(t, ok)
	assert.Equal(t, newHostID, newHost.ID)
	assert.Len(t, newHost.Initiators, len(inits), "the node's initiators stay with its new host")
	requireGivenOnlyTo(t, h, v, moved.Spec.NodeName)

	// The unfence did not retry forever: fenced's write requests to the
	// old host (the fence's removal; no add_initiators at all, or a few
	// the array refused before the new host was learned) are few.
	writes := 0
	for _, e := range arr.Server.Audit() {
		if e.Method != "GET" && strings.Contains(e.Path, oldHost.ID) && !strings.HasPrefix(e.Remote, csidriver.AuditTag) {
			writes++
		}
	}
	t.Logf("fenced's write requests to the old host %s: %d", oldHost.ID, writes)
	assert.LessOrEqual(t, writes, 6, "fenced's write requests to the old host %s", oldHost.ID)
	h.Check()
}

// familyArray returns the harness's one array of a family.
func familyArray(t *testing.T, h *Harness, family string) *Array {
	t.Helper()
	for _, a := range sortedArrays(h.Arrays) {
		if a.Family == family {
			return a
		}
	}
	t.Fatalf("no %s array", family)
	return nil
}

// psHostNamed returns the PowerStore host of that name, as the array holds
// it.
func psHostNamed(t *testing.T, a *Array, name string) (powerstore.HostState, bool) {
	t.Helper()
	raw, err := a.State()
	require.NoError(t, err)
	var st powerstore.Snapshot
	require.NoError(t, json.Unmarshal(raw, &st))
	i := slices.IndexFunc(st.Hosts, func(h powerstore.HostState) bool { return h.Name == name })
	if i < 0 {
		return powerstore.HostState{}, false
	}
	return st.Hosts[i], true
}

// psHostInitiators returns the initiators a PowerStore host had when the
// test bed started (the array state of the run's start).
func psHostInitiators(t *testing.T, h *Harness, hostID string) []powerstore.InitiatorState {
	t.Helper()
	a := familyArray(t, h, "powerstore")
	var st powerstore.Snapshot
	require.NoError(t, json.Unmarshal(h.arrayStart[a.Name], &st))
	for _, hs := range st.Hosts {
		if hs.ID == hostID {
			return hs.Initiators
		}
	}
	t.Fatalf("host %s was not on %s at the start", hostID, a.Name)
	return nil
}

// setCSINodeID re-registers a driver in the node's CSINode with a new node
// ID, as the kubelet does when the driver's node plugin reports one: the
// driver's entry leaves the CSINode and comes back (a driver's node ID
// cannot be changed in place).
func setCSINodeID(t *testing.T, h *Harness, node, driver, nodeID string) {
	t.Helper()
	csi := h.CP.Client.StorageV1().CSINodes()
	cn, err := csi.Get(h.ctx, node, metav1.GetOptions{})
	require.NoError(t, err)
	i := slices.IndexFunc(cn.Spec.Drivers, func(d storagev1.CSINodeDriver) bool { return d.Name == driver })
	require.GreaterOrEqual(t, i, 0, "CSINode %s has no driver %s", node, driver)
	entry := cn.Spec.Drivers[i]
	cn.Spec.Drivers = slices.Delete(cn.Spec.Drivers, i, i+1)
	cn, err = csi.Update(h.ctx, cn, metav1.UpdateOptions{})
	require.NoError(t, err)
	entry.NodeID = nodeID
	cn.Spec.Drivers = append(cn.Spec.Drivers, entry)
	_, err = csi.Update(h.ctx, cn, metav1.UpdateOptions{})
	require.NoError(t, err)
}
