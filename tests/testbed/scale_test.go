package testbed_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fenced-project/fenced/tests/testbed"
)

// TestThousandNodeLeasesRenew runs 1,000 kwok nodes (kwok's default Lease
// duration of 40 s, renewed every 10 s like the kubelet) and checks that
// every one of their Leases is renewed.
func TestThousandNodeLeasesRenew(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000 nodes: skipped under -short")
	}
	const n = 1000
	cp := testbed.Start(t, testbed.Options{})
	ctx := ctxFor(t, 15*time.Minute)

	start := time.Now()
	nodes, err := cp.AddNodes(ctx, testbed.NodeSpecs("kwok", n)...)
	require.NoError(t, err)
	names := make([]string, n)
	for i, nd := range nodes {
		names[i] = nd.Name()
	}
	require.NoError(t, cp.WaitNodesReady(ctx, names...))
	t.Logf("%d nodes created and ready in %s", n, time.Since(start).Round(time.Second))

	// Every Lease is renewed again after all nodes were ready.
	since := time.Now()
	pending := map[string]bool{}
	for _, name := range names {
		pending[name] = true
	}
	require.Eventually(t, func() bool {
		leases, err := cp.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, l := range leases.Items {
			if l.Spec.RenewTime != nil && l.Spec.RenewTime.After(since) {
				delete(pending, l.Name)
			}
		}
		return len(pending) == 0
	}, 2*time.Minute, time.Second, "leases not renewed: %d", len(pending))
	t.Logf("all %d leases renewed within %s", n, time.Since(since).Round(time.Second))

	nodeList, err := cp.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "type=kwok"})
	require.NoError(t, err)
	require.Len(t, nodeList.Items, n)
	ips := map[string]bool{}
	for i := range nodeList.Items {
		ips[internalIP(&nodeList.Items[i])] = true
	}
	require.Len(t, ips, n, "every node has an InternalIP of its own")

	byName, total, err := cp.RSS()
	require.NoError(t, err)
	t.Logf("RSS with %d nodes: total %d MiB %v", n, total>>20, mib(byName))
}

func mib(m map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for k, v := range m {
		out[k] = v >> 20
	}
	return out
}
