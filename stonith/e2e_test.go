package stonith_test

import (
	"net/http"
	"net/http/httptest"
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

	"github.com/fenced-project/fenced/cluster"
	"github.com/fenced-project/fenced/cluster/ledger"
	"github.com/fenced-project/fenced/detector"
	"github.com/fenced-project/fenced/stonith"
	"github.com/fenced-project/fenced/tests/arraysim/simcore"
	"github.com/fenced-project/fenced/tests/csidriver"
	"github.com/fenced-project/fenced/tests/testbed"
)

// TestEndToEnd runs the pipeline with every real part: a kube-apiserver
// with controller manager, scheduler and kwok nodes; PowerFlex, PowerScale
// and Unity simulators driven through the real Dell clients by the
// adapters; a real single-replica Raft group with the ledger; the real
// detector. One node after another: a fence held by an array fault, then
// completed and undone after a reboot; a return without reboot; pause; and
// dry-run.
func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane, three array simulators and a Raft group")
	}
	b := startBed(t, 4)
	ctx := t.Context()
	ids := b.learn()
	_, err := b.cp.CreateStatefulSet(ctx, testbed.StatefulSetSpec{Namespace: "app", Name: "db", Replicas: 3,
		Driver: testbed.DriverPowerFlex, AntiAffinity: true})
	require.NoError(t, err)
	pods := waitRunning(t, b, 3)
	waitAttachedAll(t, b)
	before := map[string]string{}
	for name, s := range b.sims {
		before[name] = s.snapshot(t)
		for node, nodeIDs := range ids {
			require.True(t, hasAccess(t, before[name], nodeIDs[name]), "%s has access on %s before any fence", node, name)
		}
	}

	p := b.startPipeline(false)
	require.Eventually(t, func() bool { return p.runner.Status().Counts[detector.Healthy] == 4 },
		time.Minute, 100*time.Millisecond, "detector never saw the four nodes healthy")

	victim := pods["db-0"].Spec.NodeName
	t.Run("fault on one array holds the taint and the deletes; fence completes when it clears", func(t *testing.T) {
		unity := b.sims["unity-1"].srv
		faultID := unity.AddFault(simcore.Fault{Kind: "error", Method: http.MethodPost, Path: "modifyLun",
			Status: http.StatusServiceUnavailable, Message: "injected: storage processor busy"})
		killAt := time.Now()
		seqs := map[string]int64{}
		for name, s := range b.sims {
			seqs[name] = s.srv.LastSeq()
		}
		require.NoError(t, b.nodes[victim].Kill(ctx))
		require.Eventually(t, func() bool {
			for _, f := range p.ctrl.Status().Fences {
				if f.Node == victim && strings.Contains(f.Blocked, "unity-1") {
					return true
				}
			}
			return false
		}, 90*time.Second, 200*time.Millisecond, "fence of %s never reported blocked on unity-1", victim)
		require.Never(t, func() bool {
			n, err := b.cp.Client.CoreV1().Nodes().Get(ctx, victim, metav1.GetOptions{})
			if err != nil || hasTaint(n, stonith.TaintFenced) || hasTaint(n, stonith.TaintOutOfService) {
				return true
			}
			pod, err := b.cp.Client.CoreV1().Pods("app").Get(ctx, "db-0", metav1.GetOptions{})
			return err != nil || pod.UID != pods["db-0"].UID
		}, 5*time.Second, 200*time.Millisecond, "a taint or a pod delete while unity-1 is not fenced")
		assert.Equal(t, ledger.StateFencing, b.fence(victim).State)
		assert.False(t, hasAccess(t, b.sims["pflex-1"].snapshot(t), ids[victim]["pflex-1"]))
		assert.False(t, hasAccess(t, b.sims["pscale-1"].snapshot(t), ids[victim]["pscale-1"]))
		assert.True(t, hasAccess(t, b.sims["unity-1"].snapshot(t), ids[victim]["unity-1"]))
		requireNodeEvent(t, b, victim, "FenceBlocked")

		require.True(t, unity.RemoveFault(faultID))
		b.waitState(victim, ledger.StateEvicted, 90*time.Second)
		for name, s := range b.sims {
			assert.False(t, hasAccess(t, s.snapshot(t), ids[victim][name]), "%s still has access on %s", victim, name)
		}
		n, err := b.cp.Client.CoreV1().Nodes().Get(ctx, victim, metav1.GetOptions{})
		require.NoError(t, err)
		assert.True(t, hasTaint(n, stonith.TaintFenced))
		assert.True(t, hasTaint(n, stonith.TaintOutOfService))
		require.Eventually(t, func() bool {
			pod, err := b.cp.Client.CoreV1().Pods("app").Get(ctx, "db-0", metav1.GetOptions{})
			return err == nil && pod.UID != pods["db-0"].UID && pod.Spec.NodeName != "" &&
				pod.Spec.NodeName != victim && pod.Status.Phase == corev1.PodRunning
		}, 2*time.Minute, 200*time.Millisecond, "db-0 not recreated on another node")
		requireFenceBeforeDeletes(t, b, victim, killAt, seqs)
	})

	t.Run("reboot unfences: every array as before but for the volume that moved, taints removed", func(t *testing.T) {
		boot, err := b.nodes[victim].Reboot(ctx)
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			f := b.lastClosed(victim)
			return b.fence(victim) == nil && f != nil && f.State == ledger.StateClosed
		}, 2*time.Minute, 200*time.Millisecond, "fence of %s never closed (record %+v)", victim, b.fence(victim))
		assert.Equal(t, boot, b.lastClosed(victim).UnfenceBootID)
		requireRestored(t, b, before, ids, "after the unfence of "+victim)
		n, err := b.cp.Client.CoreV1().Nodes().Get(ctx, victim, metav1.GetOptions{})
		require.NoError(t, err)
		assert.False(t, hasTaint(n, stonith.TaintFenced))
		assert.False(t, hasTaint(n, stonith.TaintOutOfService))
	})

	pods = waitRunning(t, b, 3)
	second := pods["db-1"].Spec.NodeName
	t.Run("return without reboot stays fenced and says why", func(t *testing.T) {
		require.NoError(t, b.nodes[second].Kill(ctx))
		b.waitState(second, ledger.StateEvicted, 90*time.Second)
		require.NoError(t, b.nodes[second].Return(ctx))
		require.Eventually(t, func() bool {
			for _, nr := range p.ctrl.Status().NeedsReboot {
				if nr.Node == second && strings.Contains(nr.Note, "without a reboot") {
					return true
				}
			}
			return false
		}, time.Minute, 200*time.Millisecond, "no needs-reboot line for %s", second)
		requireNodeEvent(t, b, second, "FencedNodeNeedsReboot")
		require.Never(t, func() bool { f := b.fence(second); return f == nil || f.State != ledger.StateEvicted },
			8*time.Second, 200*time.Millisecond, "a node back without a reboot was unfenced")
		for name, s := range b.sims {
			assert.False(t, hasAccess(t, s.snapshot(t), ids[second][name]))
		}
		_, err := b.nodes[second].Reboot(ctx)
		require.NoError(t, err)
		require.Eventually(t, func() bool { return b.fence(second) == nil }, 2*time.Minute, 200*time.Millisecond)
		requireRestored(t, b, before, ids, "after the unfence of "+second)
	})

	// The operator API as the daemon mounts it: behind the group's forwarding.
	tokenFile := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte("operator-token-0123456789"), 0o600))
	auth, err := stonith.NewAuthenticator(tokenFile)
	require.NoError(t, err)
	mux := http.NewServeMux()
	for pattern, h := range stonith.NewAPI(p.ctrl, auth).Routes() {
		mux.Handle(pattern, b.raft.ForwardingHandler(h, cluster.ForwardOptions{}))
	}
	api := httptest.NewServer(mux)
	defer api.Close()
	t.Run("operator actions are refused without credentials", func(t *testing.T) {
		anon := &stonith.Client{BaseURL: api.URL}
		for name, call := range map[string]func() error{
			"fence": func() error {
				_, err := anon.Fence(ctx, stonith.FenceRequest{Cluster: clusterName, Node: victim, Reason: "x"})
				return err
			},
			"unfence": func() error {
				_, err := anon.Unfence(ctx, stonith.UnfenceRequest{Cluster: clusterName, Node: victim, Reason: "x", Force: true})
				return err
			},
			"pause":  func() error { _, err := anon.Pause(ctx, stonith.PauseRequest{Reason: "x"}); return err },
			"resume": func() error { _, err := anon.Resume(ctx, stonith.PauseRequest{Reason: "x"}); return err },
		} {
			var apiErr *stonith.APIError
			require.ErrorAs(t, call(), &apiErr, name)
			assert.Equal(t, http.StatusUnauthorized, apiErr.StatusCode, name)
		}
		assert.Nil(t, b.fence(victim))
	})

	op := &stonith.Client{BaseURL: api.URL, Token: "operator-token-0123456789", Operator: "e2e"}
	pods = waitRunning(t, b, 3)
	third := pods["db-2"].Spec.NodeName
	t.Run("pause blocks new fences", func(t *testing.T) {
		_, err := op.Pause(ctx, stonith.PauseRequest{Cluster: clusterName, Reason: "array firmware upgrade"})
		require.NoError(t, err)
		require.NoError(t, b.nodes[third].Kill(ctx))
		require.Eventually(t, func() bool {
			for _, h := range p.ctrl.Status().Held {
				if h.Node == third && strings.Contains(h.Note, "paused") {
					return true
				}
			}
			return false
		}, 90*time.Second, 200*time.Millisecond, "failed node %s not reported held by the pause", third)
		require.Never(t, func() bool { return b.fence(third) != nil }, 5*time.Second, 200*time.Millisecond)
	})
	p.stop()

	t.Run("dry-run decides and reports, writes nothing", func(t *testing.T) {
		dry := b.startPipeline(true)
		_, err := op.Resume(ctx, stonith.PauseRequest{Cluster: clusterName, Reason: "upgrade done"})
		var apiErr *stonith.APIError
		require.ErrorAs(t, err, &apiErr, "the old pipeline's API is gone with its leadership")
		res, err := dry.ctrl.SetPause(ctx, "e2e", stonith.PauseRequest{Cluster: clusterName, Reason: "upgrade done"}, false)
		if err != nil { // the new pipeline may not lead yet
			require.Eventually(t, func() bool {
				res, err = dry.ctrl.SetPause(ctx, "e2e", stonith.PauseRequest{Cluster: clusterName, Reason: "upgrade done"}, false)
				return err == nil
			}, 30*time.Second, 100*time.Millisecond)
		}
		require.Contains(t, res.Message, "resumed")
		since := time.Now()
		seqs := map[string]int64{}
		for name, s := range b.sims {
			seqs[name] = s.srv.LastSeq()
		}
		require.Eventually(t, func() bool {
			for _, d := range dry.ctrl.Status().DryRun {
				if d.Node == third && len(d.Report.Plans) == 3 && slices.Contains(d.Report.WouldDelete, "app/db-2") {
					return true
				}
			}
			return false
		}, 90*time.Second, 200*time.Millisecond, "no dry-run report for %s", third)
		require.Never(t, func() bool { return b.fence(third) != nil }, 5*time.Second, 200*time.Millisecond)
		for name, s := range b.sims {
			for _, e := range s.srv.AuditSince(seqs[name]) {
				assert.False(t, simcore.IsWrite(e.Method) || e.Changed, "dry-run wrote to %s: %s %s", name, e.Method, e.Path)
			}
			assert.Equal(t, hasAccess(t, before[name], ids[third][name]), hasAccess(t, s.snapshot(t), ids[third][name]))
		}
		events, err := b.cp.AuditEvents(testbed.AuditFilter{Since: since, User: fencedUser})
		require.NoError(t, err)
		for _, e := range events {
			assert.Contains(t, []string{"get", "list", "watch"}, e.Verb, "dry-run wrote to the API server: %s", e)
		}
		dry.stop()
	})
}

