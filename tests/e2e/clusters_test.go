package e2e

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/tests/testbed"
)

// TestClusterSpecs: the second cluster keeps its name and other-N nodes,
// and extra clusters follow with names and node names no other cluster
// uses.
func TestClusterSpecs(t *testing.T) {
	specs := clusterSpecs(Options{Nodes: 3, SecondCluster: 2, ExtraClusters: []int{2, 4}})
	require.Len(t, specs, 4)
	assert.Equal(t, clusterSpec{ClusterName, "worker", 3}, specs[0])
	assert.Equal(t, clusterSpec{SecondClusterName, "other", 2}, specs[1])
	assert.Equal(t, ExtraClusterName(0), specs[2].name)
	assert.Equal(t, ExtraClusterName(1), specs[3].name)
	assert.Equal(t, 4, specs[3].nodes)
	clusters, nodes := map[string]bool{}, map[string]bool{}
	for _, c := range specs {
		assert.False(t, clusters[c.name], "cluster %s twice", c.name)
		clusters[c.name] = true
		for _, n := range testbed.NodeSpecs(c.prefix, c.nodes) {
			assert.False(t, nodes[n.Name], "node %s twice", n.Name)
			nodes[n.Name] = true
		}
	}
	assert.True(t, nodes[ExtraClusterNode(1, 4)], "ExtraClusterNode names the harness's node")

	assert.Equal(t, []clusterSpec{{ClusterName, "worker", 5}}, clusterSpecs(Options{Nodes: 5}), "one cluster by default")
}
