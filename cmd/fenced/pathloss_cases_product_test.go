package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
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
	"github.com/fenced-project/fenced/tests/arraysim/powerstore"
	"github.com/fenced-project/fenced/tests/arraysim/simcore"
	"github.com/fenced-project/fenced/tests/csidriver"
	"github.com/fenced-project/fenced/tests/invariants"
	"github.com/fenced-project/fenced/tests/testbed"
)

// pathLossGrace is storagePathLoss.grace in TestProductStoragePathLossCases.
const pathLossGrace = 6 * time.Second

// TestProductStoragePathLossCases runs real `fenced run` processes against
// one test bed and the PowerFlex and PowerStore simulators, with a
// StatefulSet whose volumes are on the PowerStore array. Every node keeps
// renewing its Lease throughout.
//   - Policy off: a node disconnected and idle on both arrays for twice the
//     grace is not fenced.
//   - Policy on (second process, its own ledger): a node disconnected for
//     less than the grace is seen (storage-path-degraded) and not fenced.
//   - The PowerStore API answers every call with an error: the storage
//     storm guard (api-error) shows in /status and the metric, nothing is
//     fenced, and when the errors stop the guard clears and nothing was done.
//   - The PowerStore initiators of db-0's node lose their sessions with no
//     I/O past the grace: fenced on every array (read back), tainted, db-0
//     recreated elsewhere, reason storage-path-lost.
//   - The invariant checker, over the apiserver audit log, both simulators'
//     audit logs and the replica's ledger, finds no violation.
func TestProductStoragePathLossCases(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane, two array simulators and fenced")
	}
	bin := buildFenced(t)
	cp := testbed.Start(t, testbed.Options{NodeLeaseDurationSeconds: 8,
		Tokens: []testbed.Token{{Token: productKubeToken, User: "fenced-product", UID: "fenced-product", Groups: []string{"system:masters"}}}})
	ctx := t.Context()
	nodes, err := cp.AddNodes(ctx, testbed.NodeSpecs("splc", 4)...)
	require.NoError(t, err)
	var names []string
	for _, n := range nodes {
		names = append(names, n.Name())
	}
	require.NoError(t, cp.WaitNodesReady(ctx, names...))
	sims := startPathLossSims(t, nodes)
	registerDrivers(t, cp, sims)
	arrayStart := simStates(t, sims)
	placements := watchPlacements(t, cp)
	_, err = cp.CreateStatefulSet(ctx, testbed.StatefulSetSpec{Namespace: "app", Name: "db", Replicas: 3,
		Driver: testbed.DriverPowerStore, AntiAffinity: true})
	require.NoError(t, err)
	pods := runningPods(t, cp, 3)

	victim := pods["db-0"].Spec.NodeName
	var vnode *testbed.Node
	for _, n := range nodes {
		if n.Name() == victim {
			vnode = n
		}
	}
	require.NotNil(t, vnode)
	pstore, pflex := sims["pstore-1"].srv, sims["pflex-1"].srv
	pstoreHost := powerstore.CSINodeName("", vnode.Spec.MachineID, vnode.Spec.IP)
	setPStore := func(connected, io bool) {
		t.Helper()
		require.NoError(t, pstore.Family().SetSignals(pstoreHost, simcore.Signals{Connected: simcore.Bool(connected), IOActive: simcore.Bool(io)}))
	}
	setPFlex := func(connected, io bool) {
		t.Helper()
		require.NoError(t, pflex.Family().SetSignals(vnode.Spec.SDCGUID, simcore.Signals{Connected: simcore.Bool(connected), IOActive: simcore.Bool(io)}))
	}

	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	require.NoError(t, cp.WriteKubeconfig(kc, productKubeToken))

	t.Run("policy off: disconnected and idle past the grace, no fence", func(t *testing.T) {
		run := startPathLossFenced(t, bin, filepath.Join(dir, "off"), kc, sims, names, false)
		assert.NotContains(t, run.p.stderr.String(), "storage path loss verdicts on")
		setPStore(false, false)
		setPFlex(false, false)
		require.Never(t, func() bool { return !run.noFences(t) }, 2*pathLossGrace, 500*time.Millisecond,
			"fenced with the policy off; log:\n%s", run.p.stderr)
		st, ok := getStatus(t, run.base)
		require.True(t, ok)
		assert.Equal(t, 4, st.Clusters[0].Nodes.Healthy, "%+v", st.Clusters[0].Unhealthy)
		setPStore(true, false)
		setPFlex(true, false)
		code, _ := run.p.stop(t)
		assert.Equal(t, 0, code, run.p.stderr.String())
	})

	run := startPathLossFenced(t, bin, filepath.Join(dir, "on"), kc, sims, names, true)
	require.Contains(t, run.p.stderr.String(), "storage path loss verdicts on")
	base := run.base

	t.Run("disconnected for less than the grace: seen, no fence", func(t *testing.T) {
		began := time.Now()
		setPStore(false, false)
		require.Eventually(t, func() bool {
			st, ok := getStatus(t, base)
			if !ok {
				return false
			}
			for _, n := range st.Clusters[0].Unhealthy {
				if n.Name == victim && n.Verdict == "suspect" && strings.Contains(n.Reason, "storage-path") {
					return true
				}
			}
			return false
		}, pathLossGrace, 100*time.Millisecond, "the lost path of %s was never seen; log:\n%s", victim, run.p.stderr)
		setPStore(true, false)
		lost := time.Since(began)
		t.Logf("%s was disconnected for %s (grace %s)", victim, lost.Round(time.Millisecond), pathLossGrace)
		require.Less(t, lost, pathLossGrace-time.Second, "the test could not reconnect the node well within the grace")
		require.Never(t, func() bool { return !run.noFences(t) }, pathLossGrace+2*time.Second, 500*time.Millisecond,
			"fenced after a loss shorter than the grace; log:\n%s", run.p.stderr)
		require.Eventually(t, func() bool {
			st, ok := getStatus(t, base)
			return ok && st.Clusters[0].Nodes.Healthy == 4
		}, 30*time.Second, 250*time.Millisecond, "%s never healthy again", victim)
	})

	t.Run("array API errors: storage storm guard, no fence, nothing done when it clears", func(t *testing.T) {
		writesBefore := len(pstore.AuditWrites()) + len(pflex.AuditWrites())
		_, err := pstore.AddFaultChecked(simcore.Fault{Kind: simcore.FaultError, Status: 503, Message: "service unavailable"})
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			st, ok := getStatus(t, base)
			return ok && len(st.Clusters[0].StorageStorm) == 1 && st.Clusters[0].StorageStorm[0].Array == "pstore-1" &&
				st.Clusters[0].StorageStorm[0].Reason == "api-error"
		}, 30*time.Second, 250*time.Millisecond, "storage storm guard (api-error) never shown; log:\n%s", run.p.stderr)
		_, metrics := httpGet(t, base+"/metrics")
		assert.Contains(t, metrics, `fenced_storage_storm_guard_active{array="pstore-1",cluster="c1"} 1`)
		require.Never(t, func() bool { return !run.noFences(t) }, pathLossGrace+2*time.Second, 500*time.Millisecond,
			"fenced while the array API errored")
		pstore.ClearFaults()
		require.Eventually(t, func() bool {
			st, ok := getStatus(t, base)
			return ok && len(st.Clusters[0].StorageStorm) == 0 && st.Clusters[0].Nodes.Healthy == 4
		}, 30*time.Second, 250*time.Millisecond, "storage storm guard never cleared; log:\n%s", run.p.stderr)
		_, metrics = httpGet(t, base+"/metrics")
		assert.Contains(t, metrics, `fenced_storage_storm_guard_active{array="pstore-1",cluster="c1"} 0`)
		assert.True(t, run.noFences(t), "something was fenced")
		assert.Equal(t, writesBefore, len(pstore.AuditWrites())+len(pflex.AuditWrites()), "an array was written")
		assert.Contains(t, run.p.stderr.String(), "STORAGE STORM GUARD ACTIVE")
	})

	t.Run("PowerStore sessions lost with no I/O past the grace: fenced, tainted, pod recreated", func(t *testing.T) {
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
		require.Len(t, plans, 2)

		setPStore(false, false)
		require.Eventually(t, func() bool {
			st, ok := getStatus(t, base)
			f := fenceOf(st, victim)
			return ok && f != nil && f.Phase == "evicted"
		}, 2*time.Minute, 250*time.Millisecond, "fence of %s never reached evicted; log:\n%s", victim, run.p.stderr)
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
		assert.Regexp(t, `node verdict.* node=`+victim+` state=failed reason=storage-path-lost`, run.p.stderr.String())
		assert.Len(t, st.Fences, 1, "only %s lost its paths", victim)
	})

	code, _ := run.p.stop(t)
	assert.Equal(t, 0, code, run.p.stderr.String())

	t.Run("invariant checker over the run's evidence", func(t *testing.T) {
		hist, err := invariants.ReplayDataDir(run.dataDir, 10*time.Second)
		require.NoError(t, err)
		in := invariants.Inputs{
			Kube:       map[string][]invariants.KubeEvent{productCluster: readKubeAudit(t, cp.AuditLogPath)},
			Arrays:     map[string][]simcore.AuditEntry{},
			ArrayStart: arrayStart,
			ArrayEnd:   simStates(t, sims),
			Placements: map[string][]invariants.Placement{productCluster: placements()},
			Ledger:     hist,
		}
		for name, s := range sims {
			in.Arrays[name] = s.srv.Audit()
		}
		rep := invariants.Check(in, invariants.Options{FencedUsers: map[string]string{"fenced-product": ""},
			DriverRemotes: []string{csidriver.AuditTag}})
		t.Logf("invariants: %s", rep)
		assert.Positive(t, rep.Checked[invariants.RuleFenceBeforeDelete], "no pod delete or node write by fenced was checked")
		assert.Empty(t, rep.ByRule(invariants.RuleFenceBeforeDelete))
		assert.True(t, rep.OK(), "invariant violations:\n%s", rep)

		// The rule above sees only fenced's own writes; db-0 may have been
		// force-deleted by the pod garbage collector once the node had the
		// out-of-service taint. So check directly that every pod delete (by
		// anyone) of a pod on the victim, and every write of the victim's
		// Node by fenced, came after the last array write and a successful
		// read-back on every array.
		var actions []invariants.KubeEvent
		for _, ev := range in.Kube[productCluster] {
			if !ev.Succeeded() || ev.ObjectRef == nil {
				continue
			}
			ref := *ev.ObjectRef
			switch {
			case ref.Resource == "pods" && ref.Subresource == "" && ev.Verb == "delete" &&
				placedAt(in.Placements[productCluster], ref.Namespace, ref.Name, ev.Received) == victim:
				actions = append(actions, ev)
			case ref.Resource == "nodes" && ref.Name == victim && ev.Verb != "get" && ev.Verb != "list" &&
				ev.Verb != "watch" && ev.User.Username == "fenced-product":
				actions = append(actions, ev)
			}
		}
		require.NotEmpty(t, actions)
		var podDeleted bool
		for _, ev := range actions {
			podDeleted = podDeleted || ev.ObjectRef.Resource == "pods"
			t.Logf("%s %s %s/%s by %s at %s", ev.Verb, ev.ObjectRef.Resource, ev.ObjectRef.Namespace, ev.ObjectRef.Name,
				ev.User.Username, ev.Received.Format(time.RFC3339Nano))
		}
		assert.True(t, podDeleted, "no delete of a pod on %s in the audit log", victim)
		for name, entries := range in.Arrays {
			var lastWrite time.Time
			// The emulated CSI driver's requests (publishing the moved
			// volume to its new node) are not fenced's.
			entries = slices.DeleteFunc(slices.Clone(entries), func(e simcore.AuditEntry) bool { return csidriver.IsDriverRequest(e.Remote) })
			for _, e := range entries {
				if simcore.IsWrite(e.Method) && e.Changed {
					lastWrite = e.Time
				}
			}
			require.False(t, lastWrite.IsZero(), "%s: no fence write", name)
			for _, ev := range actions {
				readBack := false
				for _, e := range entries {
					if !simcore.IsWrite(e.Method) && e.Status >= 200 && e.Status < 300 &&
						e.Time.After(lastWrite) && e.Time.Before(ev.Received) {
						readBack = true
						break
					}
				}
				assert.True(t, ev.Received.After(lastWrite), "%s %s/%s at %s before the last write on %s at %s",
					ev.Verb, ev.ObjectRef.Resource, ev.ObjectRef.Name, ev.Received, name, lastWrite)
				assert.True(t, readBack, "%s %s/%s at %s: no read-back on %s after its last write at %s",
					ev.Verb, ev.ObjectRef.Resource, ev.ObjectRef.Name, ev.Received, name, lastWrite)
			}
		}
	})
}

