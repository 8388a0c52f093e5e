package detector

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/kube"
)

// fakeAPI injects API server and kubelet faults into the Runner's unit
// test; the real API server is exercised by the test-bed tests.
type fakeAPI struct {
	mu        sync.Mutex
	h         kube.Handler
	nodes     map[string]*corev1.Node
	leases    map[string]*coordinationv1.Lease
	renewing  map[string]bool
	kubeletUp map[string]bool
	apiDown   bool
	rounds    int
	progress  time.Time
}

var _ ClusterAPI = (*fakeAPI)(nil)

func newFakeAPI(n int) *fakeAPI {
	f := &fakeAPI{nodes: map[string]*corev1.Node{}, leases: map[string]*coordinationv1.Lease{}, renewing: map[string]bool{}, kubeletUp: map[string]bool{}}
	for i := range n {
		name := fmt.Sprintf("w%d", i)
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
		node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("10.0.0.%d", i+1)}}
		node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		f.nodes[name] = node
		f.renewing[name] = true
		f.kubeletUp[name] = true
	}
	return f
}

func (f *fakeAPI) StartWatches(ctx context.Context, h kube.Handler) error {
	f.mu.Lock()
	f.h = h
	f.mu.Unlock()
	for name, n := range f.nodes {
		h(kube.Event{Kind: kube.KindNode, Name: name, Node: n, At: time.Now()})
	}
	go func() {
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				f.renew()
			}
		}
	}()
	return nil
}

func (f *fakeAPI) renew() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.apiDown {
		return
	}
	f.rounds++
	f.progress = time.Now()
	for name, on := range f.renewing {
		if !on {
			continue
		}
		now := metav1.NewMicroTime(time.Now())
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: kube.LeaseNamespace}}
		l.Spec.RenewTime = &now
		l.Spec.HolderIdentity = &name
		f.leases[name] = l
		f.h(kube.Event{Kind: kube.KindLease, Name: name, Lease: l, At: time.Now()})
	}
}

func (f *fakeAPI) WatchState() kube.WatchState {
	f.mu.Lock()
	defer f.mu.Unlock()
	return kube.WatchState{Synced: f.h != nil, LastLeaseProgress: f.progress}
}

func (f *fakeAPI) Node(name string) (*corev1.Node, bool) {
	n, ok := f.nodes[name]
	return n, ok
}

func (f *fakeAPI) CSINode(name string) (*storagev1.CSINode, bool) {
	return &storagev1.CSINode{Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: arrayclients.DriverPowerStore, NodeID: "id-" + name}}}}, true
}

func (f *fakeAPI) ReadLease(_ context.Context, node string) (*coordinationv1.Lease, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.apiDown {
		return nil, errors.New("connection refused")
	}
	l, ok := f.leases[node]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, node)
	}
	return l, nil
}

func (f *fakeAPI) CheckAPIServer(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.apiDown {
		return errors.New("connection refused")
	}
	return nil
}

func (f *fakeAPI) ProbeKubelet(_ context.Context, node *corev1.Node) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.kubeletUp[node.Name] {
		return "10.0.0.9:10250", errors.New("connection refused")
	}
	return "10.0.0.9:10250", nil
}

func (f *fakeAPI) set(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn()
}

type recorder struct {
	mu      sync.Mutex
	changes []Verdict
	inputs  map[string]arrayclients.Node
	probes  int
}

func (r *recorder) PublishVerdicts(_ context.Context, cs []Verdict) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.changes = append(r.changes, cs...)
}

func (r *recorder) RecordProbe(context.Context, ProbeObservation) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.probes++
	return nil
}

func (r *recorder) RecordNodeInputs(_ context.Context, n arrayclients.Node) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.inputs[n.Name] = n
	return nil
}

func (r *recorder) count(node string, s State) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := 0
	for _, v := range r.changes {
		if v.Node == node && v.State == s {
			c++
		}
	}
	return c
}

func fastPolicy() Policy {
	p := DefaultPolicy()
	p.HeartbeatGrace = 1 * time.Second
	p.ProbeAfter = 400 * time.Millisecond
	p.PollInterval = 100 * time.Millisecond
	p.ProbeTimeout = 200 * time.Millisecond
	p.EvidenceMaxAge = 500 * time.Millisecond
	p.IOSampleWindow = 100 * time.Millisecond
	p.SettlePeriod = 1 * time.Second
	p.APICheckInterval = 100 * time.Millisecond
	p.APICheckTimeout = 100 * time.Millisecond
	p.APICheckMaxAge = 300 * time.Millisecond
	p.WatchLagTolerance = 200 * time.Millisecond
	p.MaxUnhealthy = Limit{Value: 50, Percent: true}
	return p
}

