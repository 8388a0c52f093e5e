package e2e

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/cluster/clustertest"
	"github.com/fenced-project/fenced/tests/arraysim/fixture"
	"github.com/fenced-project/fenced/tests/testbed"
)

//go:embed testdata/arrays.yaml
var defaultArrays []byte

// ClusterName is the name of the test bed's cluster in every replica's
// configuration.
const ClusterName = "e2e"

// Options configure a run. The zero value is usable.
type Options struct {
	// Replicas are the replica IDs. Default a, b, c.
	Replicas []string
	// Nodes is the number of worker nodes. Default 5.
	Nodes int
	// Timing tunes the cluster's settings in every replica's configuration.
	Timing ClusterTiming
	// ArraysYAML is the fixture's arrays section. Default testdata/arrays.yaml.
	ArraysYAML []byte
	// NodeLeaseDurationSeconds is passed to the test bed (renewal every
	// quarter of it). Default 40.
	NodeLeaseDurationSeconds int
	// ControlPlaneNice, when not zero, is the nice value the control plane's
	// processes (etcd, API server, controllers, scheduler, kwok) run at from
	// before the nodes are added (see testbed.ControlPlane.SetNice). The
	// bench sets it on request (-control-plane-nice), to keep kwok's Lease
	// renewals on time beside the replicas and simulators on a small
	// machine: a renewal that lags makes a healthy node late.
	ControlPlaneNice int
	// Pprof turns http.pprof on in every replica's configuration: Go's
	// runtime profiles under /debug/pprof/ with the operator token (the
	// bench profiles a storm with it), and the kube-apiserver's own
	// --profiling (its /debug/pprof/ for the admin).
	Pprof bool
	// SecondCluster is the number of worker nodes ("other-N") of a second
	// test bed cluster, SecondClusterName, protected by the same replicas
	// and arrays. Default 0: no second cluster.
	SecondCluster int
	// ExtraClusters are the worker node counts of further test bed
	// clusters, each with its own control plane and protected by the same
	// replicas and arrays: the i-th (from 0) is ExtraClusterName(i), its
	// nodes ExtraClusterNode(i, 1) onwards. They come after ClusterName and
	// SecondClusterName and name no node of either. Default none.
	ExtraClusters []int
	// ControllerManagerArgs are added to every control plane's
	// kube-controller-manager (e.g. a shorter --node-monitor-grace-period,
	// so that a dead node's Ready condition turns Unknown sooner).
	ControllerManagerArgs []string
	// NVMeTCPNodes is how many of ClusterName's first nodes are PowerFlex
	// NVMe/TCP nodes: an NVMe host named by their csi-vxflexos node ID on
	// the PowerFlex simulator instead of an SDC (testbed.NodeSpec.NVMeTCP).
	NVMeTCPNodes int
	// NodeDomain, when set, names ClusterName's nodes by their FQDN:
	// worker-N.<NodeDomain>, as a kubelet on a host whose hostname is its
	// FQDN names its Node. The drivers' node IDs follow their own rules
	// for such names (testbed.NodeSpec.CSINodeIDs).
	NodeDomain string
	// NoArrayAuditFiles leaves the simulators' audit files (arrays/<array>.jsonl
	// in the artifact directory) unwritten: recording them snapshots the
	// whole array around every write, which would set the pace of the
	// bench's runs of hundreds of nodes. Scenario and chaos runs keep them.
	NoArrayAuditFiles bool
	// LightNodes has ClusterName's nodes written by the test bed's light
	// writer instead of kwok (testbed.ControlPlane.AddLightNodes): the same
	// Node, status, CSINode and array hosts, the Ready condition written by
	// the writer, the Leases renewed by a few shared workers. For
	// measurements at rest of thousands of nodes; the node fault methods
	// and workloads need kwok and do not apply.
	LightNodes bool
}

// TB is what the harness needs of a test. *testing.T satisfies it, and so
// does the chaos runner's stand-in (tests/cmd/chaos), so the same harness
// runs a scenario test or a standalone chaos run.
type TB interface {
	require.TestingT
	Helper()
	Cleanup(func())
	TempDir() string
	Logf(format string, args ...any)
	Failed() bool
	ArtifactDir() string
}

var _ TB = (*testing.T)(nil)