// pathLossRun is one `fenced run` of TestProductStoragePathLossCases.
type pathLossRun struct {
	p       *proc
	base    string
	dataDir string
}

func (r *pathLossRun) noFences(t *testing.T) bool {
	st, ok := getStatus(t, r.base)
	return ok && len(st.Fences) == 0
}

// startPathLossFenced writes a configuration into dir (storagePathLoss on
// or off, grace pathLossGrace) and starts fenced with it, waiting until it
// sees every node healthy and learned their identities.
func startPathLossFenced(t *testing.T, bin, dir, kubeconfig string, sims map[string]*productSim, nodes []string, enabled bool) *pathLossRun {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o700))
	httpAddr := freeAddr(t)
	tokenFile := filepath.Join(dir, "api-token")
	require.NoError(t, os.WriteFile(tokenFile, []byte(productAPIToken+"\n"), 0o600))
	var arrays strings.Builder
	for _, name := range []string{"pflex-1", "pstore-1"} {
		c := sims[name].cfg
		pw := filepath.Join(dir, name+".password")
		require.NoError(t, os.WriteFile(pw, []byte(c.Password), 0o600))
		fmt.Fprintf(&arrays, "  - name: %s\n    family: %s\n    endpoint: %s\n    username: %s\n    passwordFile: %s\n    requestTimeout: 3s\n    caFile: %s\n",
			name, c.Family, c.Endpoint, c.Username, pw, c.CAFile)
		arrays.WriteString(familyConfig(c))
	}
	dataDir := filepath.Join(dir, "data")
	doc := fmt.Sprintf(`replica:
  id: r1
  dataDir: %s
  raftBindAddress: %s
http:
  listen: %s
  tokenFile: %s
log:
  format: text
  level: info
clusters:
  - name: %s
    kubeconfig: %s
    heartbeatGrace: 10s
    pollInterval: 500ms
    corroboration: kubelet
    settlePeriod: 3s
    stormLimit: "2"
    stormCooldown: 1s
    protectionSelector: fenced.io/protect=true
    arrays: [pflex-1, pstore-1]
    storagePathLoss: {enabled: %t, grace: %s, maxDisconnected: "1"}
arrays:
%s`, dataDir, freeAddr(t), httpAddr, tokenFile, productCluster, kubeconfig, enabled, pathLossGrace, arrays.String())
	cfgPath := filepath.Join(dir, "fenced.yaml")
	require.NoError(t, os.WriteFile(cfgPath, []byte(doc), 0o600))
	r := &pathLossRun{p: start(t, bin, "run", "--config", cfgPath), base: "http://" + httpAddr, dataDir: dataDir}
	waitHealthy(t, r.p, r.base)
	require.Eventually(t, func() bool {
		st, ok := getStatus(t, r.base)
		return ok && len(st.Clusters) == 1 && st.Clusters[0].Nodes != nil && st.Clusters[0].Nodes.Healthy == len(nodes)
	}, 2*time.Minute, 250*time.Millisecond, "fenced never saw every node healthy; log:\n%s", r.p.stderr)
	for _, n := range nodes {
		require.Eventually(t, func() bool {
			return strings.Contains(r.p.stderr.String(), " node="+n+" arrays=")
		}, time.Minute, 200*time.Millisecond, "identities of %s never learned; log:\n%s", n, r.p.stderr)
	}
	return r
}
