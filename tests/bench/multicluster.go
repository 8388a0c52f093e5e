package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/fenced-project/fenced/tests/e2e"
)

// MultiClusterResult is one fenced group idle over several clusters, each
// with its own control plane, over the same arrays.
type MultiClusterResult struct {
	Clusters        int    `json:"clusters"`
	NodesPerCluster int    `json:"nodesPerCluster"`
	Window          string `json:"window"`
	// Learned is how long after the replicas started the leader knew the
	// array identities of every node of every cluster. The window begins
	// after it.
	Learned float64 `json:"identitiesLearnedSeconds"`
	// ControlPlaneNice is the nice value the control planes and kwoks ran
	// at.
	ControlPlaneNice int     `json:"controlPlaneNice,omitempty"`
	Leader           Process `json:"leader"`
	// Follower is one follower.
	Follower Process `json:"follower"`
	// Error is why the run did not complete; the figures are then partial.
	Error string `json:"error,omitempty"`
}

// runMultiCluster measures one group protecting res.Clusters clusters of
// res.NodesPerCluster nodes and fills in res: e2e.ClusterName and
// res.Clusters−1 extra clusters, each its own control plane and kwok.
func runMultiCluster(t *e2e.Standalone, p params, res *MultiClusterResult) error {
	n := res.NodesPerCluster
	extra := make([]int, res.Clusters-1)
	want := map[string]int{e2e.ClusterName: n}
	for i := range extra {
		extra[i] = n
		want[e2e.ExtraClusterName(i)] = n
	}
	fmt.Fprintf(os.Stderr, "multi-cluster: starting %d clusters of %d nodes\n", res.Clusters, n)
	h := e2e.Start(t, e2e.Options{Nodes: n, ExtraClusters: extra, ControlPlaneNice: p.ControlPlaneNice, NoArrayAuditFiles: true})
	started := time.Now()
	h.WaitLeader(5 * time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	// Steady, as in the single-cluster runs: every node of every cluster
	// healthy and its identities learned on every array.
	if err := waitHealthy(ctx, h, want); err != nil {
		return fmt.Errorf("multi-cluster: %w", err)
	}
	if err := waitLearned(ctx, h, want); err != nil {
		return fmt.Errorf("multi-cluster: %w", err)
	}
	res.Learned = time.Since(started).Seconds()
	fmt.Fprintf(os.Stderr, "multi-cluster: identities of %d nodes in %d clusters learned after %.0f s\n",
		res.Clusters*n, res.Clusters, res.Learned)
	var err error
	if res.Leader, res.Follower, err = measureIdle(ctx, h, p.SteadyWindow, nil, nil); err != nil {
		return fmt.Errorf("multi-cluster: %w", err)
	}
	return nil
}
