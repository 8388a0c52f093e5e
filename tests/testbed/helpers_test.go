package testbed_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fenced-project/fenced/tests/testbed"
)

// leaseDuration is the node Lease duration the fault tests use: kwok renews
// every quarter of it (3 s), which keeps the tests short.
const leaseDuration = 12

const renewInterval = leaseDuration * time.Second / 4

// ctxFor returns a context that ends with the test or after d.
func ctxFor(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// requireLeaseStops waits until the node's Lease has gone unrenewed for
// three renew intervals, then checks it stays frozen for two more.
func requireLeaseStops(t *testing.T, ctx context.Context, cp *testbed.ControlPlane, node string) time.Time {
	t.Helper()
	var frozen time.Time
	require.Eventually(t, func() bool {
		rt, err := cp.LeaseRenewTime(ctx, node)
		if err != nil {
			return false
		}
		frozen = rt
		return time.Since(rt) > 3*renewInterval
	}, 8*renewInterval, 200*time.Millisecond, "lease of %s keeps renewing", node)
	require.Never(t, func() bool {
		rt, err := cp.LeaseRenewTime(ctx, node)
		return err == nil && !rt.Equal(frozen)
	}, 2*renewInterval, 200*time.Millisecond, "lease of %s renewed after it had stopped", node)
	return frozen
}

// requireLeaseRenewsAfter waits until the node's Lease is renewed after t0.
func requireLeaseRenewsAfter(t *testing.T, ctx context.Context, cp *testbed.ControlPlane, node string, t0 time.Time) {
	t.Helper()
	require.Eventually(t, func() bool {
		rt, err := cp.LeaseRenewTime(ctx, node)
		return err == nil && rt.After(t0)
	}, 4*renewInterval+10*time.Second, 200*time.Millisecond, "lease of %s not renewed after %s", node, t0)
}

// nodeBootID reads status.nodeInfo.bootID from the API.
func nodeBootID(t *testing.T, ctx context.Context, cp *testbed.ControlPlane, name string) string {
	t.Helper()
	n, err := cp.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	return n.Status.NodeInfo.BootID
}

// runningPods returns the pods with label app=<app> by name.
func runningPods(ctx context.Context, cp *testbed.ControlPlane, ns, app string) (map[string]corev1.Pod, error) {
	list, err := cp.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		return nil, err
	}
	out := map[string]corev1.Pod{}
	for _, p := range list.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			out[p.Name] = p
		}
	}
	return out, nil
}

// internalIP returns a Node's InternalIP address from the API.
func internalIP(n *corev1.Node) string {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	return ""
}
