package powermax_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/arrayclients/internal/arraytest"
)

// A dotted node name: the PowerMax adapter finds the host csi-powermax
// made from the node ID (the name up to its first dot), fences it and
// reads it back; the other node's host is untouched.
func TestPowerMaxDottedNodeName(t *testing.T) {
	doc := arraytest.DottedNodes + `
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
	node := arraytest.DottedNode(t, doc, "worker-1.dc1.example.com")
	require.Equal(t, "worker-1", node.CSINodeIDs[arrayclients.DriverPowerMax])
	_, othersBefore := pmaxState(t, e.sim)

	id, v := arraytest.ResolveAndFence(t, e.adapter, node)
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
