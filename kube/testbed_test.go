package kube_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fenced-project/fenced/kube"
	"github.com/fenced-project/fenced/tests/testbed"
)

type eventLog struct {
	mu     sync.Mutex
	events []kube.Event
}

func (l *eventLog) handle(ev kube.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, ev)
}

// count returns how many events of the kind named name arrived after t.
func (l *eventLog) count(kind kube.Kind, name string, after time.Time) int {
	return l.countIf(kind, name, after, func(kube.Event) bool { return true })
}

// countIf counts those of them for which keep holds.
func (l *eventLog) countIf(kind kube.Kind, name string, after time.Time, keep func(kube.Event) bool) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := 0
	for _, ev := range l.events {
		if ev.Kind == kind && ev.Name == name && ev.At.After(after) && keep(ev) {
			c++
		}
	}
	return c
}

func TestClusterAgainstTestbed(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a real control plane: skipped under -short")
	}
	cp := testbed.Start(t, testbed.Options{NodeLeaseDurationSeconds: 8})
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	nodes, err := cp.AddNodes(ctx, testbed.NodeSpecs("k", 2)...)
	require.NoError(t, err)
	require.NoError(t, cp.WaitNodesReady(ctx, nodes[0].Name(), nodes[1].Name()))

	cl, err := kube.NewCluster("bed", kube.Config{Kubeconfig: cp.KubeconfigPath}, nil)
	require.NoError(t, err)
	log := &eventLog{}
	start := time.Now()
	require.NoError(t, cl.StartWatches(ctx, log.handle))
	require.Error(t, cl.StartWatches(ctx, log.handle), "watches start once")
	require.Eventually(t, func() bool { return cl.WatchState().Synced }, time.Minute, 100*time.Millisecond)

	name := nodes[0].Name()
	for _, k := range []kube.Kind{kube.KindNode, kube.KindCSINode} {
		require.Positive(t, log.count(k, name, start), k)
	}
	require.Eventually(t, func() bool { return log.count(kube.KindLease, name, start) >= 2 }, time.Minute, 100*time.Millisecond,
		"the initial list and at least one renewal")

	node, ok := cl.Node(name)
	require.True(t, ok)
	assert.Equal(t, "True", kube.ReadyStatus(node))
	csi, ok := cl.CSINode(name)
	require.True(t, ok)
	in := kube.NodeInputs("bed", node, csi)
	assert.Equal(t, nodes[0].Spec.CSINodeIDs(), in.CSINodeIDs)
	assert.Equal(t, []string{nodes[0].IP()}, in.Addresses)
	assert.Equal(t, name, in.Hostname)

	l, err := cl.ReadLease(ctx, name)
	require.NoError(t, err)
	require.NotNil(t, l.Spec.RenewTime)
	_, err = cl.ReadLease(ctx, "no-such-node")
	require.True(t, apierrors.IsNotFound(err), "got %v", err)

	// A Lease deleted is delivered as a deletion, with its name.
	deleted := time.Now()
	gone := nodes[1].Name()
	require.NoError(t, cp.Client.CoordinationV1().Leases(kube.LeaseNamespace).Delete(ctx, gone, metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		return log.countIf(kube.KindLease, gone, deleted, func(ev kube.Event) bool { return ev.Deleted }) > 0
	}, time.Minute, 100*time.Millisecond, "the Lease's deletion is delivered")

	require.NoError(t, cl.CheckAPIServer(ctx))
	addr, err := cl.ProbeKubelet(ctx, node)
	require.NoError(t, err)
	assert.Equal(t, nodes[0].KubeletAddr(), addr)
	require.NoError(t, nodes[0].Kill(ctx))
	_, err = cl.ProbeKubelet(ctx, node)
	require.Error(t, err)

	require.NoError(t, cp.StopAPIServer())
	require.Error(t, cl.CheckAPIServer(ctx))
	require.NoError(t, cp.StartAPIServer(ctx))
	require.NoError(t, cl.CheckAPIServer(ctx))
	restarted := time.Now()
	require.Eventually(t, func() bool { return log.count(kube.KindLease, nodes[1].Name(), restarted) > 0 }, time.Minute, 100*time.Millisecond,
		"the Lease watch resumes after the API server restarts")
	assert.Empty(t, cl.WatchState().Error)
}
