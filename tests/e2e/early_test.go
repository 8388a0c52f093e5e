package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fenced-project/fenced/cluster/ledger"
	"github.com/fenced-project/fenced/stonith"
	"github.com/fenced-project/fenced/tests/invariants"
	"github.com/fenced-project/fenced/tests/testbed"
)

// TestEarlyVerdicts runs the product's default timing (heartbeat grace
// 40 s, kubelet Leases renewed every 10 s) with early verdicts on, and at
// the same moment: a node whose only volume is on PowerFlex dies (its
// kubelet, Lease and SDC go; every witness agrees: fenced before the
// grace, the fence's reason says early), a node with a PowerScale volume
// dies (PowerScale has no session state, so its witness never agrees: it
// is fenced at the grace), and a third node's kubelet stops for 15 s while
// its storage stays connected (never fenced). Both dead nodes' pods run
// again elsewhere and the invariant checker finds nothing.
func TestEarlyVerdicts(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts a control plane and three fenced processes")
	}
	h := Start(t, Options{Nodes: 6, Timing: ClusterTiming{EarlyVerdict: EarlyOn, StormLimit: "3"}})
	h.WaitLeader(waitLeader)
	nodes := h.NodesOf(ClusterName)
	require.GreaterOrEqual(t, len(nodes), 6)
	// Each StatefulSet has its own pair of nodes (a victim and a spare),
	// so the victims' footprints are one family each.
	pf, nfs, blip := nodes[0], nodes[1], nodes[4]
	for node, key := range map[string]string{nodes[0]: "early-pf", nodes[2]: "early-pf", nodes[1]: "early-nfs", nodes[3]: "early-nfs"} {
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:"true"}}}`, key)
		_, err := h.CP.Client.CoreV1().Nodes().Patch(h.ctx, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		require.NoError(t, err)
	}
	pfPods := deployWith(t, h, testbed.StatefulSetSpec{Namespace: "db", Name: "pf", Replicas: 1,
		NodeSelector: map[string]string{"early-pf": "true"}})
	nfsPods := deployWith(t, h, testbed.StatefulSetSpec{Namespace: "db", Name: "nfs", Replicas: 1, Driver: testbed.DriverPowerScale,
		NodeSelector: map[string]string{"early-nfs": "true"}})
	// The victims are where the scheduler put the pods.
	for n := range pfPods {
		pf = n
	}
	for n := range nfsPods {
		nfs = n
	}
	require.NotEqual(t, pf, nfs)

	h.KillNode(pf)
	h.KillNode(nfs)
	h.StopKubelet(blip)
	time.Sleep(15 * time.Second)
	h.StartKubelet(blip)
	// Read after the kills have long taken effect: no renewal can follow.
	renewPF, err := h.CP.LeaseRenewTime(h.ctx, pf)
	require.NoError(t, err)
	renewNFS, err := h.CP.LeaseRenewTime(h.ctx, nfs)
	require.NoError(t, err)

	fPF := h.WaitFence(pf, waitFence, phasesEvicted...)
	fNFS := h.WaitFence(nfs, waitFence, phasesEvicted...)
	requireVerified(t, h, fPF)
	requireVerified(t, h, fNFS)
	waitReplaced(t, h, pfPods[pf])
	waitReplaced(t, h, nfsPods[nfs])
	holdNoFence(t, h, 20*time.Second, []string{blip}, nil)

	in, _, err := h.Inputs()
	require.NoError(t, err)
	opened := map[string]*ledger.Fence{}
	for _, f := range in.Ledger.Fences {
		if f.Kind != ledger.KindUnfence {
			opened[f.Node] = f
		}
	}
	require.Contains(t, opened, pf)
	require.Contains(t, opened, nfs)
	assert.NotContains(t, opened, blip, "a kubelet restart with the storage connected is never fenced")
	early, grace := opened[pf], opened[nfs]
	t.Logf("PowerFlex node opened %.1f s after its last renewal (%s); PowerScale node %.1f s (%s)",
		early.OpenedAt.Sub(renewPF).Seconds(), early.Reason, grace.OpenedAt.Sub(renewNFS).Seconds(), grace.Reason)
	assert.Contains(t, early.Reason, stonith.EarlyReason, "the PowerFlex node's fence")
	assert.Less(t, early.OpenedAt.Sub(renewPF), 40*time.Second, "the early verdict came before the grace")
	assert.NotContains(t, grace.Reason, stonith.EarlyReason, "the PowerScale node's fence")
	assert.GreaterOrEqual(t, grace.OpenedAt.Sub(renewNFS), 40*time.Second, "a witness without session state waits for the grace")

	rep := h.Check()
	assert.Positive(t, rep.Checked[invariants.RuleFenceBeforeDelete])
}
