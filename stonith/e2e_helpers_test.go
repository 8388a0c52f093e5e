package stonith_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dell/gopowerstore"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/arrayclients/all"
	"github.com/fenced-project/fenced/cluster"
	"github.com/fenced-project/fenced/cluster/clustertest"
	"github.com/fenced-project/fenced/cluster/ledger"
	"github.com/fenced-project/fenced/detector"
	"github.com/fenced-project/fenced/kube"
	"github.com/fenced-project/fenced/stonith"
	"github.com/fenced-project/fenced/tests/arraysim/fixture"
	"github.com/fenced-project/fenced/tests/arraysim/powerflex"
	"github.com/fenced-project/fenced/tests/arraysim/powerscale"
	"github.com/fenced-project/fenced/tests/arraysim/powerstore"
	"github.com/fenced-project/fenced/tests/arraysim/simcore"
	"github.com/fenced-project/fenced/tests/arraysim/unity"
	"github.com/fenced-project/fenced/tests/csidriver"
	"github.com/fenced-project/fenced/tests/testbed"
)

// fencedToken is the API server token fenced uses in the end-to-end test,
// so the audit log tells its writes from everyone else's.
const (
	fencedToken = "fenced-e2e-token-0123456789"
	fencedUser  = "fenced-e2e"
	clusterName = "c1"
)

// sim is one simulated array with its adapter configuration.
type sim struct {
	name string
	srv  *simcore.Server
	cfg  arrayclients.Config
}

// snapshot returns the array's state as JSON.
func (s *sim) snapshot(t *testing.T) string {
	b, err := json.Marshal(s.srv.Family().Snapshot())
	require.NoError(t, err)
	return string(b)
}

// accessRefs lists every reference that grants a host access in a
// snapshot: PowerFlex volume mappings (SDC IDs), PowerScale export client
// lists (client strings), Unity LUN host access (host IDs).
func accessRefs(t *testing.T, snapshot string) []string {
	var v any
	require.NoError(t, json.Unmarshal([]byte(snapshot), &v))
	var out []string
	var walk func(key string, v any)
	walk = func(key string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, c := range x {
				walk(k, c)
			}
		case []any:
			for _, e := range x {
				switch key {
				case "mappedSdcInfo":
					out = append(out, fmt.Sprint(e.(map[string]any)["sdcId"]))
				case "hostAccess":
					out = append(out, fmt.Sprint(e.(map[string]any)["host"]))
				case "clients", "root_clients", "read_write_clients", "read_only_clients":
					out = append(out, fmt.Sprint(e))
				default:
					walk(key, e)
				}
			}
		}
	}
	walk("", v)
	return out
}

// hasAccess reports whether the identity has any access in the snapshot.
func hasAccess(t *testing.T, snapshot string, id arrayclients.Identity) bool {
	refs := accessRefs(t, snapshot)
	keys := append([]string{id.ObjectID}, id.Keys...)
	for _, k := range keys {
		if k != "" && slices.Contains(refs, k) {
			return true
		}
	}
	return false
}

// bed is the whole test bed: control plane, nodes, simulators, adapters and
// a single-replica Raft group.
type bed struct {
	t        *testing.T
	cp       *testbed.ControlPlane
	nodes    map[string]*testbed.Node
	sims     map[string]*sim
	arrays   map[string]stonith.Array
	adapters map[string]arrayclients.Adapter
	raft     *cluster.Node
	writer   *kube.Writer
	clients  *kube.Clients
	log      *slog.Logger
}

// bedArrays are the arrays of startBed.
const bedArrays = `
  - {name: pflex-1, family: powerflex, spec: {systems: [{id: 1a2b3c4d5e6f7a8b, name: sys-1}], perNode: {volumes: 2, limitIops: 500}}}
  - {name: pscale-1, family: powerscale, spec: {perNode: {exports: 2, lists: [clients, readWriteClients], forms: [ip, fqdn]}}}
  - {name: unity-1, family: unity, spec: {username: admin, password: unity-secret, generate: {lunsPerNode: 2}}}
`

func startBed(t *testing.T, nodeCount int) *bed {
	t.Helper()
	return startBedWith(t, testbed.NodeSpecs("e2e", nodeCount), bedArrays, nil)
}

