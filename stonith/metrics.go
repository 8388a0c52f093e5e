package stonith

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fenced-project/fenced/arrayclients"
)

// Results counted by fenced_fences_total.
const (
	ResultEvicted  = "evicted"  // a fence completed: fenced, tainted, pods deleted
	ResultRestored = "restored" // a recovery completed: record closed
	ResultAborted  = "aborted"  // abandoned before any array was changed
	ResultDryRun   = "dry_run"  // a dry-run decided to fence (nothing written)
	ResultBlocked  = "blocked"  // a fence was found blocked (counted once per episode)
)

// results are every value of fenced_fences_total's result label.
var results = []string{ResultEvicted, ResultRestored, ResultAborted, ResultDryRun, ResultBlocked}

// metrics holds the pipeline's collectors. Labels are bounded: clusters,
// results and step names, never node names.
type metrics struct {
	fences      *prometheus.CounterVec
	stepSeconds *prometheus.HistogramVec
	commitSecs  *prometheus.HistogramVec
	podsDeleted *prometheus.CounterVec
	toEviction  *prometheus.HistogramVec
	blocked     *prometheus.GaugeVec
	needsReboot *prometheus.GaugeVec
	callsQueued *prometheus.GaugeVec
	unprotected *prometheus.GaugeVec
	unplaced    *prometheus.GaugeVec
	regressions *prometheus.CounterVec
}

func newMetrics(reg *prometheus.Registry) (*metrics, error) {
	m := &metrics{
		fences: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fenced_fences_total",
			Help: "Fences by cluster and result (evicted, restored, aborted, dry_run, blocked).",
		}, []string{"cluster", "result"}),
		stepSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "fenced_fence_step_duration_seconds",
			Help:    "Duration of one pipeline step on an array or the API server (plan, apply, verify, taint, evict, undo, verify-restore, untaint).",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"cluster", "step"}),
		commitSecs: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "fenced_fence_commit_duration_seconds",
			Help:    "Duration of the Raft commit of a fence record's move to a state (intent, fencing, fenced, tainted, evicted, unfence-intent, restored, untainted, closed, failed, aborted).",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"cluster", "state"}),
		podsDeleted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fenced_pods_deleted_total",
			Help: "Pods force-deleted from fenced nodes.",
		}, []string{"cluster"}),
		toEviction: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "fenced_verdict_to_eviction_seconds",
			Help:    "Time from a node's Failed verdict to the commit of its eviction.",
			Buckets: []float64{1, 2, 5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 300, 600},
		}, []string{"cluster"}),
		blocked: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fenced_fence_blocked",
			Help: "Open fences that cannot proceed (an array cannot be fenced or restored); their pods are not deleted.",
		}, []string{"cluster"}),
		needsReboot: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fenced_nodes_awaiting_reboot",
			Help: "Fenced nodes that came back without a reboot; they stay fenced until they reboot (leader's view, 0 elsewhere).",
		}, []string{"cluster"}),
		unprotected: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fenced_nodes_unprotected",
			Help: "Nodes whose storage footprint fenced cannot fully cut, by the reason of a gap (a node counts once per reason): they are never fenced, tainted or evicted on a verdict. /status names the volumes.",
		}, []string{"cluster", "reason"}),
		unplaced: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fenced_volumes_unplaced",
			Help: "PersistentVolumes of a Dell CSI driver whose handle names an array, access zone or metro partner no configured array holds (configuration drift), by reason (array, default-array, zone, metro-partner, ambiguous); attached or not. This replica's view; /status names them.",
		}, []string{"cluster", "reason"}),
		regressions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fenced_fence_regressions_total",
			Help: "Held fences whose read-back found the fenced node's access again (a CSI driver, sidecar or person gave it back), by array and reason (volume-access, identity-entry, session: a session or I/O of the node the array reported after the cut); each is cut again and read back. Counted once per regression found.",
		}, []string{"cluster", "array", "reason"}),
		callsQueued: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fenced_array_calls_queued",
			Help: "Pipeline calls waiting in fenced for a free call slot of the array (arrays[].maxConcurrentCalls are in flight).",
		}, []string{"array"}),
	}
	if reg != nil {
		for _, col := range []prometheus.Collector{m.fences, m.stepSeconds, m.commitSecs, m.podsDeleted, m.toEviction, m.blocked, m.needsReboot, m.callsQueued, m.unprotected, m.unplaced, m.regressions} {
			if err := reg.Register(col); err != nil {
				return nil, fmt.Errorf("stonith: register metrics: %w", err)
			}
		}
	}
	return m, nil
}

// initCluster makes the cluster's series exist at 0 before their first
// event, so that rate() and alerts see them from the start.
func (m *metrics) initCluster(cluster string) {
	for _, r := range results {
		m.fences.WithLabelValues(cluster, r)
	}
	m.podsDeleted.WithLabelValues(cluster)
	m.toEviction.WithLabelValues(cluster)
	m.blocked.WithLabelValues(cluster).Set(0)
	m.needsReboot.WithLabelValues(cluster).Set(0)
	for _, r := range arrayclients.DriftReasons() {
		m.unplaced.WithLabelValues(cluster, string(r)).Set(0)
	}
}

func (m *metrics) fence(cluster, result string) { m.fences.WithLabelValues(cluster, result).Inc() }

func (m *metrics) stepDuration(cluster, step string, d time.Duration) {
	m.stepSeconds.WithLabelValues(cluster, step).Observe(d.Seconds())
}

func (m *metrics) commitDuration(cluster, state string, d time.Duration) {
	m.commitSecs.WithLabelValues(cluster, state).Observe(d.Seconds())
}

func (m *metrics) podDeleted(cluster string) { m.podsDeleted.WithLabelValues(cluster).Inc() }

func (m *metrics) evicted(cluster string, d time.Duration) {
	m.toEviction.WithLabelValues(cluster).Observe(d.Seconds())
}

func (m *metrics) setBlocked(cluster string, n int) {
	m.blocked.WithLabelValues(cluster).Set(float64(n))
}

func (m *metrics) setAwaitingReboot(cluster string, n int) {
	m.needsReboot.WithLabelValues(cluster).Set(float64(n))
}

func (m *metrics) regressed(cluster, array, reason string) {
	m.regressions.WithLabelValues(cluster, array, reason).Inc()
}

func (m *metrics) callQueued(array string, delta int) {
	m.callsQueued.WithLabelValues(array).Add(float64(delta))
}
