package apiprobe

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Collector exposes the probers' results as fenced_apiserver_up{cluster}:
// 1 when the cluster's API server answered the last probe, 0 otherwise
// (also before the first probe).
type Collector struct {
	probers []*Prober
	up      *prometheus.Desc
}

var _ prometheus.Collector = (*Collector)(nil)

// NewCollector returns a collector over the probers, one per cluster.
func NewCollector(probers []*Prober) *Collector {
	return &Collector{
		probers: probers,
		up: prometheus.NewDesc("fenced_apiserver_up",
			"1 when the cluster's API server answered this replica's last probe, else 0.", []string{"cluster"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) { ch <- c.up }

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	for _, p := range c.probers {
		v := 0.0
		p.mu.Lock()
		if p.err == nil {
			v = 1
		}
		p.mu.Unlock()
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, v, p.cluster.Name)
	}
}
