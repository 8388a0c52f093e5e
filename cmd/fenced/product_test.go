package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
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
	"github.com/fenced-project/fenced/cmd/fenced/status"
	"github.com/fenced-project/fenced/kube"
	"github.com/fenced-project/fenced/tests/arraysim/fixture"
	"github.com/fenced-project/fenced/tests/arraysim/powerflex"
	"github.com/fenced-project/fenced/tests/arraysim/powermax"
	"github.com/fenced-project/fenced/tests/arraysim/simcore"
	"github.com/fenced-project/fenced/tests/arraysim/unity"
	"github.com/fenced-project/fenced/tests/csidriver"
	"github.com/fenced-project/fenced/tests/testbed"
)

const (
	productAPIToken  = "product-test-api-token-0123456789"
	productKubeToken = "product-test-kube-token-0123456789"
	productCluster   = "c1"
	pmaxSymmetrixID  = "000197900046"
	pmaxPrefix       = "TST"
)

// productSim is one simulator served over HTTPS with its configuration.
type productSim struct {
	srv *simcore.Server
	cfg arrayclients.Config
}

// startProductSims serves PowerFlex, Unity and PowerMax simulators that
// know exactly the test bed's nodes, each node with volumes on all three.
func startProductSims(t *testing.T, nodes []*testbed.Node) map[string]*productSim {
	t.Helper()
	var doc strings.Builder
	doc.WriteString("nodes:\n")
	for _, n := range nodes {
		s := n.Spec
		fmt.Fprintf(&doc, "  - {name: %s, ip: %s, fqdn: %s, machineID: %s, sdcGUID: %s, iqn: %q, wwpns: [%q]}\n",
			s.Name, s.IP, s.FQDN, s.MachineID, s.SDCGUID, s.IQN, s.WWPNs[0])
	}
	fmt.Fprintf(&doc, `arrays:
  - {name: pflex-1, family: powerflex, spec: {systems: [{id: 1a2b3c4d5e6f7a8b, name: sys-1}], perNode: {volumes: 2}}}
  - {name: unity-1, family: unity, spec: {username: admin, password: unity-secret, generate: {lunsPerNode: 2}}}
  - {name: pmax-1, family: powermax, spec: {symmetrixID: %q, username: smc, password: smc-secret, generate: {clusterPrefix: %s, volumesPerNode: 2}}}
`, pmaxSymmetrixID, pmaxPrefix)
	fx, err := fixture.Parse([]byte(doc.String()))
	require.NoError(t, err, doc.String())
	out := map[string]*productSim{}
	for _, a := range fx.Arrays {
		var fam simcore.Family
		cfg := arrayclients.Config{Name: a.Name, RequestTimeout: 3 * time.Second}
		switch a.Family {
		case fixture.PowerFlex:
			s, err := powerflex.New(&a.Spec, fx.Nodes)
			require.NoError(t, err)
			fam = s
			cfg.Family, cfg.SystemID = arrayclients.PowerFlex, "1a2b3c4d5e6f7a8b"
			cfg.Username, cfg.Password = s.Credentials()
		case fixture.Unity:
			s, err := unity.New(&a.Spec, fx.Nodes)
			require.NoError(t, err)
			fam = s
			cfg.Family, cfg.Username, cfg.Password, cfg.Insecure = arrayclients.Unity, "admin", "unity-secret", true
		case fixture.PowerMax:
			s, err := powermax.New(&a.Spec, fx.Nodes)
			require.NoError(t, err)
			fam = s
			cfg.Family, cfg.Username, cfg.Password = arrayclients.PowerMax, "smc", "smc-secret"
			cfg.SymmetrixID, cfg.PowerMaxClusterPrefix = pmaxSymmetrixID, pmaxPrefix
		}
		srv := simcore.New(a.Name, fam, nil)
		l, err := simcore.Serve(srv, "127.0.0.1:0", true, t.TempDir())
		require.NoError(t, err)
		t.Cleanup(func() { _ = l.Close() })
		cfg.Endpoint = l.URL
		if !cfg.Insecure {
			cfg.CAFile = l.CAFile
		}
		out[a.Name] = &productSim{srv: srv, cfg: cfg}
	}
	return out
}

