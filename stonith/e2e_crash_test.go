package stonith_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fenced-project/fenced/cluster/ledger"
	"github.com/fenced-project/fenced/detector"
	"github.com/fenced-project/fenced/stonith"
	"github.com/fenced-project/fenced/tests/testbed"
)

// TestEndToEndCrashBetweenSteps stops the daemon's pipeline at every point
// between two steps (as if the process died there), starts a new one on the
// same Raft group, arrays and cluster, and checks that it finishes the fence
// and the recovery: one record, every array restored (but for the volume
// that moved, which stays with its new node), no taint left,
// the StatefulSet whole.
func TestEndToEndCrashBetweenSteps(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane, three array simulators and a Raft group")
	}
	b := startBed(t, 4)
	ctx := t.Context()
	ids := b.learn()
	_, err := b.cp.CreateStatefulSet(ctx, testbed.StatefulSetSpec{Namespace: "app", Name: "db", Replicas: 3,
		Driver: testbed.DriverPowerFlex, AntiAffinity: true})
	require.NoError(t, err)
	waitRunning(t, b, 3)
	waitAttachedAll(t, b)
	before := map[string]string{}
	for name, s := range b.sims {
		before[name] = s.snapshot(t)
	}
	for _, point := range stonith.Points() {
		t.Run(string(point), func(t *testing.T) {
			pods := waitRunning(t, b, 3)
			victim := pods["db-0"].Spec.NodeName
			closedBefore := len(b.raft.Ledger().Copy().Node(clusterName, victim).History)
			var fired atomic.Bool
			var p *pipeline
			p = b.startPipelineHook(false, func(at stonith.Point) bool {
				if fired.Load() {
					return false
				}
				if at == point {
					fired.Store(true)
					go p.stop() // the process dies here
					return false
				}
				return true
			})
			require.Eventually(t, func() bool { return p.runner.Status().Counts[detector.Healthy] == 4 },
				time.Minute, 100*time.Millisecond)
			require.NoError(t, b.nodes[victim].Kill(ctx))
			rebooted := false
			require.Eventually(t, func() bool {
				if !fired.Load() && !rebooted {
					if f := b.fence(victim); f != nil && f.State == ledger.StateEvicted {
						_, err := b.nodes[victim].Reboot(ctx)
						require.NoError(t, err)
						rebooted = true
					}
				}
				return fired.Load()
			}, 2*time.Minute, 50*time.Millisecond, "point %s never reached", point)

			// A new process resumes from the ledger.
			p2 := b.startPipeline(false)
			defer p2.stop()
			if !rebooted {
				b.waitState(victim, ledger.StateEvicted, 2*time.Minute)
				_, err := b.nodes[victim].Reboot(ctx)
				require.NoError(t, err)
			}
			require.Eventually(t, func() bool {
				n := b.raft.Ledger().Copy().Node(clusterName, victim)
				return n.Fence == nil && len(n.History) == closedBefore+1
			}, 3*time.Minute, 100*time.Millisecond, "fence of %s not closed after the crash at %s (record %+v)",
				victim, point, b.fence(victim))
			f := b.lastClosed(victim)
			assert.Equal(t, ledger.StateClosed, f.State)
			requireRestored(t, b, before, ids, "after a crash at "+string(point))
			for name, s := range b.sims {
				assert.True(t, hasAccess(t, s.snapshot(t), ids[victim][name]))
			}
			n, err := b.cp.Client.CoreV1().Nodes().Get(ctx, victim, metav1.GetOptions{})
			require.NoError(t, err)
			assert.False(t, hasTaint(n, stonith.TaintFenced))
			assert.False(t, hasTaint(n, stonith.TaintOutOfService))
		})
	}
}
