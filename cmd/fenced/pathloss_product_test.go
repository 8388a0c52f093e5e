package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/arrayclients/all"
	"github.com/fenced-project/fenced/kube"
	"github.com/fenced-project/fenced/tests/arraysim/simcore"
	"github.com/fenced-project/fenced/tests/testbed"
)

// TestProductStoragePathLoss runs one real `fenced run` with
// storagePathLoss enabled (grace 6s, maxDisconnected 1) against the test
// bed and the PowerFlex, Unity and PowerMax simulators. Every node keeps
// renewing its Lease throughout.
//   - The simulated PowerFlex reports every SDC disconnected with no I/O:
//     the storage storm guard shows in /status and the metric, and when
//     it clears nothing was fenced.
//   - One SDC disconnected with I/O still flowing: no fence.
//   - The node running db-0 has its SDC disconnected with no I/O past the
//     grace: it is fenced on every array (read back), tainted, db-0 runs
//     elsewhere, and the fence's reason says storage-path-lost.
func TestProductStoragePathLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane, three array simulators and fenced")
	}
	bin := buildFenced(t)
	cp := testbed.Start(t, testbed.Options{NodeLeaseDurationSeconds: 8,
		Tokens: []testbed.Token{{Token: productKubeToken, User: "fenced-product", UID: "fenced-product", Groups: []string{"system:masters"}}}})
	ctx := t.Context()
	nodes, err := cp.AddNodes(ctx, testbed.NodeSpecs("spl", 4)...)
	require.NoError(t, err)
	var names []string
	for _, n := range nodes {
		names = append(names, n.Name())
	}
	require.NoError(t, cp.WaitNodesReady(ctx, names...))
	sims := startProductSims(t, nodes)
	registerDrivers(t, cp, sims)
	_, err = cp.CreateStatefulSet(ctx, testbed.StatefulSetSpec{Namespace: "app", Name: "db", Replicas: 3,
		Driver: testbed.DriverPowerFlex, AntiAffinity: true})
	require.NoError(t, err)
	pods := runningPods(t, cp, 3)

	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	require.NoError(t, cp.WriteKubeconfig(kc, productKubeToken))
	httpAddr := freeAddr(t)
	base := "http://" + httpAddr
	cfgPath := productConfig(t, dir, httpAddr, kc, sims)
	b, err := os.ReadFile(cfgPath)
	require.NoError(t, err)
	doc := strings.Replace(string(b), "    arrays: [pflex-1, unity-1, pmax-1]\n",
		"    arrays: [pflex-1, unity-1, pmax-1]\n    storagePathLoss: {enabled: true, grace: 6s, maxDisconnected: \"1\"}\n", 1)
	require.Contains(t, doc, "storagePathLoss")
	require.NoError(t, os.WriteFile(cfgPath, []byte(doc), 0o600))
	p := start(t, bin, "run", "--config", cfgPath)
	waitHealthy(t, p, base)
	require.Eventually(t, func() bool {
		st, ok := getStatus(t, base)
		return ok && len(st.Clusters) == 1 && st.Clusters[0].Nodes != nil && st.Clusters[0].Nodes.Healthy == 4
	}, 2*time.Minute, 250*time.Millisecond, "fenced never saw four healthy nodes; log:\n%s", p.stderr)
	require.Contains(t, p.stderr.String(), "storage path loss verdicts on")
	for _, n := range names {
		require.Eventually(t, func() bool {
			return strings.Contains(p.stderr.String(), "learned node identities") &&
				strings.Contains(p.stderr.String(), " node="+n+" arrays=")
		}, time.Minute, 200*time.Millisecond, "identities of %s never learned", n)
	}
	pflex := sims["pflex-1"].srv.Family()
	setSDC := func(node *testbed.Node, connected, io bool) {
		require.NoError(t, pflex.SetSignals(node.Spec.SDCGUID, simcore.Signals{Connected: simcore.Bool(connected), IOActive: simcore.Bool(io)}))
	}
	noFences := func() bool {
		st, ok := getStatus(t, base)
		return ok && len(st.Fences) == 0
	}

	t.Run("array reports every node disconnected: storage storm guard, no fence", func(t *testing.T) {
		for _, n := range nodes {
			setSDC(n, false, false)
		}
		require.Eventually(t, func() bool {
			st, ok := getStatus(t, base)
			return ok && len(st.Clusters[0].StorageStorm) == 1 && st.Clusters[0].StorageStorm[0].Array == "pflex-1" &&
				st.Clusters[0].StorageStorm[0].Reason == "disconnected"
		}, 30*time.Second, 250*time.Millisecond, "storage storm guard never shown; log:\n%s", p.stderr)
		_, metrics := httpGet(t, base+"/metrics")
		assert.Contains(t, metrics, `fenced_storage_storm_guard_active{array="pflex-1",cluster="c1"} 1`)
		require.Never(t, func() bool { return !noFences() }, 12*time.Second, 500*time.Millisecond, "fenced during a storage storm")
		for _, n := range nodes {
			setSDC(n, true, true)
		}
		require.Eventually(t, func() bool {
			st, ok := getStatus(t, base)
			return ok && len(st.Clusters[0].StorageStorm) == 0 && st.Clusters[0].Nodes.Healthy == 4
		}, 30*time.Second, 250*time.Millisecond, "storage storm guard never cleared")
		_, metrics = httpGet(t, base+"/metrics")
		assert.Contains(t, metrics, `fenced_storage_storm_guard_active{array="pflex-1",cluster="c1"} 0`)
		assert.True(t, noFences(), "something was fenced")
		assert.Contains(t, p.stderr.String(), "STORAGE STORM GUARD ACTIVE")
	})

	victim := pods["db-0"].Spec.NodeName
	var vnode *testbed.Node
	for _, n := range nodes {
		if n.Name() == victim {
			vnode = n
		}
	}
	require.NotNil(t, vnode)

	t.Run("disconnected but I/O flowing: no fence", func(t *testing.T) {
		setSDC(vnode, false, true)
		require.Never(t, func() bool { return !noFences() }, 15*time.Second, 500*time.Millisecond, "fenced with I/O flowing")
		setSDC(vnode, true, true)
	})

	t.Run("SDC disconnected with no I/O past the grace: fenced, tainted, pod recreated", func(t *testing.T) {
		var cfgs []arrayclients.Config
		for _, s := range sims {
			cfgs = append(cfgs, s.cfg)
		}
		reg, err := all.New(cfgs, arrayclients.Options{})
		require.NoError(t, err)
		n, err := cp.Client.CoreV1().Nodes().Get(ctx, victim, metav1.GetOptions{})
		require.NoError(t, err)
		csi, err := cp.Client.StorageV1().CSINodes().Get(ctx, victim, metav1.GetOptions{})
		require.NoError(t, err)
		plans := planVictim(t, ctx, reg, kube.NodeInputs(productCluster, n, csi))

		setSDC(vnode, false, false)
		require.Eventually(t, func() bool {
			st, ok := getStatus(t, base)
			f := fenceOf(st, victim)
			return ok && f != nil && f.Phase == "evicted"
		}, 2*time.Minute, 250*time.Millisecond, "fence of %s never reached evicted; log:\n%s", victim, p.stderr)
		st, _ := getStatus(t, base)
		f := fenceOf(st, victim)
		assert.Contains(t, f.Reason, "storage-path-lost")
		for name, plan := range plans {
			a, _ := reg.Get(name)
			v, err := a.Verify(ctx, plan)
			require.NoError(t, err)
			assert.True(t, v.Fenced, "%s still has access on %s: %v", victim, name, v.Remaining)
		}
		n, err = cp.Client.CoreV1().Nodes().Get(ctx, victim, metav1.GetOptions{})
		require.NoError(t, err)
		assert.True(t, nodeHasTaint(n, "node.kubernetes.io/out-of-service"))
		require.Eventually(t, func() bool {
			pod, err := cp.Client.CoreV1().Pods("app").Get(ctx, "db-0", metav1.GetOptions{})
			return err == nil && pod.UID != pods["db-0"].UID && pod.Spec.NodeName != "" &&
				pod.Spec.NodeName != victim && pod.Status.Phase == corev1.PodRunning
		}, 2*time.Minute, 250*time.Millisecond, "db-0 not recreated on another node")
		assert.Regexp(t, `node verdict.* node=`+victim+` state=failed reason=storage-path-lost`, p.stderr.String())
		// Only the victim: the others kept their paths.
		assert.Len(t, st.Fences, 1)
	})

	code, _ := p.stop(t)
	assert.Equal(t, 0, code, p.stderr.String())
}
