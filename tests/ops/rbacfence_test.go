package ops

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fenced-project/fenced/cmd/fenced/status"
	"github.com/fenced-project/fenced/tests/arraysim/simcore"
	"github.com/fenced-project/fenced/tests/e2e"
	"github.com/fenced-project/fenced/tests/testbed"
)

// TestFenceUnderRBACRole runs `fenced run` against the test bed with the
// kubeconfig of the RBAC manifest's ServiceAccount (nothing else) and a
// PowerStore simulator, kills a node, and checks the whole fence goes
// through: fenced on the array and verified, tainted, the StatefulSet pod
// force-deleted and running again elsewhere.
func TestFenceUnderRBACRole(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane: skipped under -short")
	}
	cp := testbed.Start(t, testbed.Options{NodeLeaseDurationSeconds: 4})
	ctx := t.Context()
	applyManifest(ctx, t, cp.Client, filepath.Join(repoRoot(t), "deploy", "kubernetes", "rbac.yaml"))
	var token string
	require.Eventually(t, func() bool {
		s, err := cp.Client.CoreV1().Secrets("fenced").Get(ctx, "fenced-token", metav1.GetOptions{})
		if err == nil {
			token = string(s.Data["token"])
		}
		return token != ""
	}, time.Minute, 200*time.Millisecond)
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	require.NoError(t, cp.WriteKubeconfig(kc, token))

	nodes, err := cp.AddNodes(ctx, testbed.NodeSpecs("rf", 3)...)
	require.NoError(t, err)
	var specs []testbed.NodeSpec
	var names []string
	for _, n := range nodes {
		specs = append(specs, n.Spec)
		names = append(names, n.Name())
	}
	require.NoError(t, cp.WaitNodesReady(ctx, names...))
	fx, err := e2e.MakeFixture(specs, []byte("- name: pstore-1\n  family: powerstore\n  spec: {username: admin, password: Password123!, perNode: {volumes: 2}}\n"))
	require.NoError(t, err)
	arrays, err := e2e.StartArrays(fx, []string{"ops"}, filepath.Join(dir, "certs"), slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	array := arrays["pstore-1"]
	t.Cleanup(array.Close)
	require.NoError(t, e2e.StartDrivers(ctx, arrays, filepath.Join(dir, "certs"), cp))
	pw := filepath.Join(dir, "pstore-1.password")
	require.NoError(t, os.WriteFile(pw, []byte(array.Password+"\n"), 0o600))

	httpAddr := freeAddr(t)
	cfg := filepath.Join(dir, "fenced.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(fmt.Sprintf(`replica:
  id: ops
  dataDir: %s
  raftBindAddress: %s
http:
  listen: %s
log:
  level: debug
clusters:
  - name: bed
    kubeconfig: %s
    heartbeatGrace: 6s
    pollInterval: 500ms
    settlePeriod: 5s
    stormLimit: 1
    corroboration: kubelet
    arrays: [pstore-1]
arrays:
  - name: pstore-1
    family: powerstore
    endpoint: %s
    username: %s
    passwordFile: %s
    caFile: %s
    requestTimeout: 5s
    powerstore: {globalID: %s}
`, filepath.Join(dir, "data"), freeAddr(t), httpAddr, kc, array.Listeners["ops"].URL, array.Username, pw,
		array.Listeners["ops"].CAFile, array.Driver.ArrayID)), 0o600))
	d := startDaemon(t, cfg, httpAddr, "--log-format", "json")

	readStatus := func() (status.Status, error) {
		var st status.Status
		code, body := get(t, d.base+"/status")
		if code != 200 {
			return st, fmt.Errorf("status %d", code)
		}
		return st, json.Unmarshal([]byte(body), &st)
	}
	require.Eventually(t, func() bool {
		code, _ := get(t, d.base+"/readyz")
		return code == 200
	}, 2*time.Minute, 200*time.Millisecond, "never ready:\n%s", tail(d.out.String(), 4000))

	// Two pods on three nodes: the victim's pod has a node to move to.
	_, err = cp.CreateStatefulSet(ctx, testbed.StatefulSetSpec{Namespace: "db", Name: "pg", Replicas: 2, AntiAffinity: true,
		Driver: testbed.DriverPowerStore})
	require.NoError(t, err)
	var victim corev1.Pod
	var n *testbed.Node
	require.Eventually(t, func() bool {
		pods, err := cp.Client.CoreV1().Pods("db").List(ctx, metav1.ListOptions{LabelSelector: "app=pg"})
		if err != nil || len(pods.Items) != 2 {
			return false
		}
		for _, p := range pods.Items {
			if p.Status.Phase != corev1.PodRunning {
				return false
			}
		}
		victim = pods.Items[0]
		for _, node := range nodes {
			if node.Name() == victim.Spec.NodeName {
				n = node
			}
		}
		return n != nil
	}, 2*time.Minute, 200*time.Millisecond)

	// Power the node off: no heartbeat, no kubelet, the array sees nothing.
	require.NoError(t, n.Kill(ctx))
	off := false
	for _, host := range []string{n.Spec.Name, n.Spec.FQDN, n.Spec.IP} {
		if array.Server.Family().SetSignals(host, simcore.Signals{Connected: &off, IOActive: &off}) == nil {
			break
		}
	}

	var fence status.Fence
	require.Eventually(t, func() bool {
		st, err := readStatus()
		if err != nil {
			return false
		}
		for _, f := range st.Fences {
			if f.Node == n.Name() && (f.Phase == "evicted" || f.Phase == "done") {
				fence = f
				return true
			}
		}
		return false
	}, 2*time.Minute, 250*time.Millisecond, "the node was never fenced and evicted:\n%s", tail(d.out.String(), 6000))
	require.NotEmpty(t, fence.Arrays)
	for _, a := range fence.Arrays {
		assert.Equal(t, "verified", a.Step, "array %s", a.Array)
	}

	node, err := cp.Client.CoreV1().Nodes().Get(ctx, n.Name(), metav1.GetOptions{})
	require.NoError(t, err)
	var keys []string
	for _, tt := range node.Spec.Taints {
		keys = append(keys, tt.Key)
	}
	assert.Contains(t, keys, "fenced.io/fenced")
	assert.Contains(t, keys, "node.kubernetes.io/out-of-service")
	require.Eventually(t, func() bool {
		p, err := cp.Client.CoreV1().Pods("db").Get(ctx, victim.Name, metav1.GetOptions{})
		return err == nil && p.UID != victim.UID && p.Spec.NodeName != "" && p.Spec.NodeName != n.Name() && p.Status.Phase == corev1.PodRunning
	}, 2*time.Minute, 250*time.Millisecond, "the pod never ran again elsewhere")

	// Every write fenced made went through the ServiceAccount, and none
	// was refused.
	audit, err := os.ReadFile(cp.AuditLogPath)
	require.NoError(t, err)
	var deletes, forbidden int
	for _, line := range strings.Split(string(audit), "\n") {
		if !strings.Contains(line, fencedSubject) {
			continue
		}
		if strings.Contains(line, `"verb":"delete"`) && strings.Contains(line, `"resource":"pods"`) {
			deletes++
		}
		if strings.Contains(line, `"code":403`) {
			forbidden++
		}
	}
	assert.Positive(t, deletes, "the audit log shows the pod deletion by %s", fencedSubject)
	assert.Zero(t, forbidden, "fenced was refused something it needs")
	assert.NotContains(t, d.out.String(), "is forbidden", "fenced logged a Forbidden error")
	t.Logf("fence %s: %s on %d array(s), %d pod deletion(s) by %s", fence.ID, fence.Phase, len(fence.Arrays), deletes, fencedSubject)
}