func hasTaint(n *corev1.Node, key string) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == key })
}

func waitRunning(t *testing.T, b *bed, want int) map[string]corev1.Pod {
	t.Helper()
	var out map[string]corev1.Pod
	require.Eventually(t, func() bool {
		list, err := b.cp.Client.CoreV1().Pods("app").List(t.Context(), metav1.ListOptions{LabelSelector: "app=db"})
		if err != nil {
			return false
		}
		out = map[string]corev1.Pod{}
		for _, p := range list.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				out[p.Name] = p
			}
		}
		return len(out) == want
	}, 2*time.Minute, 200*time.Millisecond, "statefulset db not running with %d pods", want)
	return out
}

func requireNodeEvent(t *testing.T, b *bed, node, reason string) {
	t.Helper()
	require.Eventually(t, func() bool {
		list, err := b.cp.Client.CoreV1().Events("default").List(t.Context(), metav1.ListOptions{
			FieldSelector: "involvedObject.name=" + node + ",reason=" + reason})
		return err == nil && len(list.Items) > 0
	}, 30*time.Second, 200*time.Millisecond, "no %s event on node %s", reason, node)
}

// requireFenceBeforeDeletes checks invariant 1 on the two witnesses: in
// the apiserver's audit log, the first pod delete in the namespace or change
// fenced made to the node; in each simulator's audit log, the array's last
// state change (the fence) and a successful read-back after it, both before
// that first write.
func requireFenceBeforeDeletes(t *testing.T, b *bed, node string, since time.Time, seqs map[string]int64) {
	t.Helper()
	events, err := b.cp.AuditEvents(testbed.AuditFilter{Since: since})
	require.NoError(t, err)
	var firstWrite time.Time
	deletes, taints := 0, 0
	for _, e := range events {
		ref := e.ObjectRef
		if ref == nil {
			continue
		}
		podDelete := e.Verb == "delete" && ref.Resource == "pods" && ref.Namespace == "app"
		nodeWrite := ref.Resource == "nodes" && ref.Name == node && ref.Subresource == "" &&
			e.User.Username == fencedUser && (e.Verb == "patch" || e.Verb == "update")
		if !podDelete && !nodeWrite {
			continue
		}
		if podDelete {
			deletes++
		} else {
			taints++
		}
		if firstWrite.IsZero() || e.Received.Before(firstWrite) {
			firstWrite = e.Received
		}
	}
	require.Positive(t, deletes, "no pod delete in the audit log")
	require.Positive(t, taints, "no taint write in the audit log")
	for name, s := range b.sims {
		// fenced's requests only: the emulated CSI drivers' (tagged) are
		// no fence write nor read-back, and the taint itself makes the
		// attach-detach controller unpublish the node's volumes through
		// them after the first API write.
		var entries []simcore.AuditEntry
		for _, e := range s.srv.AuditSince(seqs[name]) {
			if !csidriver.IsDriverRequest(e.Remote) {
				entries = append(entries, e)
			}
		}
		last := -1
		for i, e := range entries {
			if e.Changed {
				last = i
			}
		}
		require.NotEqual(t, -1, last, "no fence write on %s", name)
		require.True(t, entries[last].Time.Before(firstWrite), "%s changed at %s, after the first API write at %s",
			name, entries[last].Time.Format(time.RFC3339Nano), firstWrite.Format(time.RFC3339Nano))
		readBack := false
		for _, e := range entries[last+1:] {
			if e.Method == http.MethodGet && e.Status == http.StatusOK && e.Time.Before(firstWrite) {
				readBack = true
			}
		}
		assert.True(t, readBack, "no read-back of %s between its last fence write and the first API write", name)
	}
}