// registerDrivers starts the emulated CSI driver of every simulator whose
// family has one and registers it with the control plane, so the test
// bed's volumes are real volumes on the simulators; the identifier the
// driver writes into handles lands in the array's configuration
// (cfg.ArrayIDs).
func registerDrivers(t *testing.T, cp *testbed.ControlPlane, sims map[string]*productSim) {
	t.Helper()
	for _, s := range sims {
		e, err := csidriver.ForSim(t.Context(), s.srv, s.cfg.Username, s.cfg.Password, t.TempDir())
		if errors.Is(err, csidriver.ErrUnsupported) {
			continue
		}
		require.NoError(t, err)
		t.Cleanup(func() { _ = e.Close() })
		cp.RegisterCSIController(e)
		s.cfg.ArrayIDs = []string{e.ArrayID}
	}
}

// familyConfig is the family section of an array's configuration: the
// identifiers the driver's handles name it by.
func familyConfig(c arrayclients.Config) string {
	switch c.Family {
	case arrayclients.PowerFlex:
		return fmt.Sprintf("    powerflex: {systemID: %s}\n", c.SystemID)
	case arrayclients.PowerMax:
		return fmt.Sprintf("    powermax: {symmetrixID: %q, clusterPrefix: %s}\n", c.SymmetrixID, c.PowerMaxClusterPrefix)
	case arrayclients.PowerStore:
		if len(c.ArrayIDs) > 0 {
			return fmt.Sprintf("    powerstore: {globalID: %s}\n", c.ArrayIDs[0])
		}
	}
	return ""
}

