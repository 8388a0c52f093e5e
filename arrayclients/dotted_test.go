package arrayclients_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/tests/arraysim/fixture"
)

// dottedNodes are nodes named by their FQDN, as a kubelet on a host whose
// hostname is its FQDN names them.
const dottedNodes = `
nodes:
  - {name: worker-1.dc1.example.com, ip: 127.0.10.1, fqdn: worker-1.dc1.example.com, iqn: "iqn.1994-05.com.redhat:w1", wwpns: ["10000000c9a0d001", "10000000c9a0d101"]}
  - {name: worker-10.dc1.example.com, ip: 127.0.10.10, fqdn: worker-10.dc1.example.com, iqn: "iqn.1994-05.com.redhat:w10", wwpns: ["10000000c9a0d010", "10000000c9a0d110"]}
`

// dottedNode is the node as fenced sees it: its name and the node IDs the
// drivers wrote into its CSINode (the fixture builds them by the drivers'
// rules: csi-powermax and csi-unity cut the name at its first dot).
func dottedNode(t *testing.T, doc, name string) arrayclients.Node {
	t.Helper()
	f, err := fixture.Parse([]byte(doc))
	require.NoError(t, err)
	n, ok := f.Node(name)
	require.True(t, ok, "node %s", name)
	return arrayclients.Node{Cluster: "c1", Name: n.Name, Addresses: []string{n.IP}, FQDN: n.FQDN, CSINodeIDs: n.CSINodeIDs("")}
}

// A dotted node name: the PowerMax adapter finds the host csi-powermax
// made from the node ID (the name up to its first dot), fences it and
// reads it back; the other node's host is untouched.
func TestPowerMaxDottedNodeName(t *testing.T) {
	doc := dottedNodes + `
arrays:
  - name: pmax-1
    family: powermax
    spec:
      symmetrixID: "000197900046"
      username: smc
      password: secret
      generate: {clusterPrefix: TST, protocol: FC, volumesPerNode: 2}
`
	e := startPowerMax(t, doc, 5*time.Second)
	ctx := context.Background()
	node := dottedNode(t, doc, "worker-1.dc1.example.com")
	require.Equal(t, "worker-1", node.CSINodeIDs[arrayclients.DriverPowerMax])
	_, othersBefore := pmaxState(t, e.sim)

	id, v := resolveAndFence(t, e.adapter, node)
	assert.Equal(t, "csi-node-TST-worker-1-FC", id.ObjectName)
	assert.True(t, v.Fenced, "%+v", v)
	_, othersAfter := pmaxState(t, e.sim)
	assert.Equal(t, othersBefore["csi-node-TST-worker-10-FC"], othersAfter["csi-node-TST-worker-10-FC"], "worker-10's host untouched")

	// The whole dotted name as node ID (what the test bed wrote before)
	// gives a host name no PowerMax holds: refused, naming the ID.
	whole := node
	whole.CSINodeIDs = map[string]string{arrayclients.DriverPowerMax: node.Name}
	_, err := e.adapter.Resolve(ctx, whole)
	require.ErrorContains(t, err, `node ID "worker-1.dc1.example.com"`)
	require.ErrorContains(t, err, "not a PowerMax host name")
}

// A dotted node name: the Unity adapter finds the host csi-unity's node
// plugin made, named by the whole node name (the long half of
// "<short>,<long>"), fences and reads it back.
func TestUnityDottedNodeName(t *testing.T) {
	doc := dottedNodes + `
arrays:
  - name: unity-1
    family: unity
    spec:
      username: admin
      password: secret
      generate: {lunsPerNode: 2}
`
	e := startUnity(t, doc, 5*time.Second)
	node := dottedNode(t, doc, "worker-1.dc1.example.com")
	require.Equal(t, "worker-1,worker-1.dc1.example.com", node.CSINodeIDs[arrayclients.DriverUnity])

	id, v := resolveAndFence(t, e.adapter, node)
	assert.Equal(t, "worker-1.dc1.example.com", id.ObjectName)
	assert.True(t, v.Fenced, "%+v", v)
	assert.Len(t, v.Missing, 2, "both of its LUNs cut")
}

// resolveAndFence resolves node on a, plans its fence (no footprint),
// applies it and returns the identity and the read-back.
func resolveAndFence(t *testing.T, a arrayclients.Adapter, node arrayclients.Node) (arrayclients.Identity, arrayclients.Verification) {
	t.Helper()
	ctx := context.Background()
	id, err := a.Resolve(ctx, node)
	require.NoError(t, err)
	plan, err := a.Plan(ctx, id, nil)
	require.NoError(t, err)
	require.NoError(t, a.Apply(ctx, plan))
	v, err := a.Verify(ctx, plan)
	require.NoError(t, err)
	return id, v
}
