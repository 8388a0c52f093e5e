package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/fenced-project/fenced/tests/auditcheck"
	"github.com/fenced-project/fenced/tests/invariants"
	"github.com/fenced-project/fenced/tests/testbed"
)

// TestDottedNodeNames: the nodes are named by their FQDN
// (worker-N.dc1.example.com), each with a pod of a StatefulSet on every
// family's volumes, published by the emulated drivers with the node IDs
// the real drivers build from such names (csi-powermax and csi-unity cut
// the name at its first dot). One node powers off: fenced finds it on
// every array, fences it, reads every array back and its five pods run
// again elsewhere, with no invariant broken.
func TestDottedNodeNames(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts a control plane and three fenced processes")
	}
	const domain = "dc1.example.com"
	// One node more than there are families: each family's StatefulSet
	// leaves exactly one node free (for its replacement), so at least one
	// node runs a pod of every family, wherever the scheduler spreads them.
	h := Start(t, Options{Timing: fastTiming(), NodeLeaseDurationSeconds: 4, NodeDomain: domain, Nodes: len(testbed.Drivers()) + 1})
	for name := range h.Nodes {
		require.True(t, strings.HasSuffix(name, "."+domain), "node %s", name)
	}
	h.WaitLeader(waitLeader)

	byFamily := map[string]map[string]corev1.Pod{}
	for _, d := range testbed.Drivers() {
		name := strings.Split(d, ".")[0]
		byFamily[d] = deployWith(t, h, testbed.StatefulSetSpec{Namespace: "db", Name: name, Driver: d,
			Replicas: int32(len(h.NodesOf(ClusterName)) - 1), AntiAffinity: true})
	}
	// A node with a pod of every family.
	victim := ""
	for _, node := range withPods(byFamily[testbed.DriverPowerFlex], len(byFamily[testbed.DriverPowerFlex])) {
		all := true
		for _, pods := range byFamily {
			_, ok := pods[node]
			all = all && ok
		}
		if all {
			victim = node
			break
		}
	}
	require.NotEmpty(t, victim, "a node runs a pod of every family")
	ids := h.Nodes[victim].Spec.CSINodeIDs()
	short, _, _ := strings.Cut(victim, ".")
	require.Equal(t, short, ids[testbed.DriverPowerMax], "csi-powermax's node ID")
	require.Equal(t, short+","+victim, ids[testbed.DriverUnity], "csi-unity's node ID")

	h.KillNode(victim)
	f := h.WaitFence(victim, waitFence, phasesEvicted...)
	requireVerified(t, h, f)
	for d, pods := range byFamily {
		t.Run(fmt.Sprintf("replaced %s", d), func(t *testing.T) { waitReplaced(t, h, pods[victim]) })
	}
	rep := h.Check()
	assert.Positive(t, rep.Checked[invariants.RuleFenceBeforeDelete])

	// The outside checker, from the arrays' own audit files and the API
	// server's audit log only, finds the node cut on all five arrays before
	// each of its pods was deleted.
	var users []string
	for u := range h.Users {
		users = append(users, u)
	}
	out, err := auditcheck.CheckFiles(filepath.Join(h.Dir, ArraysDir), h.CP.AuditLogPath, auditcheck.Options{FencedUsers: users})
	require.NoError(t, err)
	t.Logf("arrays' record: %s", out)
	require.True(t, out.OK(), "%s", out)
	require.Len(t, out.Cuts, len(h.Arrays)*out.Deletions, "%s", out)
	assert.GreaterOrEqual(t, out.Deletions, len(byFamily), "one deletion per family's pod at least")
}
