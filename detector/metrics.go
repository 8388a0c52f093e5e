package detector

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the detector's Prometheus metrics, shared by the Runners of
// every cluster.
type Metrics struct {
	verdicts *prometheus.GaugeVec
	latency  *prometheus.HistogramVec
	storm    *prometheus.GaugeVec
	early    *prometheus.CounterVec
}

// NewMetrics registers the detector's metrics on reg:
// fenced_node_verdicts{cluster,verdict}, fenced_detection_latency_seconds{cluster},
// fenced_storm_guard_active{cluster} and
// fenced_failed_verdicts_total{cluster,when} (early or grace, counted
// while early verdicts are on).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		verdicts: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fenced_node_verdicts",
			Help: "Number of nodes per verdict (healthy, suspect, failed, blocked).",
		}, []string{"cluster", "verdict"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "fenced_detection_latency_seconds",
			Help:    "Time from the last Lease renewal this replica saw to the Failed verdict (includes the heartbeat grace).",
			Buckets: []float64{10, 20, 30, 40, 42, 45, 50, 60, 90, 120, 180, 300, 600},
		}, []string{"cluster"}),
		storm: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fenced_storm_guard_active",
			Help: "1 while the storm guard blocks new Failed verdicts in the cluster.",
		}, []string{"cluster"}),
		early: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fenced_failed_verdicts_total",
			Help: "Failed verdicts given while early verdicts are on, by when: early (every witness agreed before the grace) or grace (a witness was unknown or disagreed, so the full heartbeat grace ran out).",
		}, []string{"cluster", "when"}),
	}
	for _, c := range []prometheus.Collector{m.verdicts, m.latency, m.storm, m.early} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register detector metrics: %w", err)
		}
	}
	return m, nil
}

func (m *Metrics) observe(res Result) {
	if m == nil {
		return
	}
	for _, s := range States {
		m.verdicts.WithLabelValues(res.Cluster, string(s)).Set(float64(res.Counts[s]))
	}
	active := 0.0
	if res.Storm.Active {
		active = 1
	}
	m.storm.WithLabelValues(res.Cluster).Set(active)
	for _, c := range res.Changes {
		if c.State == Failed && !c.Evidence.FailedAt.IsZero() && c.Evidence.FailedAt.Equal(c.EvaluatedAt) {
			if res.EarlyEnabled {
				when := "grace"
				if c.Evidence.Early {
					when = "early"
				}
				m.early.WithLabelValues(res.Cluster, when).Inc()
			}
			ref := c.Evidence.RenewObservedAt
			if ref.IsZero() {
				continue
			}
			m.latency.WithLabelValues(res.Cluster).Observe(c.Evidence.FailedAt.Sub(ref).Seconds())
		}
	}
}
