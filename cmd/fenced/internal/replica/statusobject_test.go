package replica

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/fenced-project/fenced/cmd/fenced/status"
)

// TestClusterStatusObject checks the FencedStatus is the cluster's part of
// /status: the other cluster's fences are left out, closed fences are not
// counted open, protected is total minus unprotected.
func TestClusterStatusObject(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 500, time.UTC)
	st := status.Status{ReplicaID: "r2", Raft: &status.Raft{Term: 7},
		Clusters: []status.Cluster{
			{Name: "a", Paused: true, Pause: &status.Pause{Scope: "a", Reason: "array upgrade"},
				Nodes: &status.NodeCounts{Total: 10, Unprotected: 1}},
			{Name: "b", DryRun: true},
		},
		Fences: []status.Fence{
			{ID: "fence-3", Cluster: "a", Node: "w-1", Phase: "evicted"},
			{ID: "fence-2", Cluster: "a", Node: "w-2", Phase: "closed"},
			{ID: "fence-4", Cluster: "b", Node: "x-1", Phase: "fencing"},
		}}
	so, ok := clusterStatusObject(st, "a", now)
	assert.True(t, ok)
	assert.Equal(t, "r2", so.Leader)
	assert.Equal(t, uint64(7), so.Term)
	assert.True(t, so.Paused)
	assert.Equal(t, "array upgrade", so.Pause.Reason)
	assert.False(t, so.DryRun)
	assert.Equal(t, 9, so.ProtectedNodes)
	assert.Equal(t, 1, so.UnprotectedNodes)
	assert.Equal(t, 1, so.OpenFences)
	assert.Len(t, so.Fences, 2)
	assert.Equal(t, now.Truncate(time.Second), so.UpdatedAt)
	_, ok = clusterStatusObject(st, "c", now)
	assert.False(t, ok)
}