// startBedWith starts a bed of the given nodes and arrays (a fixture's
// arrays list). drivers names the emulated CSI driver of an array whose
// driver is installed under its own name (a second csi-powerstore); each
// emulated csi-powerstore's node plugin registers the host of every node
// that runs it on its array, under the node ID it reports.
func startBedWith(t *testing.T, specs []testbed.NodeSpec, arraysYAML string, drivers map[string]string) *bed {
	t.Helper()
	b := &bed{t: t, nodes: map[string]*testbed.Node{}, sims: map[string]*sim{}, arrays: map[string]stonith.Array{},
		adapters: map[string]arrayclients.Adapter{}, log: slog.New(slog.DiscardHandler)}
	if testing.Verbose() {
		b.log = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	b.cp = testbed.Start(t, testbed.Options{NodeLeaseDurationSeconds: 8,
		Tokens: []testbed.Token{{Token: fencedToken, User: fencedUser, UID: "fenced-e2e", Groups: []string{"system:masters"}}}})
	ctx := t.Context()
	nodes, err := b.cp.AddNodes(ctx, specs...)
	require.NoError(t, err)
	var names []string
	for _, n := range nodes {
		b.nodes[n.Name()] = n
		names = append(names, n.Name())
	}
	require.NoError(t, b.cp.WaitNodesReady(ctx, names...))

	// The simulators know exactly the nodes the control plane has.
	var doc strings.Builder
	doc.WriteString("nodes:\n")
	for _, n := range nodes {
		s := n.Spec
		fmt.Fprintf(&doc, "  - {name: %s, ip: %s, fqdn: %s, machineID: %s, sdcGUID: %s, iqn: %q, wwpns: [%q]}\n",
			s.Name, s.IP, s.FQDN, s.MachineID, s.SDCGUID, s.IQN, s.WWPNs[0])
	}
	doc.WriteString("arrays:" + arraysYAML)
	fx, err := fixture.Parse([]byte(doc.String()))
	require.NoError(t, err, doc.String())
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
		case fixture.PowerScale:
			s, err := powerscale.New(&a.Spec, fx.Nodes)
			require.NoError(t, err)
			fam = s
			cfg.Family, cfg.Username, cfg.Password, cfg.Insecure = arrayclients.PowerScale,
				powerscale.DefaultUsername, powerscale.DefaultPassword, true
		case fixture.Unity:
			s, err := unity.New(&a.Spec, fx.Nodes)
			require.NoError(t, err)
			fam = s
			cfg.Family, cfg.Username, cfg.Password, cfg.Insecure = arrayclients.Unity, "admin", "unity-secret", true
		case fixture.PowerStore:
			s, err := powerstore.New(&a.Spec, fx.Nodes)
			require.NoError(t, err)
			fam = s
			cfg.Family, cfg.Username, cfg.Password = arrayclients.PowerStore, powerstore.DefaultUsername, powerstore.DefaultPassword
		}
		srv := simcore.New(a.Name, fam, nil)
		srv.SetAuditLimit(0)
		l, err := simcore.Serve(srv, "127.0.0.1:0", true, t.TempDir())
		require.NoError(t, err)
		t.Cleanup(func() { _ = l.Close() })
		cfg.Endpoint = l.URL
		if cfg.Family == arrayclients.PowerFlex || cfg.Family == arrayclients.PowerStore {
			cfg.CAFile = l.CAFile
		}
		// The test bed's volumes on this array are made and published by
		// the family's emulated CSI driver, where there is one.
		e, err := csidriver.ForSimAs(ctx, srv, drivers[a.Name], cfg.Username, cfg.Password, t.TempDir())
		if !errors.Is(err, csidriver.ErrUnsupported) {
			require.NoError(t, err)
			if ps, ok := e.Controller.(*csidriver.PowerStore); ok {
				startPowerStoreNodePlugins(t, ps, nodes)
			}
			t.Cleanup(func() { _ = e.Close() })
			b.cp.RegisterCSIController(e)
			if !slices.Contains(cfg.ArrayIDs, e.ArrayID) {
				cfg.ArrayIDs = append(cfg.ArrayIDs, e.ArrayID)
			}
		}
		b.sims[a.Name] = &sim{name: a.Name, srv: srv, cfg: cfg}
	}
	var cfgs []arrayclients.Config
	for _, s := range b.sims {
		cfgs = append(cfgs, s.cfg)
	}
	reg, err := all.New(cfgs, arrayclients.Options{Registry: prometheus.NewRegistry(), Logger: b.log})
	require.NoError(t, err)
	for _, a := range reg.Adapters() {
		b.adapters[a.Name()] = a
		b.arrays[a.Name()] = a
	}

	// A real single-replica Raft group holding the real ledger.
	addr, err := clustertest.FreeAddr()
	require.NoError(t, err)
	ccfg := cluster.DefaultConfig()
	ccfg.ID, ccfg.DataDir, ccfg.BindAddr = "r1", t.TempDir(), addr
	ccfg.Peers = []cluster.Peer{{ID: "r1", RaftAddr: addr}}
	b.raft, err = cluster.Open(ccfg, b.log, prometheus.NewRegistry())
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.raft.Close() })
	require.Eventually(t, func() bool { l, _ := b.raft.Leadership(); return l.Leader }, 30*time.Second, 20*time.Millisecond)

	kc := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, b.cp.WriteKubeconfig(kc, fencedToken))
	clients, err := kube.NewClients(kube.Config{Kubeconfig: kc})
	require.NoError(t, err)
	b.writer = kube.NewWriter(clients.Requests, "fenced", "r1", nil)
	b.clients = clients
	return b
}

