package stonith_test

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/cluster/ledger"
	"github.com/fenced-project/fenced/configs"
	"github.com/fenced-project/fenced/detector"
	"github.com/fenced-project/fenced/detector/groupview"
	"github.com/fenced-project/fenced/kube"
	"github.com/fenced-project/fenced/stonith"
	"github.com/fenced-project/fenced/tests/arraysim/powerstore"
	"github.com/fenced-project/fenced/tests/testbed"
)

// TestTwoDriverInstancesOfOneFamily: two csi-powerstore installs, each
// under its own driver name and node name prefix, each with its own
// array (ps-a for csi-powerstore.dellemc.com, ps-b for
// csi-powerstore-2.dellemc.com). Each instance's node plugin registers
// the node's host on its own array under its own node ID and reports that
// ID in the node's CSINode; a node has a volume of each. Resolved with one
// node ID per family (what fenced did before arrays[].driverName), the
// node has an identity-not-found gap on ps-b while healthy; resolved with
// the node ID of each array's instance it is protected on both, with no
// gap. When it dies, both arrays are fenced and read back before any of
// its pods is deleted.
func TestTwoDriverInstancesOfOneFamily(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane, two array simulators and a Raft group")
	}
	const second = "csi-powerstore-2.dellemc.com"
	specs := testbed.NodeSpecs("e2e", 2)
	for i := range specs {
		specs[i].PowerStoreInstances = []testbed.PowerStoreInstance{{Driver: second, Prefix: "k8s-b"}}
	}
	b := startBedWith(t, specs, `
  - {name: ps-a, family: powerstore, spec: {applianceID: A1}}
  - {name: ps-b, family: powerstore, spec: {applianceID: B1}}
`, map[string]string{"ps-b": second})
	ctx := t.Context()
	victim := specs[0].Name
	for _, s := range []testbed.StatefulSetSpec{
		{Namespace: "app", Name: "one", Replicas: 1, Driver: testbed.DriverPowerStore},
		{Namespace: "app", Name: "two", Replicas: 1, Driver: second},
	} {
		s.NodeSelector = map[string]string{corev1.LabelHostname: victim}
		_, err := b.cp.CreateStatefulSet(ctx, s)
		require.NoError(t, err)
	}
	pods := waitPods(t, b, "one-0", "two-0")
	require.Eventually(t, func() bool {
		vas, err := b.cp.Client.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
		attached := 0
		for _, va := range vas.Items {
			if va.Status.Attached && va.Spec.NodeName == victim {
				attached++
			}
		}
		return err == nil && attached == 2
	}, 2*time.Minute, 100*time.Millisecond, "the two volumes were not both attached to %s", victim)

	// Each instance registered the node on its own array only, under its
	// own node ID, and published its volume there.
	hostOf := map[string]string{} // array -> the victim's host name there
	for arr, drv := range map[string]string{"ps-a": testbed.DriverPowerStore, "ps-b": second} {
		hostOf[arr] = csiNodeID(t, b, victim, drv)
		require.True(t, psHostAccess(t, b, arr, hostOf[arr]), "%s has no access on %s before any fence", victim, arr)
	}
	require.NotEqual(t, hostOf["ps-a"], hostOf["ps-b"])

	// The configuration: ps-b names its driver instance.
	cfg := configs.Config{Arrays: []configs.Array{
		{Name: "ps-a", Family: arrayclients.PowerStore},
		{Name: "ps-b", Family: arrayclients.PowerStore, DriverName: second},
	}}
	cl := configs.Cluster{Name: clusterName, Arrays: []string{"ps-a", "ps-b"},
		Drivers: map[string]arrayclients.Family{second: arrayclients.PowerStore}}
	instances := cfg.ArrayDrivers(cl)
	require.Equal(t, map[string][]string{"ps-a": {testbed.DriverPowerStore}, "ps-b": {second}}, instances)
	adapters := []arrayclients.Adapter{b.adapters["ps-a"], b.adapters["ps-b"]}
	// learn records every node's Node and CSINode, as the daemon's
	// detector hands them to the leader, in a view resolving the arrays
	// with the node IDs of instances.
	learn := func(instances map[string][]string) {
		t.Helper()
		bootID := func(node string) string {
			n, err := b.cp.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			if err != nil {
				return ""
			}
			return n.Status.NodeInfo.BootID
		}
		v := groupview.NewView(cl, instances, b.raft, adapters, bootID, "test", b.log)
		for name := range b.nodes {
			n, err := b.cp.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			require.NoError(t, err)
			csi, err := b.cp.Client.StorageV1().CSINodes().Get(ctx, name, metav1.GetOptions{})
			require.NoError(t, err)
			require.NoError(t, v.RecordNodeInputs(ctx, kube.NodeInputs(clusterName, n, csi)))
		}
	}

	p := b.startPipelineWith(false, nil, func(c *stonith.Config) {
		c.Clusters[0].Drivers = cl.DriverFamilies()
		c.Clusters[0].GapScanPeriod = time.Second
	})
	require.Eventually(t, func() bool { return p.runner.Status().Counts[detector.Healthy] == 2 },
		time.Minute, 100*time.Millisecond, "detector never saw the two nodes healthy")

	// One node ID per family: the second instance's array does not know
	// the first instance's node ID, and the node's volume there is a gap.
	learn(map[string][]string{"ps-a": {testbed.DriverPowerStore}, "ps-b": {testbed.DriverPowerStore}})
	twoPV := pvOf(t, b, pods["two-0"])
	require.Eventually(t, func() bool {
		for _, u := range p.ctrl.Status().Unprotected {
			if u.Node == victim && slices.ContainsFunc(u.Gaps, func(g stonith.VolumeGap) bool {
				return g.Array == "ps-b" && g.Volume == twoPV && g.Reason == arrayclients.GapIdentityNotFound
			}) {
				return true
			}
		}
		return false
	}, 30*time.Second, 100*time.Millisecond, "one node ID per family: no identity-not-found gap on ps-b in /status: %+v",
		p.ctrl.Status().Unprotected)

	// Each array resolved with its own instance's node ID: protected on
	// both, no gap, in /status and in `fenced plan`.
	learn(instances)
	var ids map[string]arrayclients.Identity
	b.raft.Ledger().Read(func(s *ledger.State) {
		n := s.Node(clusterName, victim)
		require.NotNil(t, n)
		assert.Empty(t, n.NotFound)
		ids = n.Identities
	})
	require.Len(t, ids, 2)
	for arr, host := range hostOf {
		assert.Equal(t, host, ids[arr].ObjectName, "%s is resolved on %s as the host its instance registered", victim, arr)
	}
	require.Eventually(t, func() bool { return len(p.ctrl.Status().Unprotected) == 0 },
		30*time.Second, 100*time.Millisecond, "nodes still unprotected: %+v", p.ctrl.Status().Unprotected)
	plan, err := p.ctrl.PlanNode(ctx, stonith.PlanRequest{Cluster: clusterName, Node: victim})
	require.NoError(t, err)
	require.True(t, plan.Protected, "gaps: %+v", plan.Gaps)
	require.Empty(t, plan.Gaps)
	var planned []string
	for _, ap := range plan.Arrays {
		planned = append(planned, ap.Array)
	}
	assert.ElementsMatch(t, []string{"ps-a", "ps-b"}, planned)

	// The node dies: both arrays are cut and read back before any pod of
	// the node is deleted.
	killAt := time.Now()
	seqs := map[string]int64{}
	for name, s := range b.sims {
		seqs[name] = s.srv.LastSeq()
	}
	require.NoError(t, b.nodes[victim].Kill(ctx))
	b.waitState(victim, ledger.StateEvicted, 2*time.Minute)
	f := b.fence(victim)
	require.NotNil(t, f)
	for _, arr := range []string{"ps-a", "ps-b"} {
		r := f.Results[arr]
		require.NotNil(t, r, "no result on %s", arr)
		assert.True(t, r.Applied && r.Verified, "%s: %+v", arr, r)
		assert.False(t, psHostAccess(t, b, arr, hostOf[arr]), "%s still has access on %s", victim, arr)
	}
	require.Eventually(t, func() bool {
		for _, name := range []string{"one-0", "two-0"} {
			pod, err := b.cp.Client.CoreV1().Pods("app").Get(ctx, name, metav1.GetOptions{})
			if err == nil && pod.UID == pods[name].UID {
				return false
			}
		}
		return true
	}, time.Minute, 200*time.Millisecond, "the pods of %s were not deleted", victim)
	requireFenceBeforeDeletes(t, b, victim, killAt, seqs)
}

// psHostAccess reports whether the PowerStore simulator's host of that
// name has an initiator and a volume mapped: whether the node reaches a
// volume through it.
func psHostAccess(t *testing.T, b *bed, array, host string) bool {
	t.Helper()
	raw, err := json.Marshal(b.sims[array].srv.Family().Snapshot())
	require.NoError(t, err)
	var snap powerstore.Snapshot
	require.NoError(t, json.Unmarshal(raw, &snap))
	for _, h := range snap.Hosts {
		if h.Name != host || len(h.Initiators) == 0 {
			continue
		}
		for _, m := range snap.Mappings {
			if m.HostID == h.ID {
				return true
			}
		}
	}
	return false
}
