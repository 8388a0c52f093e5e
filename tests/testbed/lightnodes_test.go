package testbed_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fenced-project/fenced/tests/testbed"
)

// TestLightNodesReadyAndRenewed adds light nodes and checks what fenced
// reads of them: Ready, the addresses and CSINode of a kwok node, no kwok
// label, and every Lease renewed once per renewal interval by the light
// writer.
func TestLightNodesReadyAndRenewed(t *testing.T) {
	const n = 20
	cp := testbed.Start(t, testbed.Options{NodeLeaseDurationSeconds: leaseDuration})
	ctx := ctxFor(t, 5*time.Minute)
	nodes, err := cp.AddLightNodes(ctx, testbed.NodeSpecs("light", n)...)
	require.NoError(t, err)
	names := make([]string, n)
	for i, nd := range nodes {
		names[i] = nd.Name()
	}
	require.NoError(t, cp.WaitNodesReady(ctx, names...))
	for _, name := range names {
		node, err := cp.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		require.NotContains(t, node.Labels, testbed.KwokLabel, "kwok does not manage a light node")
		require.NotEmpty(t, internalIP(node), "node %s has its InternalIP", name)
		_, err = cp.Client.StorageV1().CSINodes().Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err, "node %s has its CSINode", name)
	}

	// Every Lease's renewTime moves on at each interval: over six
	// intervals each node is seen renewed at least four times.
	w, err := cp.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Watch(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	defer w.Stop()
	seen := map[string]map[time.Time]bool{}
	deadline := time.After(6 * renewInterval)
	for watching := true; watching; {
		select {
		case ev := <-w.ResultChan():
			if l, ok := ev.Object.(*coordinationv1.Lease); ok && l.Spec.RenewTime != nil {
				if seen[l.Name] == nil {
					seen[l.Name] = map[time.Time]bool{}
				}
				seen[l.Name][l.Spec.RenewTime.Time] = true
			}
		case <-deadline:
			watching = false
		}
	}
	for _, name := range names {
		require.GreaterOrEqual(t, len(seen[name]), 4, "renewals of %s seen", name)
	}
	renewals, failures := cp.LightRenewals()
	require.Zero(t, failures, "failed renewals of %d", renewals)
}
