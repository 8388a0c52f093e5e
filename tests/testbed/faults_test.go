package testbed_test

import (
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/tests/testbed"
)

func TestNodeRebootHangAndReturn(t *testing.T) {
	t.Parallel()
	cp := testbed.Start(t, testbed.Options{NodeLeaseDurationSeconds: leaseDuration})
	ctx := ctxFor(t, 5*time.Minute)
	nodes, err := cp.AddNodes(ctx, testbed.NodeSpecs("node", 2)...)
	require.NoError(t, err)
	require.NoError(t, cp.WaitNodesReady(ctx, "node-1", "node-2"))

	t.Run("reboot", func(t *testing.T) {
		n := nodes[0]
		oldBoot := n.BootID()
		require.Equal(t, oldBoot, nodeBootID(t, ctx, cp, n.Name()))

		require.NoError(t, n.Kill(ctx))
		require.Error(t, testbed.ProbeKubelet(ctx, n.KubeletAddr()))
		frozen := requireLeaseStops(t, ctx, cp, n.Name())

		newBoot, err := n.Reboot(ctx)
		require.NoError(t, err)
		assert.NotEqual(t, oldBoot, newBoot)
		assert.Equal(t, newBoot, n.BootID())
		assert.Equal(t, testbed.NodeUp, n.State())
		require.NoError(t, testbed.ProbeKubelet(ctx, n.KubeletAddr()))
		requireLeaseRenewsAfter(t, ctx, cp, n.Name(), frozen)
		// kwok's heartbeats keep the new boot ID.
		require.Never(t, func() bool { return nodeBootID(t, ctx, cp, n.Name()) != newBoot },
			2*renewInterval, 500*time.Millisecond)
	})

	t.Run("hang", func(t *testing.T) {
		n := nodes[1]
		boot := n.BootID()
		require.NoError(t, n.Hang(ctx))
		assert.Equal(t, testbed.NodeHung, n.State())
		frozen := requireLeaseStops(t, ctx, cp, n.Name())
		require.NoError(t, testbed.ProbeKubelet(ctx, n.KubeletAddr()), "a hung node's kubelet port stays open")

		require.NoError(t, n.Return(ctx))
		requireLeaseRenewsAfter(t, ctx, cp, n.Name(), frozen)
		assert.Equal(t, boot, nodeBootID(t, ctx, cp, n.Name()), "return keeps the boot ID")
	})

	t.Run("kill and return", func(t *testing.T) {
		n := nodes[1]
		boot := n.BootID()
		require.NoError(t, n.Kill(ctx))
		require.Error(t, testbed.ProbeKubelet(ctx, n.KubeletAddr()))
		frozen := requireLeaseStops(t, ctx, cp, n.Name())
		require.NoError(t, n.Return(ctx))
		require.NoError(t, testbed.ProbeKubelet(ctx, n.KubeletAddr()))
		requireLeaseRenewsAfter(t, ctx, cp, n.Name(), frozen)
		assert.Equal(t, boot, nodeBootID(t, ctx, cp, n.Name()))
	})

	t.Run("node patches in the audit log", func(t *testing.T) {
		events, err := cp.AuditEvents(testbed.AuditFilter{Verb: "patch", Resource: "nodes", Name: "node-1", User: "admin", Succeeded: true})
		require.NoError(t, err)
		// create-time status, then per fault: label off, boot ID, label on.
		assert.GreaterOrEqual(t, len(events), 4)
	})

	t.Run("stop leaves no process", func(t *testing.T) {
		var pids []int
		for _, p := range cp.Processes() {
			require.NotZero(t, p.Pid(), p.Name)
			pids = append(pids, p.Pid())
		}
		cp.Stop()
		for _, pid := range pids {
			_, err := os.Stat("/proc/" + strconv.Itoa(pid))
			assert.True(t, os.IsNotExist(err), "process %d still exists", pid)
		}
		assert.Error(t, testbed.ProbeKubelet(ctx, nodes[0].KubeletAddr()))
	})
}

