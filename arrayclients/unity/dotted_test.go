package unity_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/arrayclients/internal/arraytest"
)

// A dotted node name: the Unity adapter finds the host csi-unity's node
// plugin made, named by the whole node name (the long half of
// "<short>,<long>"), fences and reads it back.
func TestUnityDottedNodeName(t *testing.T) {
	doc := arraytest.DottedNodes + `
arrays:
  - name: unity-1
    family: unity
    spec:
      username: admin
      password: secret
      generate: {lunsPerNode: 2}
`
	e := startUnity(t, doc, 5*time.Second)
	node := arraytest.DottedNode(t, doc, "worker-1.dc1.example.com")
	require.Equal(t, "worker-1,worker-1.dc1.example.com", node.CSINodeIDs[arrayclients.DriverUnity])

	id, v := arraytest.ResolveAndFence(t, e.adapter, node)
	assert.Equal(t, "worker-1.dc1.example.com", id.ObjectName)
	assert.True(t, v.Fenced, "%+v", v)
	assert.Len(t, v.Missing, 2, "both of its LUNs cut")
}