// Harness is one running end-to-end setup.
type Harness struct {
	t   TB
	ctx context.Context
	// Dir holds the replicas' directories and the array certificates.
	Dir string
	// CP is the control plane of ClusterName; CPs has every cluster's.
	CP       *testbed.ControlPlane
	CPs      map[string]*testbed.ControlPlane
	Nodes    map[string]*testbed.Node
	Fixture  *fixture.Fixture
	Arrays   map[string]*Array
	Net      *Net
	Replicas map[string]*Replica
	// IDs are the replica IDs in order.
	IDs      []string
	Timeline *Timeline
	// Users maps each replica's Kubernetes user to the replica ID.
	Users map[string]string
	// TokenFile holds the operator API token every replica accepts.
	TokenFile string

	opts        Options
	placements  map[string]*placementRecorder
	nodeCluster map[string]string
	arrayStart  map[string]json.RawMessage
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Start sets everything up for the test and tears it down when the test
// ends. Any error fails the test.
func Start(t TB, opts Options) *Harness {
	t.Helper()
	if len(opts.Replicas) == 0 {
		opts.Replicas = []string{"a", "b", "c"}
	}
	if opts.Nodes == 0 {
		opts.Nodes = 5
	}
	if opts.ArraysYAML == nil {
		opts.ArraysYAML = defaultArrays
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	binary := os.Getenv(BinaryEnv)
	if binary == "" {
		var err error
		binary, err = BuildFenced(ctx, t.TempDir())
		require.NoError(t, err)
	}
	h := &Harness{t: t, ctx: ctx, Dir: t.TempDir(), Replicas: map[string]*Replica{}, IDs: opts.Replicas,
		Timeline: &Timeline{}, Users: map[string]string{}, Nodes: map[string]*testbed.Node{}, opts: opts}

	tokens := map[string]string{}
	var tbTokens []testbed.Token
	for _, id := range opts.Replicas {
		user := "fenced-" + id
		tokens[id] = randomHex(16)
		h.Users[user] = id
		tbTokens = append(tbTokens, testbed.Token{Token: tokens[id], User: user, UID: user, Groups: []string{"system:masters"}})
	}
	h.CPs, h.placements, h.nodeCluster = map[string]*testbed.ControlPlane{}, map[string]*placementRecorder{}, map[string]string{}
	var specs []testbed.NodeSpec
	var apiServerArgs []string
	if opts.Pprof {
		// The test bed turns the API server's profiling off; the
		// later flag wins.
		apiServerArgs = []string{"--profiling=true"}
	}
	for _, c := range h.clusterSpecs() {
		cp, err := testbed.StartControlPlane(ctx, testbed.Options{Tokens: tbTokens, NodeLeaseDurationSeconds: opts.NodeLeaseDurationSeconds,
			ControllerManagerArgs: opts.ControllerManagerArgs, APIServerArgs: apiServerArgs, BuildLog: io.Discard})
		require.NoError(t, err, "start the control plane of %s", c.name)
		t.Cleanup(cp.Stop)
		h.CPs[c.name] = cp
		if opts.ControlPlaneNice != 0 {
			require.NoError(t, cp.SetNice(opts.ControlPlaneNice), "favour the control plane of %s", c.name)
		}
		nodeSpecs := testbed.NodeSpecs(c.prefix, c.nodes)
		if c.name == ClusterName {
			for i := range min(opts.NVMeTCPNodes, len(nodeSpecs)) {
				nodeSpecs[i].NVMeTCP = true
			}
			if opts.NodeDomain != "" {
				for i := range nodeSpecs {
					nodeSpecs[i].Name += "." + opts.NodeDomain
				}
			}
		}
		add := cp.AddNodes
		if opts.LightNodes && c.name == ClusterName {
			add = cp.AddLightNodes
		}
		nodes, err := add(ctx, nodeSpecs...)
		require.NoError(t, err)
		var names []string
		for _, n := range nodes {
			h.Nodes[n.Name()] = n
			h.nodeCluster[n.Name()] = c.name
			specs = append(specs, n.Spec)
			names = append(names, n.Name())
		}
		require.NoError(t, cp.WaitNodesReady(ctx, names...))
		h.placements[c.name] = watchPlacements(ctx, cp.Client)
	}
	h.CP = h.CPs[ClusterName]

	var err error
	h.Fixture, err = MakeFixture(specs, opts.ArraysYAML)
	require.NoError(t, err)
	h.Arrays, err = StartArrays(h.Fixture, opts.Replicas, filepath.Join(h.Dir, "array-certs"), slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, a := range h.Arrays {
			a.Close()
		}
	})
	if !opts.NoArrayAuditFiles {
		require.NoError(t, RecordAudits(h.Arrays, filepath.Join(h.Dir, ArraysDir)))
	}
	cps := make([]*testbed.ControlPlane, 0, len(h.CPs))
	for _, cp := range h.CPs {
		cps = append(cps, cp)
	}
	require.NoError(t, StartDrivers(ctx, h.Arrays, filepath.Join(h.Dir, "array-certs"), cps...))
	h.arrayStart = h.arrayStates()

	h.Net = NewNet()
	t.Cleanup(h.Net.Close)
	require.NoError(t, h.setUpReplicas(binary, tokens))
	t.Cleanup(h.finish)
	for _, id := range h.IDs {
		require.NoError(t, h.Replicas[id].Start())
	}
	return h
}

// setUpReplicas lays out every replica: certificates, proxies,
// kubeconfig, array passwords and configuration.
func (h *Harness) setUpReplicas(binary string, tokens map[string]string) error {
	ca, err := clustertest.NewCA("fenced-e2e")
	if err != nil {
		return fmt.Errorf("create CA: %w", err)
	}
	h.TokenFile = filepath.Join(h.Dir, "api-token")
	if err := os.WriteFile(h.TokenFile, []byte(randomHex(16)+"\n"), 0o600); err != nil {
		return fmt.Errorf("write the API token: %w", err)
	}
	for _, id := range h.IDs {
		r := newReplica(id, h.Dir, binary, h.CP.StartProcess)
		if err := os.MkdirAll(r.DataDir, 0o755); err != nil {
			return err
		}
		if r.RaftAddr, err = clustertest.FreeAddr(); err != nil {
			return err
		}
		httpAddr, err := clustertest.FreeAddr()
		if err != nil {
			return err
		}
		r.HTTPURL = "http://" + httpAddr
		h.Replicas[id] = r
	}
	for _, id := range h.IDs {
		r := h.Replicas[id]
		files, err := ca.WriteFiles(r.Dir, id) // a replica certificate names its replica ID
		if err != nil {
			return err
		}
		cfg := replicaConfig{ID: id, DataDir: r.DataDir, RaftBind: r.RaftAddr, TLSCert: files.CertFile, TLSKey: files.KeyFile,
			TLSCA: files.CAFile, HTTPListen: r.HTTPURL[len("http://"):], TokenFile: h.TokenFile, Pprof: h.opts.Pprof, Timing: h.opts.Timing}
		for _, peer := range h.IDs {
			if peer == id {
				continue
			}
			addr, err := h.Net.Add(raftProxy(id, peer), h.Replicas[peer].RaftAddr)
			if err != nil {
				return err
			}
			cfg.Peers = append(cfg.Peers, peerConfig{ID: peer, RaftAddr: addr, HTTPURL: h.Replicas[peer].HTTPURL})
		}
		for _, c := range h.clusterSpecs() {
			kubeconfig, err := h.writeKubeconfig(id, c.name, tokens[id])
			if err != nil {
				return err
			}
			cfg.Clusters = append(cfg.Clusters, clusterRef{Name: c.name, Kubeconfig: kubeconfig})
		}
		for _, a := range sortedArrays(h.Arrays) {
			l := a.Listeners[id]
			u, err := url.Parse(l.URL)
			if err != nil {
				return err
			}
			addr, err := h.Net.Add(arrayProxy(id, a.Name), u.Host)
			if err != nil {
				return err
			}
			pw := filepath.Join(r.Dir, a.Name+".password")
			if err := os.WriteFile(pw, []byte(a.Password+"\n"), 0o600); err != nil {
				return err
			}
			cfg.Arrays = append(cfg.Arrays, arrayConfig{Name: a.Name, Family: a.Family, Endpoint: "https://" + addr,
				Username: a.Username, PasswordFile: pw, CAFile: l.CAFile, Options: familyOptions(a)})
		}
		if err := cfg.write(r.ConfigPath); err != nil {
			return err
		}
	}
	return nil
}

// arrayStates returns every array's state.
func (h *Harness) arrayStates() map[string]json.RawMessage {
	out := map[string]json.RawMessage{}
	for name, a := range h.Arrays {
		st, err := a.State()
		require.NoError(h.t, err)
		out[name] = st
	}
	return out
}

// finish stops the replicas and, if the test failed, keeps the evidence.
func (h *Harness) finish() {
	for _, id := range h.IDs {
		_ = h.Replicas[id].Stop()
	}
	if h.t.Failed() {
		dir := h.t.ArtifactDir()
		if err := h.saveEvidence(dir, true); err != nil {
			h.t.Logf("save evidence: %v", err)
		}
		h.t.Logf("logs, audit logs, ledgers and the timeline are in %s (run with -artifacts to keep them)", dir)
	}
}

// wait polls cond every 100 ms until it holds or timeout passes; it fails
// the test with what cond last said.
func (h *Harness) wait(timeout time.Duration, what string, cond func() (bool, string)) {
	h.t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		ok, msg := cond()
		if ok {
			return
		}
		last = msg
		if time.Now().After(deadline) {
			require.FailNowf(h.t, "timed out", "waiting %s for %s: %s", timeout, what, last)
		}
		select {
		case <-h.ctx.Done():
			require.FailNow(h.t, "cancelled waiting for "+what)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// SettleArrays takes the arrays' start state again, once the workload
// runs: the volumes the emulated drivers created and published are then
// part of what fenced must leave (or give back) as it found it. Call it
// after deploying, before any fault.
func (h *Harness) SettleArrays() { h.arrayStart = h.arrayStates() }
