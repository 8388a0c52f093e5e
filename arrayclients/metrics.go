package arrayclients

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric names.
const (
	metricRequests = "fenced_array_requests_total"
	metricDuration = "fenced_array_request_duration_seconds"
	metricUp       = "fenced_array_up"
)

// Result label values of fenced_array_requests_total.
const (
	ResultOK          = "ok"
	ResultError       = "error"
	ResultUnreachable = "unreachable"
	ResultTimeout     = "timeout"
	ResultNoIdentity  = "no_identity"
	ResultAmbiguous   = "ambiguous"
	ResultDryRun      = "dry_run"
)

// metrics are the adapters' shared Prometheus collectors.
type metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	up       *prometheus.GaugeVec
}

// newMetrics registers the collectors on reg (or reuses ones already
// registered there); a nil reg yields unregistered collectors.
func newMetrics(reg *prometheus.Registry) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricRequests,
			Help: "Array adapter operations by array, operation and result.",
		}, []string{"array", "op", "result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    metricDuration,
			Help:    "Duration of array adapter operations in seconds.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"array", "op"}),
		up: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: metricUp,
			Help: "1 when the last connectivity check of the array succeeded, else 0.",
		}, []string{"array", "family"}),
	}
	if reg == nil {
		return m, nil
	}
	var err error
	if m.requests, err = register(reg, m.requests); err != nil {
		return nil, err
	}
	if m.duration, err = register(reg, m.duration); err != nil {
		return nil, err
	}
	if m.up, err = register(reg, m.up); err != nil {
		return nil, err
	}
	return m, nil
}

// ops are every value of the op label.
var ops = []string{OpResolve, OpPlan, OpApply, OpVerify, OpUndo, OpVerifyRestore, OpHealth, OpCheck, OpSessions, OpSweep}

// initArray makes the array's request series exist at 0 before the first
// call, so that rate() and alerts see them from the start: every op with
// the results any op can have (ok, error, unreachable, timeout; dry_run
// for the writes of a dry-run array).
func (m *metrics) initArray(array string, dryRun bool) {
	for _, op := range ops {
		for _, r := range []string{ResultOK, ResultError, ResultUnreachable, ResultTimeout} {
			m.requests.WithLabelValues(array, op, r)
		}
	}
	if dryRun {
		m.requests.WithLabelValues(array, OpApply, ResultDryRun)
		m.requests.WithLabelValues(array, OpUndo, ResultDryRun)
	}
}

// register registers c, or returns the identical collector already there.
func register[C prometheus.Collector](reg *prometheus.Registry, c C) (C, error) {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		return c, err
	}
	return c, nil
}