func TestRunnerWiresMachineToTheWorld(t *testing.T) {
	api := newFakeAPI(4)
	rec := &recorder{inputs: map[string]arrayclients.Node{}}
	reg := prometheus.NewRegistry()
	metrics, err := NewMetrics(reg)
	require.NoError(t, err)
	_, err = NewMetrics(reg)
	require.Error(t, err, "registering twice is an error, not a panic")
	r, err := NewRunner(RunnerConfig{
		Cluster: "c1", Replica: "r1", Policy: fastPolicy(), API: api,
		Sink: rec, Publisher: rec, Metrics: metrics, Logger: slog.New(slog.DiscardHandler),
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()

	require.Eventually(t, func() bool { return r.Status().Counts[Healthy] == 4 }, 5*time.Second, 20*time.Millisecond)
	require.Eventually(t, func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return len(rec.inputs) == 4
	}, 5*time.Second, 20*time.Millisecond, "healthy nodes' identity inputs are recorded")
	rec.mu.Lock()
	assert.Equal(t, map[string]string{arrayclients.DriverPowerStore: "id-w1"}, rec.inputs["w1"].CSINodeIDs)
	assert.Equal(t, []string{"10.0.0.2"}, rec.inputs["w1"].Addresses)
	rec.mu.Unlock()

	require.Eventually(t, func() bool {
		api.mu.Lock()
		defer api.mu.Unlock()
		return api.rounds >= 3
	}, 5*time.Second, 20*time.Millisecond, "leases renewed")
	api.set(func() { api.renewing["w2"], api.kubeletUp["w2"] = false, false })
	require.Eventually(t, func() bool { return rec.count("w2", Failed) == 1 }, 5*time.Second, 20*time.Millisecond)
	st := r.Status()
	require.Len(t, st.Nodes, 1)
	assert.Equal(t, "w2", st.Nodes[0].Node)
	assert.Equal(t, []string{"kubelet"}, st.Nodes[0].Evidence.CorroboratedBy)
	assert.InDelta(t, 1.0, gauge(t, reg, "fenced_node_verdicts", "failed"), 0)
	assert.InDelta(t, 0.0, gauge(t, reg, "fenced_storm_guard_active", ""), 0)
	assert.Equal(t, uint64(1), histogramCount(t, reg, "fenced_detection_latency_seconds"))
	rec.mu.Lock()
	assert.Positive(t, rec.probes, "probes are recorded for the other replicas")
	rec.mu.Unlock()

	api.set(func() { api.apiDown = true })
	require.Eventually(t, func() bool { return r.Status().Doubt == ReasonAPIServerUnreachable }, 5*time.Second, 20*time.Millisecond)
	assert.Equal(t, 4, r.Status().Counts[Blocked])
	api.set(func() { api.apiDown = false })
	require.Eventually(t, func() bool { return r.Status().Counts[Healthy] == 3 }, 5*time.Second, 20*time.Millisecond)
	for _, n := range []string{"w0", "w1", "w3"} {
		assert.Equal(t, 0, rec.count(n, Failed), n)
	}
}

func TestNewRunnerNamesMissingFields(t *testing.T) {
	_, err := NewRunner(RunnerConfig{})
	require.ErrorContains(t, err, "API")
	_, err = NewRunner(RunnerConfig{API: newFakeAPI(0), Cluster: "c"})
	require.ErrorContains(t, err, "replica")
	p := DefaultPolicy()
	p.Corroboration = "maybe"
	_, err = NewRunner(RunnerConfig{API: newFakeAPI(0), Cluster: "c", Replica: "r", Policy: p})
	require.ErrorContains(t, err, "corroboration")
}

func gauge(t *testing.T, reg *prometheus.Registry, name, verdict string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			match := verdict == ""
			for _, l := range m.GetLabel() {
				if l.GetName() == "verdict" && l.GetValue() == verdict {
					match = true
				}
			}
			if match {
				return m.GetGauge().GetValue()
			}
		}
	}
	t.Fatalf("metric %s{verdict=%q} not found", name, verdict)
	return 0
}

func histogramCount(t *testing.T, reg *prometheus.Registry, name string) uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	return 0
}

// TestManyHealthyVerdictsLogOneLine: every node turns Healthy at once at a
// replica's start and when a doubt clears; with thousands of nodes a line
// each flooded the log (250,000 lines in 12 minutes of an overloaded test
// bed). A few still get a line each; many get one line with their count.
func TestManyHealthyVerdictsLogOneLine(t *testing.T) {
	var buf bytes.Buffer
	r := &Runner{log: slog.New(slog.NewJSONHandler(&buf, nil))}
	changes := func(n int, state State) []Verdict {
		vs := make([]Verdict, n)
		for i := range vs {
			vs[i] = Verdict{Node: fmt.Sprintf("worker-%d", i), State: state}
		}
		return vs
	}
	lines := func() []string {
		s := strings.TrimSpace(buf.String())
		buf.Reset()
		if s == "" {
			return nil
		}
		return strings.Split(s, "\n")
	}

	r.report(Result{Changes: changes(healthyLogEach, Healthy)})
	assert.Len(t, lines(), healthyLogEach, "a few nodes: a line each")

	r.report(Result{Changes: append(changes(5000, Healthy), Verdict{Node: "worker-x", State: Failed, Reason: ReasonHeartbeatStale})})
	got := lines()
	require.Len(t, got, 2, "many healthy nodes: one line, and the failed node its own")
	assert.Contains(t, got[0], `"msg":"node verdict"`)
	assert.Contains(t, got[0], `"node":"worker-x"`)
	assert.Contains(t, got[1], `"msg":"node verdicts"`)
	assert.Contains(t, got[1], `"nodes":5000`)
	assert.Contains(t, got[1], `"worker-0"`)
}
