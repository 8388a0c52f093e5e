package testbed_test

import (
	"os"
	"strconv"
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
