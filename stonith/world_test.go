package stonith

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/cluster/ledger"
	"github.com/fenced-project/fenced/detector"
)

// fakeDetector is a detector status.
type fakeDetector struct {
	mu sync.Mutex
	st detector.Status
}

func (d *fakeDetector) Status() detector.Status {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.st
}

func (d *fakeDetector) set(fn func(st *detector.Status)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	fn(&d.st)
}

// world is a controller wired to fakes: cluster c1, node n1 with
// identities on arrays a1, a2, a3, two StatefulSet pods, one protected pod
// and one other pod.
type world struct {
	t      *testing.T
	log    *opLog
	group  *fakeGroup
	kube   *fakeKube
	det    *fakeDetector
	arrays map[string]*fakeArray
	fp     *fakeFootprints
	reg    *prometheus.Registry
	cfg    Config
	ctrl   *Controller
	stsUID []types.UID
	other  types.UID
}

func newWorld(t *testing.T, mutate ...func(cfg *Config)) *world {
	return newWorldOn(t, newFakeGroup(), mutate...)
}

// newWorldOn is newWorld on a given group.
func newWorldOn(t *testing.T, g *fakeGroup, mutate ...func(cfg *Config)) *world {
	w := &world{t: t, log: &opLog{}, group: g, det: &fakeDetector{}, arrays: map[string]*fakeArray{},
		reg: prometheus.NewRegistry(), fp: newFakeFootprints()}
	w.kube = newFakeKube(w.log)
	w.kube.addNode("n1", "boot-1")
	w.kube.addNode("n2", "boot-b")
	w.stsUID = append(w.stsUID, w.kube.addPod("db", "db-0", "n1", true, nil), w.kube.addPod("db", "db-1", "n1", true, nil))
	w.stsUID = append(w.stsUID, w.kube.addPod("web", "cache", "n1", false, map[string]string{"fenced.io/protect": "true"}))
	w.other = w.kube.addPod("web", "frontend", "n1", false, nil)
	w.kube.addPod("db", "db-2", "n2", true, nil)
	ids := map[string]arrayclients.Identity{}
	arrays := map[string]Array{}
	for _, name := range []string{"a1", "a2", "a3"} {
		a := newFakeArray(name, w.log, "n1", "n2")
		w.arrays[name] = a
		arrays[name] = a
		ids[name] = arrayclients.Identity{Array: name, Family: arrayclients.PowerFlex, Node: "n1", ObjectID: "sdc-n1"}
		w.fp.attach("n1", "pv-"+name, name)
	}
	w.group.must(t, &ledger.SetIdentities{Meta: w.group.meta(), Cluster: "c1", Node: "n1", BootID: "boot-1", Identities: ids})
	w.cfg = Config{
		ReplicaID: "r1", Ledger: w.group.fsm, Arrays: arrays, Registry: w.reg,
		Logger:       slog.New(slog.DiscardHandler),
		ArrayTimeout: time.Second, ArrayAttempts: 2, ArrayBackoff: time.Millisecond,
		RetryBase: 5 * time.Millisecond, RetryMax: 50 * time.Millisecond, Resync: 20 * time.Millisecond,
		OutOfServiceSettle: 30 * time.Millisecond,
		Clusters: []ClusterConfig{{Name: "c1", Kube: w.kube, Detector: w.det, ProtectionSelector: "fenced.io/protect=true",
			SettlePeriod: 50 * time.Millisecond, Footprints: w.fp}},
	}
	for _, m := range mutate {
		m(&w.cfg)
	}
	w.rebuild()
	return w
}

// rebuild makes a new controller on the same ledger, arrays and API server
// (a restarted process).
func (w *world) rebuild() {
	w.cfg.Registry = prometheus.NewRegistry()
	w.reg = w.cfg.Registry
	c, err := New(w.cfg)
	require.NoError(w.t, err)
	w.ctrl = c
}

// lead runs the controller under a new leadership until the returned stop.
func (w *world) lead() (*fakeLead, func()) {
	l := w.group.lead(w.t)
	errc := make(chan error, 1)
	go func() { errc <- w.ctrl.Lead(l) }()
	require.Eventually(w.t, func() bool { return w.ctrl.leadership() != nil }, 5*time.Second, time.Millisecond)
	return l, func() {
		l.cancel()
		require.NoError(w.t, <-errc)
	}
}

func (w *world) verdict(node string, s detector.State) {
	w.ctrl.PublishVerdicts(context.Background(), []detector.Verdict{{Cluster: "c1", Node: node, State: s,
		Reason: detector.ReasonHeartbeatStale, Since: time.Now()}})
}

func (w *world) state() ledger.FenceState {
	if f := w.group.fence("c1", "n1"); f != nil {
		return f.State
	}
	return ""
}

func (w *world) waitState(s ledger.FenceState) {
	w.t.Helper()
	require.Eventually(w.t, func() bool { return w.state() == s }, 10*time.Second, 2*time.Millisecond,
		"fence never reached %s (is %q); ops %v", s, w.state(), w.log.list())
}

// waitEvictionCounted waits until the one fence of c1 is counted as evicted
// with its time to eviction. Both are recorded just after the evicted step
// commits (a result counts only once committed), so they may trail what
// waitState saw by a moment.
func (w *world) waitEvictionCounted() {
	w.t.Helper()
	require.Eventually(w.t, func() bool {
		return value(w.ctrl.metrics.fences.WithLabelValues("c1", ResultEvicted)) == 1 &&
			histCount(w.ctrl.metrics.toEviction.WithLabelValues("c1").(histogram)) == 1
	}, 10*time.Second, 2*time.Millisecond, "the evicted fence is never counted with its time to eviction")
}

func (w *world) waitClosed() {
	w.t.Helper()
	require.Eventually(w.t, func() bool {
		h := w.group.history("c1", "n1")
		return w.group.fence("c1", "n1") == nil && len(h) > 0 && h[len(h)-1].State == ledger.StateClosed
	}, 10*time.Second, 2*time.Millisecond, "fence never closed (state %q)", w.state())
}

// value reads a counter or gauge.
func value(m prometheus.Metric) float64 {
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		panic(err)
	}
	if d.Counter != nil {
		return d.Counter.GetValue()
	}
	return d.Gauge.GetValue()
}

// histCount reads a histogram's sample count.
// histogram is an observed histogram series.
type histogram = prometheus.Metric

func histCount(m prometheus.Metric) uint64 {
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		panic(err)
	}
	return d.Histogram.GetSampleCount()
}