// productConfig writes fenced's configuration for the test bed and the
// simulators, with the API token in a file next to it.
func productConfig(t *testing.T, dir, httpAddr, kubeconfig string, sims map[string]*productSim) string {
	t.Helper()
	tokenFile := filepath.Join(dir, "api-token")
	require.NoError(t, os.WriteFile(tokenFile, []byte(productAPIToken+"\n"), 0o600))
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
`, filepath.Join(dir, "data"), freeAddr(t), httpAddr, tokenFile) + productClusters(t, dir, kubeconfig, sims)
	p := filepath.Join(dir, "fenced.yaml")
	require.NoError(t, os.WriteFile(p, []byte(doc), 0o600))
	return p
}

// productClusters is the clusters and arrays sections of fenced's
// configuration for the test bed and the simulators.
func productClusters(t *testing.T, dir, kubeconfig string, sims map[string]*productSim) string {
	t.Helper()
	var arrays strings.Builder
	for _, name := range []string{"pflex-1", "unity-1", "pmax-1"} {
		c := sims[name].cfg
		pw := filepath.Join(dir, name+".password")
		require.NoError(t, os.WriteFile(pw, []byte(c.Password), 0o600))
		fmt.Fprintf(&arrays, "  - name: %s\n    family: %s\n    endpoint: %s\n    username: %s\n    passwordFile: %s\n    requestTimeout: 3s\n",
			name, c.Family, c.Endpoint, c.Username, pw)
		if c.CAFile != "" {
			fmt.Fprintf(&arrays, "    caFile: %s\n", c.CAFile)
		} else {
			arrays.WriteString("    insecure: true\n")
		}
		arrays.WriteString(familyConfig(c))
	}
	return fmt.Sprintf(`clusters:
  - name: %s
    kubeconfig: %s
    heartbeatGrace: 10s
    pollInterval: 500ms
    corroboration: kubelet
    settlePeriod: 3s
    stormLimit: "2"
    stormCooldown: 1s
    protectionSelector: fenced.io/protect=true
    arrays: [pflex-1, unity-1, pmax-1]
arrays:
%s`, productCluster, kubeconfig, arrays.String())
}

// getStatus reads /status.
func getStatus(t *testing.T, base string) (status.Status, bool) {
	t.Helper()
	resp, err := http.Get(base + "/status")
	if err != nil {
		return status.Status{}, false
	}
	defer resp.Body.Close()
	var st status.Status
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&st) != nil {
		return status.Status{}, false
	}
	return st, true
}

func fenceOf(st status.Status, node string) *status.Fence {
	for i, f := range st.Fences {
		if f.Node == node {
			return &st.Fences[i]
		}
	}
	return nil
}

// cli runs the built binary and returns its exit code and output.
func cli(t *testing.T, bin string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "FENCED_ADDR=", "FENCED_TOKEN_FILE=")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), string(out)
	}
	require.NoError(t, err)
	return 0, string(out)
}

// wantedVolumes returns the volume IDs Kubernetes has on the node: those
// of its VolumeAttachments that are attached and not being deleted. A
// volume being attached (its pod came back to the node after the unfence)
// is left out: the driver's publish, not the unfence, gives it back, and
// it may not have happened yet.
func wantedVolumes(t *testing.T, ctx context.Context, cp *testbed.ControlPlane, node string) []string {
	t.Helper()
	vas, err := cp.Client.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	var out []string
	for _, va := range vas.Items {
		if va.Spec.NodeName != node || va.DeletionTimestamp != nil || !va.Status.Attached || va.Spec.Source.PersistentVolumeName == nil {
			continue
		}
		pv, err := cp.Client.CoreV1().PersistentVolumes().Get(ctx, *va.Spec.Source.PersistentVolumeName, metav1.GetOptions{})
		require.NoError(t, err)
		if pv.Spec.CSI != nil {
			h := pv.Spec.CSI.VolumeHandle
			out = append(out, h[strings.LastIndexAny(h, "-/")+1:])
		}
	}
	return out
}

// volumesAttached reports whether every PersistentVolumeClaim of the pod is
// bound and its volume attached (VolumeAttachment status) to the pod's node.
func volumesAttached(ctx context.Context, cp *testbed.ControlPlane, ns, name string) bool {
	pod, err := cp.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil || pod.Spec.NodeName == "" {
		return false
	}
	vas, err := cp.Client.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
	if err != nil {
		return false
	}
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim == nil {
			continue
		}
		pvc, err := cp.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, v.PersistentVolumeClaim.ClaimName, metav1.GetOptions{})
		if err != nil || pvc.Spec.VolumeName == "" {
			return false
		}
		attached := false
		for _, va := range vas.Items {
			src := va.Spec.Source.PersistentVolumeName
			if src != nil && *src == pvc.Spec.VolumeName && va.Spec.NodeName == pod.Spec.NodeName &&
				va.Status.Attached && va.DeletionTimestamp == nil {
				attached = true
			}
		}
		if !attached {
			return false
		}
	}
	return true
}

// planVictim reads, through the real Dell clients, what a fence of the node
// removes on each array.
func planVictim(t *testing.T, ctx context.Context, reg *arrayclients.Registry, in arrayclients.Node) map[string]arrayclients.Plan {
	t.Helper()
	plans := map[string]arrayclients.Plan{}
	for _, a := range reg.Adapters() {
		id, err := a.Resolve(ctx, in)
		require.NoError(t, err, "resolve %s on %s", in.Name, a.Name())
		p, err := a.Plan(ctx, id, nil)
		require.NoError(t, err, "plan %s on %s", in.Name, a.Name())
		require.NotEqual(t, "null", string(p.Entries), "%s has nothing to fence on %s", in.Name, a.Name())
		plans[a.Name()] = p
	}
	return plans
}

// TestProductOneReplica runs one real `fenced run` process with every part
// wired against the test bed (kube-apiserver, controller manager,
// scheduler, kwok nodes) and PowerFlex, Unity and PowerMax simulators: a
// killed node is fenced on all three (read back through the Dell clients),
// tainted, its StatefulSet pod recreated elsewhere, and the ledger record
// reaches evicted; then the operator CLI: 401 without a token, pause,
// fence, unfence --force, resume, an unknown cluster, status; then SIGTERM.
func TestProductOneReplica(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane, three array simulators and fenced")
	}
	bin := buildFenced(t)
	cp := testbed.Start(t, testbed.Options{NodeLeaseDurationSeconds: 8,
		Tokens: []testbed.Token{{Token: productKubeToken, User: "fenced-product", UID: "fenced-product", Groups: []string{"system:masters"}}}})
	ctx := t.Context()
	nodes, err := cp.AddNodes(ctx, testbed.NodeSpecs("prod", 4)...)
	require.NoError(t, err)
	byName := map[string]*testbed.Node{}
	var names []string
	for _, n := range nodes {
		byName[n.Name()] = n
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
	p := start(t, bin, "run", "--config", cfgPath)
	waitHealthy(t, p, base)

	require.Eventually(t, func() bool {
		code, _ := httpGet(t, base+"/readyz")
		st, ok := getStatus(t, base)
		return code == http.StatusOK && ok && len(st.Clusters) == 1 && st.Clusters[0].Nodes != nil &&
			st.Clusters[0].Nodes.Healthy == 4 && len(st.Arrays) == 3 && st.Arrays[0].Reachable
	}, 2*time.Minute, 250*time.Millisecond, "fenced never ready with four healthy nodes; log:\n%s", p.stderr)
	for _, n := range names {
		require.Eventually(t, func() bool {
			for _, line := range strings.Split(p.stderr.String(), "\n") {
				if strings.Contains(line, "learned node identities") && strings.Contains(line, " node="+n+" ") {
					return true
				}
			}
			return false
		}, time.Minute, 200*time.Millisecond, "identities of %s never learned; log:\n%s", n, p.stderr)
	}
	// /status counts unprotected nodes at the pipeline's next pass, a
	// moment after the identities are learned.
	require.Eventually(t, func() bool {
		st, ok := getStatus(t, base)
		return ok && len(st.Clusters) > 0 && st.Clusters[0].Nodes != nil && st.Clusters[0].Nodes.Unprotected == 0
	}, time.Minute, 200*time.Millisecond, "every node's identities are learned, yet /status still counts unprotected nodes")

	// The test's own view of the arrays, through the real Dell clients.
	var cfgs []arrayclients.Config
	for _, s := range sims {
		cfgs = append(cfgs, s.cfg)
	}
	reg, err := all.New(cfgs, arrayclients.Options{})
	require.NoError(t, err)
	inputs := func(node string) arrayclients.Node {
		n, err := cp.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		require.NoError(t, err)
		csi, err := cp.Client.StorageV1().CSINodes().Get(ctx, node, metav1.GetOptions{})
		require.NoError(t, err)
		return kube.NodeInputs(productCluster, n, csi)
	}
	requireFenced := func(plans map[string]arrayclients.Plan, fenced bool) {
		t.Helper()
		for name, plan := range plans {
			a, _ := reg.Get(name)
			if fenced {
				v, err := a.Verify(ctx, plan)
				require.NoError(t, err)
				assert.True(t, v.Fenced, "%s still has access on %s: %v", plan.Identity.Node, name, v.Remaining)
				continue
			}
			// Restored as the unfence reconciles (invariant 5): every entry
			// back but the StatefulSet volumes Kubernetes no longer wants on
			// the node (its pod moved or waits elsewhere), which stay off it.
			v, err := a.Verify(ctx, plan)
			require.NoError(t, err)
			wanted := wantedVolumes(t, ctx, cp, plan.Identity.Node)
			for _, m := range v.Missing {
				kubeVolume := strings.Contains(m, "k8s-")
				for _, id := range wanted {
					kubeVolume = kubeVolume && !strings.Contains(m, id)
				}
				assert.True(t, kubeVolume, "%s not restored on %s: %s", plan.Identity.Node, name, m)
			}
		}
	}

	victim := pods["db-0"].Spec.NodeName
	t.Run("a killed node is fenced on every array, tainted, evicted; its pod runs elsewhere", func(t *testing.T) {
		plans := planVictim(t, ctx, reg, inputs(victim))
		require.NoError(t, byName[victim].Kill(ctx))
		require.Eventually(t, func() bool {
			st, ok := getStatus(t, base)
			f := fenceOf(st, victim)
			return ok && f != nil && f.Phase == "evicted"
		}, 2*time.Minute, 250*time.Millisecond, "fence of %s never reached evicted; log:\n%s", victim, p.stderr)
		requireFenced(plans, true)
		hosts := pmaxHosts(t, sims["pmax-1"].srv)
		assert.Empty(t, hosts["csi-node-"+pmaxPrefix+"-"+victim], "PowerMax host of %s still has initiators", victim)
		n, err := cp.Client.CoreV1().Nodes().Get(ctx, victim, metav1.GetOptions{})
		require.NoError(t, err)
		assert.True(t, nodeHasTaint(n, "node.kubernetes.io/out-of-service"))
		require.Eventually(t, func() bool {
			pod, err := cp.Client.CoreV1().Pods("app").Get(ctx, "db-0", metav1.GetOptions{})
			return err == nil && pod.UID != pods["db-0"].UID && pod.Spec.NodeName != "" &&
				pod.Spec.NodeName != victim && pod.Status.Phase == corev1.PodRunning
		}, 2*time.Minute, 250*time.Millisecond, "db-0 not recreated on another node")
		// A real kubelet starts db-0 only once its volume is attached to
		// the new node; kwok reports it Running at once. Wait for the
		// attachment as a real node would, so that the operator fence
		// below does not run into an attach still under way.
		require.Eventually(t, func() bool { return volumesAttached(ctx, cp, "app", "db-0") }, 2*time.Minute, 250*time.Millisecond,
			"the volume of the new db-0 never attached to its node")
		code, out := cli(t, bin, "status", "--addr", base)
		require.Equal(t, 0, code, out)
		t.Logf("fenced status:\n%s", out)
		assert.Contains(t, out, "Fences:")
		assert.Regexp(t, victim+`\s+fence\s+verdict\s+evicted`, out)
	})

	other := ""
	for _, n := range names {
		if n != victim {
			other = n
			break
		}
	}
	t.Run("operator CLI: 401 without a token, pause, fence, unfence, resume", func(t *testing.T) {
		code, out := cli(t, bin, "pause", "--addr", base, "--reason", "array upgrade")
		assert.Equal(t, exitFailure, code)
		assert.Contains(t, out, "not authorized")

		token := filepath.Join(dir, "api-token")
		code, out = cli(t, bin, "pause", "--addr", base, "--token-file", token, "--reason", "array upgrade", "--operator", "alice")
		require.Equal(t, 0, code, out)
		assert.Contains(t, out, "fencing paused for all clusters")
		st, ok := getStatus(t, base)
		require.True(t, ok)
		require.NotNil(t, st.Raft)
		assert.True(t, st.Raft.FencingPaused)
		assert.True(t, st.Clusters[0].Paused)

		code, out = cli(t, bin, "fence", "ghost", "--addr", base, "--token-file", token, "--cluster", "nope", "--reason", "test")
		assert.Equal(t, exitFailure, code)
		assert.Contains(t, out, `unknown cluster: "nope"`)

		plans := planVictim(t, ctx, reg, inputs(other))
		code, out = cli(t, bin, "fence", other, "--addr", base, "--token-file", token, "--cluster", productCluster,
			"--reason", "operator test", "--operator", "alice")
		require.Equal(t, 0, code, out)
		assert.Contains(t, out, "fence opened")
		require.Eventually(t, func() bool {
			st, ok := getStatus(t, base)
			f := fenceOf(st, other)
			return ok && f != nil && f.Phase == "evicted" && f.Origin == "operator" && f.Operator == "token/alice"
		}, 2*time.Minute, 250*time.Millisecond, "operator fence of %s never reached evicted; log:\n%s", other, p.stderr)
		requireFenced(plans, true)

		code, out = cli(t, bin, "unfence", other, "--addr", base, "--token-file", token, "--cluster", productCluster)
		assert.Equal(t, exitFailure, code, "unfence without a reboot or --force: %s", out)
		assert.Contains(t, out, "has not rebooted")
		code, out = cli(t, bin, "unfence", other, "--addr", base, "--token-file", token, "--cluster", productCluster,
			"--force", "--reason", "operator test done")
		assert.Equal(t, exitUsage, code, "--force without --yes and nothing typed: %s", out)
		assert.Contains(t, out, "not confirmed: nothing done")
		code, out = cli(t, bin, "unfence", other, "--addr", base, "--token-file", token, "--cluster", productCluster,
			"--force", "--yes", "--reason", "operator test done")
		require.Equal(t, 0, code, out)
		require.Eventually(t, func() bool {
			st, ok := getStatus(t, base)
			f := fenceOf(st, other)
			return ok && f != nil && f.Phase == "closed"
		}, 2*time.Minute, 250*time.Millisecond, "fence of %s never closed; log:\n%s", other, p.stderr)
		requireFenced(plans, false)
		n, err := cp.Client.CoreV1().Nodes().Get(ctx, other, metav1.GetOptions{})
		require.NoError(t, err)
		assert.False(t, nodeHasTaint(n, "node.kubernetes.io/out-of-service"))

		// A resume ends the caller's own pause: alice's.
		code, out = cli(t, bin, "resume", "--addr", base, "--token-file", token)
		require.NotEqual(t, 0, code, out)
		assert.Contains(t, out, "hold no pause")
		assert.Contains(t, out, "every cluster by token/alice")
		code, out = cli(t, bin, "resume", "--addr", base, "--token-file", token, "--operator", "alice")
		require.Equal(t, 0, code, out)
		assert.Contains(t, out, "nothing is paused")
		st, ok = getStatus(t, base)
		require.True(t, ok)
		assert.False(t, st.Raft.FencingPaused)
	})

	t.Run("SIGTERM stops within five seconds", func(t *testing.T) {
		code, took := p.stop(t)
		assert.Equal(t, 0, code, p.stderr.String())
		assert.Less(t, took, 5*time.Second)
		assert.Contains(t, p.stderr.String(), "stopped leading the fencing pipeline")
	})
}

// pmaxHosts returns each PowerMax host's initiators from the simulator.
func pmaxHosts(t *testing.T, srv *simcore.Server) map[string][]string {
	t.Helper()
	b, err := json.Marshal(srv.Family().Snapshot())
	require.NoError(t, err)
	var s struct {
		Hosts []struct {
			ID         string   `json:"hostId"`
			Initiators []string `json:"initiator"`
		} `json:"hosts"`
	}
	require.NoError(t, json.Unmarshal(b, &s))
	out := map[string][]string{}
	for _, h := range s.Hosts {
		out[h.ID] = h.Initiators
	}
	return out
}

func nodeHasTaint(n *corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

// runningPods waits for the StatefulSet db to run want pods.
func runningPods(t *testing.T, cp *testbed.ControlPlane, want int) map[string]corev1.Pod {
	t.Helper()
	var out map[string]corev1.Pod
	require.Eventually(t, func() bool {
		list, err := cp.Client.CoreV1().Pods("app").List(t.Context(), metav1.ListOptions{LabelSelector: "app=db"})
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
