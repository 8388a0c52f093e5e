package cluster

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the replica's Prometheus metrics. Gauges are read from Raft at
// scrape time; counters count events.
type metrics struct {
	n             *Node
	reg           *prometheus.Registry
	appliesFailed *prometheus.CounterVec
	leaderChanges prometheus.Counter
	tlsRejected   prometheus.Counter
	storageFull   prometheus.Gauge
	fullHandovers prometheus.Counter
	// storeWriteErrors counts failed Raft store writes, held ones included.
	storeWriteErrors prometheus.Counter

	state, term, lastContact, commitIndex, appliedIndex, snapshotIndex, peerReachable *prometheus.Desc
}

func newMetrics(n *Node) *metrics {
	return &metrics{
		n: n,
		appliesFailed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fenced_raft_applies_failed_total",
			Help: "Ledger commands that were not applied, by reason (not_leader, leadership_lost, refused, timeout, invalid, cancelled, error).",
		}, []string{"reason"}),
		leaderChanges: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fenced_raft_leader_changes_total",
			Help: "Leader changes this replica observed.",
		}),
		tlsRejected: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fenced_raft_tls_rejected_total",
			Help: "Raft connections refused during the mutual-TLS handshake.",
		}),
		storageFull: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fenced_raft_storage_full",
			Help: "1 while the data directory has no space for Raft's writes (they are held until space is freed), else 0.",
		}),
		fullHandovers: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fenced_raft_storage_full_handovers_total",
			Help: "Times this replica handed its leadership over because its data directory stayed full for timings storageFullHandover.",
		}),
		storeWriteErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fenced_raft_store_write_errors_total",
			Help: "Failed writes to the Raft store, including each retry of a write held on a full disk.",
		}),
		state: prometheus.NewDesc("fenced_raft_state",
			"1 for this replica's Raft state (leader, follower, candidate, shutdown), 0 for the others.", []string{"state"}, nil),
		term:          prometheus.NewDesc("fenced_raft_term", "Current Raft term.", nil, nil),
		lastContact:   prometheus.NewDesc("fenced_raft_last_contact_seconds", "Seconds since a follower last heard from the leader (0 on the leader, -1 never).", nil, nil),
		commitIndex:   prometheus.NewDesc("fenced_raft_commit_index", "Raft commit index.", nil, nil),
		appliedIndex:  prometheus.NewDesc("fenced_raft_applied_index", "Raft applied index.", nil, nil),
		snapshotIndex: prometheus.NewDesc("fenced_raft_last_snapshot_index", "Index of the last snapshot.", nil, nil),
		peerReachable: prometheus.NewDesc("fenced_raft_peer_reachable", "On the leader: 1 when the peer answers heartbeats.", []string{"peer"}, nil),
	}
}

func (m *metrics) setStorageFull(full bool) {
	v := 0.0
	if full {
		v = 1
	}
	m.storageFull.Set(v)
}

func (m *metrics) failed(reason string) { m.appliesFailed.WithLabelValues(reason).Inc() }

func (m *metrics) register(reg *prometheus.Registry) error {
	for _, c := range []prometheus.Collector{m, m.appliesFailed, m.leaderChanges, m.tlsRejected, m.storageFull, m.fullHandovers, m.storeWriteErrors} {
		if err := reg.Register(c); err != nil {
			m.unregister()
			return err
		}
		m.reg = reg
	}
	return nil
}

func (m *metrics) unregister() {
	if m.reg == nil {
		return
	}
	for _, c := range []prometheus.Collector{m, m.appliesFailed, m.leaderChanges, m.tlsRejected, m.storageFull, m.fullHandovers, m.storeWriteErrors} {
		m.reg.Unregister(c)
	}
	m.reg = nil
}

// Describe implements prometheus.Collector.
func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.state, m.term, m.lastContact, m.commitIndex, m.appliedIndex, m.snapshotIndex, m.peerReachable} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	st := m.n.Status()
	for _, s := range []string{"leader", "follower", "candidate", "shutdown"} {
		v := 0.0
		if st.State == s {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(m.state, prometheus.GaugeValue, v, s)
	}
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
	gauge(m.term, float64(st.Term))
	gauge(m.lastContact, st.LastContactSeconds)
	gauge(m.commitIndex, float64(st.CommitIndex))
	gauge(m.appliedIndex, float64(st.AppliedIndex))
	gauge(m.snapshotIndex, float64(st.LastSnapshotIndex))
	for _, p := range st.Peers {
		if p.Reachable != nil {
			v := 0.0
			if *p.Reachable {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(m.peerReachable, prometheus.GaugeValue, v, p.ID)
		}
	}
}