// startPowerStoreNodePlugins does on the emulated csi-powerstore's array
// what its node plugin does when it starts on each node that runs it
// (dell/csi-powerstore pkg/node/node.go Init, setupHost): register the
// node's host, with its iSCSI initiator, under the node ID the plugin
// reports for the node (the ID in the node's CSINode under the driver's
// name).
func startPowerStoreNodePlugins(t *testing.T, ps *csidriver.PowerStore, nodes []*testbed.Node) {
	t.Helper()
	for _, n := range nodes {
		id, runs := n.Spec.CSINodeIDs()[ps.Driver()]
		if !runs {
			continue
		}
		_, err := ps.NodeStart(t.Context(), csidriver.PowerStoreNode{NodeID: id, Initiators: []string{n.Spec.IQN},
			PortType: gopowerstore.InitiatorProtocolTypeEnumISCSI})
		require.NoError(t, err, "node plugin of %s on %s", ps.Driver(), n.Name())
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// learn resolves every node's identity on every array from its Node and
// CSINode, as the daemon does for healthy nodes, and commits them.
func (b *bed) learn() map[string]map[string]arrayclients.Identity {
	t, ctx := b.t, b.t.Context()
	out := map[string]map[string]arrayclients.Identity{}
	l, _ := b.raft.Leadership()
	require.True(t, l.Leader)
	for name := range b.nodes {
		n, err := b.cp.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		csi, err := b.cp.Client.StorageV1().CSINodes().Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		in := kube.NodeInputs(clusterName, n, csi)
		ids := map[string]arrayclients.Identity{}
		for arr, a := range b.adapters {
			id, err := a.Resolve(ctx, in)
			if errors.Is(err, arrayclients.ErrNoIdentity) {
				continue
			}
			require.NoError(t, err, "resolve %s on %s", name, arr)
			ids[arr] = id
		}
		require.Len(t, ids, 3, "node %s has an identity on each of the three arrays", name)
		_, err = b.raft.Apply(ctx, &ledger.SetIdentities{Meta: l.Meta(), Cluster: clusterName, Node: name,
			BootID: n.Status.NodeInfo.BootID, Identities: ids})
		require.NoError(t, err)
		out[name] = ids
	}
	return out
}

// pipeline is a running detector and controller (one daemon's worth).
type pipeline struct {
	ctrl   *stonith.Controller
	runner *detector.Runner
	reg    *prometheus.Registry
	stop   func()
}

func (b *bed) startPipeline(dryRun bool) *pipeline {
	return b.startPipelineHook(dryRun, nil)
}

// startPipelineHook starts a pipeline whose controller calls hook.
func (b *bed) startPipelineHook(dryRun bool, hook func(stonith.Point) bool) *pipeline {
	return b.startPipelineWith(dryRun, hook, nil)
}

// startPipelineWith starts a pipeline whose controller calls hook, its
// configuration changed by mutate (when set).
func (b *bed) startPipelineWith(dryRun bool, hook func(stonith.Point) bool, mutate func(*stonith.Config)) *pipeline {
	t := b.t
	p := &pipeline{reg: prometheus.NewRegistry()}
	fp, err := kube.NewFootprints(b.clients.Watch)
	require.NoError(t, err)
	cfg := stonith.Config{
		ReplicaID: "r1", Ledger: b.raft.Ledger(), Arrays: b.arrays, Registry: p.reg, Logger: b.log,
		ArrayTimeout: 3 * time.Second, ArrayAttempts: 2, ArrayBackoff: 100 * time.Millisecond,
		RetryBase: 200 * time.Millisecond, RetryMax: 2 * time.Second, Resync: time.Second, Hook: hook,
		OutOfServiceSettle: 200 * time.Millisecond,
		Clusters: []stonith.ClusterConfig{{Name: clusterName, Kube: b.writer, SettlePeriod: 3 * time.Second,
			DryRun: dryRun, ProtectionSelector: "fenced.io/protect=true", Footprints: fp,
			Detector: stonith.DetectorStatusFunc(func() detector.Status { return p.runner.Status() })}},
	}
	if mutate != nil {
		mutate(&cfg)
	}
	ctrl, err := stonith.New(cfg)
	require.NoError(t, err)
	p.ctrl = ctrl
	pol := detector.DefaultPolicy()
	pol.HeartbeatGrace, pol.ProbeAfter, pol.PollInterval = 10*time.Second, 5*time.Second, 500*time.Millisecond
	pol.EvidenceMaxAge, pol.ProbeTimeout = 5*time.Second, time.Second
	pol.Corroboration = detector.CorroborateKubelet
	pol.SettlePeriod = 3 * time.Second
	pol.APICheckInterval, pol.APICheckMaxAge = time.Second, 10*time.Second
	pol.MaxUnhealthy = detector.Limit{Value: 2}
	pol.StormCooldown = 0
	p.runner, err = detector.NewRunner(detector.RunnerConfig{Cluster: clusterName, Replica: "r1", Policy: pol,
		API: kube.NewClusterFromClients(clusterName, b.clients, nil), Publisher: ctrl, Logger: b.log})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	fp.Start(ctx)
	require.True(t, fp.WaitForSync(ctx))
	done := make(chan struct{}, 3)
	go func() {
		if err := p.runner.Run(ctx); err != nil {
			t.Errorf("detector runner: %v", err)
		}
		done <- struct{}{}
	}()
	go func() { ctrl.FollowCluster(ctx, b.raft); done <- struct{}{} }()
	go func() { ctrl.WatchProtection(ctx); done <- struct{}{} }()
	p.stop = func() { cancel(); <-done; <-done; <-done }
	t.Cleanup(func() {
		select {
		case <-ctx.Done():
		default:
			p.stop()
		}
	})
	return p
}

// fence returns a copy of the node's open record.
func (b *bed) fence(node string) *ledger.Fence {
	st := b.raft.Ledger().Copy()
	if n := st.Node(clusterName, node); n != nil {
		return n.Fence
	}
	return nil
}

func (b *bed) lastClosed(node string) *ledger.Fence {
	st := b.raft.Ledger().Copy()
	if n := st.Node(clusterName, node); n != nil && len(n.History) > 0 {
		return n.History[len(n.History)-1]
	}
	return nil
}

func (b *bed) waitState(node string, s ledger.FenceState, d time.Duration) {
	b.t.Helper()
	require.Eventually(b.t, func() bool { f := b.fence(node); return f != nil && f.State == s }, d, 100*time.Millisecond,
		"fence of %s never reached %s (record %+v)", node, s, b.fence(node))
}

// requireRestored asserts that every array is as it was in before, but for
// the volumes the emulated driver created for the StatefulSet (named
// k8s-…): each of those is given only to the nodes Kubernetes has it
// attached to now. A volume that moved stays with its new node; unfence
// never gives it back (PRODUCT.md invariant 5).
func requireRestored(t *testing.T, b *bed, before map[string]string, ids map[string]map[string]arrayclients.Identity, what string) {
	t.Helper()
	const flex = "pflex-1"
	var lastErr string
	ok := assert.Eventually(t, func() bool {
		lastErr = ""
		for name, s := range b.sims {
			now := s.snapshot(t)
			if name != flex {
				if now != before[name] {
					lastErr = fmt.Sprintf("%s differs from before", name)
					return false
				}
				continue
			}
			want, err := kubeHolders(t.Context(), b, ids)
			if err != nil {
				lastErr = err.Error()
				return false
			}
			bs, ns, got := stripKubeVolumes(t, before[name]), stripKubeVolumes(t, now), kubeMappings(t, now)
			if bs.rest != ns.rest {
				lastErr = fmt.Sprintf("%s differs from before outside the StatefulSet's volumes:\n%s\n%s", name, bs.rest, ns.rest)
				return false
			}
			for vol := range got {
				if !slices.Equal(got[vol], want[vol]) {
					lastErr = fmt.Sprintf("%s: volume %s given to %v, Kubernetes has it on %v", name, vol, got[vol], want[vol])
					return false
				}
			}
		}
		return true
	}, 30*time.Second, 200*time.Millisecond)
	if !ok {
		require.Failf(t, "arrays not restored", "%s: %s", what, lastErr)
	}
}

// stripped is a PowerFlex snapshot without the StatefulSet's volumes'
// mappings.
type stripped struct{ rest string }

func stripKubeVolumes(t *testing.T, snapshot string) stripped {
	var v map[string]any
	require.NoError(t, json.Unmarshal([]byte(snapshot), &v))
	vols, _ := v["volumes"].([]any)
	for _, e := range vols {
		if m, ok := e.(map[string]any); ok {
			if name, _ := m["name"].(string); strings.HasPrefix(name, "k8s-") {
				delete(m, "mappedSdcInfo")
			}
		}
	}
	out, err := json.Marshal(v)
	require.NoError(t, err)
	return stripped{rest: string(out)}
}

// kubeMappings returns the SDC IDs each StatefulSet volume is mapped to.
func kubeMappings(t *testing.T, snapshot string) map[string][]string {
	var v struct {
		Volumes []struct {
			ID     string `json:"id"`
			Name   string `json:"name"`
			Mapped []struct {
				SdcID string `json:"sdcId"`
			} `json:"mappedSdcInfo"`
		} `json:"volumes"`
	}
	require.NoError(t, json.Unmarshal([]byte(snapshot), &v))
	out := map[string][]string{}
	for _, vol := range v.Volumes {
		if !strings.HasPrefix(vol.Name, "k8s-") {
			continue
		}
		sdcs := []string{}
		for _, m := range vol.Mapped {
			sdcs = append(sdcs, m.SdcID)
		}
		slices.Sort(sdcs)
		out[vol.ID] = sdcs
	}
	return out
}

// kubeHolders returns, per PowerFlex volume ID, the SDC IDs of the nodes
// Kubernetes has it attached to.
func kubeHolders(ctx context.Context, b *bed, ids map[string]map[string]arrayclients.Identity) (map[string][]string, error) {
	vas, err := b.cp.Client.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, va := range vas.Items {
		if !va.Status.Attached || va.DeletionTimestamp != nil || va.Spec.Source.PersistentVolumeName == nil {
			continue
		}
		pv, err := b.cp.Client.CoreV1().PersistentVolumes().Get(ctx, *va.Spec.Source.PersistentVolumeName, metav1.GetOptions{})
		if err != nil || pv.Spec.CSI == nil {
			continue
		}
		h := pv.Spec.CSI.VolumeHandle
		vol := h[strings.LastIndexByte(h, '-')+1:]
		out[vol] = append(out[vol], ids[va.Spec.NodeName]["pflex-1"].ObjectID)
	}
	for k := range out {
		slices.Sort(out[k])
	}
	return out, nil
}

// waitAttachedAll waits until every VolumeAttachment is attached (the
// emulated driver published every volume), as a kubelet waits before it
// starts a pod.
func waitAttachedAll(t *testing.T, b *bed) {
	t.Helper()
	require.Eventually(t, func() bool {
		vas, err := b.cp.Client.StorageV1().VolumeAttachments().List(t.Context(), metav1.ListOptions{})
		if err != nil || len(vas.Items) == 0 {
			return false
		}
		for _, va := range vas.Items {
			if !va.Status.Attached {
				return false
			}
		}
		return true
	}, 2*time.Minute, 100*time.Millisecond, "volume attachments not all attached")
}