func TestAPIServerRestart(t *testing.T) {
	t.Parallel()
	cp := testbed.Start(t, testbed.Options{})
	ctx := ctxFor(t, 3*time.Minute)
	_, err := cp.Client.Discovery().ServerVersion()
	require.NoError(t, err)

	require.NoError(t, cp.StopAPIServer())
	assert.False(t, cp.APIServer.Running())
	_, err = cp.Client.Discovery().ServerVersion()
	require.Error(t, err)

	require.NoError(t, cp.StartAPIServer(ctx))
	v, err := cp.Client.Discovery().ServerVersion()
	require.NoError(t, err)
	assert.Equal(t, testbed.KubernetesVersion, v.GitVersion)

	require.NoError(t, cp.RestartAPIServer(ctx))
	require.NoError(t, cp.EnsureNamespace(ctx, "after-restart"))
}

// TestLeasesRenewThroughRepeatedKubeletRestarts: kubelet restarts (a kill
// and a return) in quick succession, after a reboot and while renewals are
// in flight, leave every node's Lease renewed as a kubelet renews it: the
// restarted nodes' and a bystander's, never letting one lapse. (kwok's own
// lease controller lost renewals of every node after such restarts.)
func TestLeasesRenewThroughRepeatedKubeletRestarts(t *testing.T) {
	t.Parallel()
	const duration = 8 // seconds; renewed every 2 s
	interval := duration * time.Second / 4
	cp := testbed.Start(t, testbed.Options{NodeLeaseDurationSeconds: duration})
	ctx := ctxFor(t, 5*time.Minute)
	nodes, err := cp.AddNodes(ctx, testbed.NodeSpecs("node", 3)...)
	require.NoError(t, err)
	require.NoError(t, cp.WaitNodesReady(ctx, "node-1", "node-2", "node-3"))

	_, err = nodes[0].Reboot(ctx)
	require.NoError(t, err)
	var wg sync.WaitGroup
	for i, n := range nodes[:2] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 1))
			for range 12 {
				// Land the restarts anywhere in the renewal cycle.
				time.Sleep(time.Duration(rng.Int64N(int64(interval))))
				assert.NoError(t, n.Kill(ctx))
				time.Sleep(time.Duration(rng.Int64N(int64(interval / 4))))
				assert.NoError(t, n.Return(ctx))
			}
		}()
	}
	wg.Wait()
	require.False(t, t.Failed())

	// Watch every Lease for ten renewal intervals: each is renewed again
	// and again, and never goes unrenewed for its duration.
	renewals := map[string][]time.Time{}
	deadline := time.Now().Add(10 * interval)
	for time.Now().Before(deadline) {
		for _, n := range nodes {
			rt, err := cp.LeaseRenewTime(ctx, n.Name())
			require.NoError(t, err)
			if r := renewals[n.Name()]; len(r) == 0 || !r[len(r)-1].Equal(rt) {
				renewals[n.Name()] = append(r, rt)
			}
		}
		time.Sleep(interval / 8)
	}
	for _, n := range nodes {
		r := renewals[n.Name()]
		assert.GreaterOrEqual(t, len(r), 5, "%s: Lease renewed %d times in %s", n.Name(), len(r), 10*interval)
		for i := 1; i < len(r); i++ {
			assert.Less(t, r[i].Sub(r[i-1]), duration*time.Second, "%s: Lease lapsed between %s and %s",
				n.Name(), r[i-1].Format(time.RFC3339Nano), r[i].Format(time.RFC3339Nano))
		}
		l, err := cp.NodeLease(ctx, n.Name())
		require.NoError(t, err)
		require.NotNil(t, l.Spec.HolderIdentity)
		assert.Equal(t, n.Name(), *l.Spec.HolderIdentity, "the kubelet holds its Lease under the node's name")
		require.Len(t, l.OwnerReferences, 1)
		assert.Equal(t, "Node", l.OwnerReferences[0].Kind)
		assert.Equal(t, n.Name(), l.OwnerReferences[0].Name)
	}
}
