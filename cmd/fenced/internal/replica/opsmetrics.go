package replica

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fenced-project/fenced/cluster/ledger"
	"github.com/fenced-project/fenced/configs"
)

// opsCollector reports what operators alert on besides the pipeline's own
// metrics: the pauses of each cluster (from the replicated ledger), each
// cluster's dry-run setting, and when the replica's certificates expire.
// It reads at scrape time, so a renewed certificate file shows at once.
type opsCollector struct {
	ledger   *ledger.FSM
	clusters []configs.Cluster
	certs    []certRef
	credDir  string
	log      *slog.Logger

	paused, holders, started, dryRun, expiry *prometheus.Desc
}

// certRef is a certificate file of the configuration, by its use.
type certRef struct {
	use, ref string
}

func newOpsCollector(cfg *configs.Config, l *ledger.FSM, credDir string, log *slog.Logger) *opsCollector {
	c := &opsCollector{ledger: l, clusters: cfg.Clusters, credDir: credDir, log: log,
		paused: prometheus.NewDesc("fenced_fencing_paused",
			"1 while fencing on verdicts is paused for the cluster (fenced pause, for the cluster or all), else 0.", []string{"cluster"}, nil),
		holders: prometheus.NewDesc("fenced_pause_holders",
			"How many pauses are in effect for the cluster: its own and those of every cluster (fenced pause); fencing on verdicts is paused while it is above 0.", []string{"cluster"}, nil),
		started: prometheus.NewDesc("fenced_pause_started_timestamp_seconds",
			"When each pause in effect began (Unix seconds), by its ID, scope (a cluster, or all) and operator; fenced resume --id ID ends it.", []string{"id", "scope", "operator"}, nil),
		dryRun: prometheus.NewDesc("fenced_dry_run",
			"1 when the cluster is configured dryRun: fenced decides and reports but changes nothing.", []string{"cluster"}, nil),
		expiry: prometheus.NewDesc("fenced_certificate_expiry_timestamp_seconds",
			"When the replica's certificate expires (its notAfter, Unix seconds), by use: raft (replica.tls.certFile) or http (http.tls.certFile).", []string{"use"}, nil),
	}
	for _, r := range []certRef{{"raft", cfg.Replica.TLS.CertFile}, {"http", cfg.HTTP.TLS.CertFile}} {
		if r.ref != "" {
			c.certs = append(c.certs, r)
		}
	}
	return c
}

// Describe implements prometheus.Collector.
func (c *opsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.paused
	ch <- c.holders
	ch <- c.started
	ch <- c.dryRun
	ch <- c.expiry
}

// Collect implements prometheus.Collector.
func (c *opsCollector) Collect(ch chan<- prometheus.Metric) {
	paused := map[string]bool{}
	holders := map[string]int{}
	var all []ledger.PauseHolder
	c.ledger.Read(func(s *ledger.State) {
		for _, cl := range c.clusters {
			paused[cl.Name] = s.Paused(cl.Name)
			holders[cl.Name] = len(s.HoldersOf(cl.Name))
		}
		all = s.Holders()
	})
	for _, h := range all {
		scope := h.Cluster
		if scope == "" {
			scope = "all"
		}
		ch <- prometheus.MustNewConstMetric(c.started, prometheus.GaugeValue, float64(h.At.Unix()), h.ID, scope, h.Operator)
	}
	for _, cl := range c.clusters {
		ch <- prometheus.MustNewConstMetric(c.paused, prometheus.GaugeValue, bool01(paused[cl.Name]), cl.Name)
		ch <- prometheus.MustNewConstMetric(c.holders, prometheus.GaugeValue, float64(holders[cl.Name]), cl.Name)
		ch <- prometheus.MustNewConstMetric(c.dryRun, prometheus.GaugeValue, bool01(cl.DryRun), cl.Name)
	}
	for _, r := range c.certs {
		notAfter, err := certNotAfter(r.ref, c.credDir)
		if err != nil {
			c.log.Warn("cannot read a certificate for its expiry metric", "use", r.use, "error", err)
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.expiry, prometheus.GaugeValue, float64(notAfter), r.use)
	}
}

// certNotAfter reads the first certificate of a PEM file (path or
// credential:NAME) and returns its notAfter in Unix seconds.
func certNotAfter(ref, credDir string) (int64, error) {
	p, err := configs.ResolveFile(ref, credDir)
	if err != nil {
		return 0, err
	}
	b, err := configs.ReadFileLimited(p, configs.MaxPEMBytes)
	if err != nil {
		return 0, err
	}
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return 0, fmt.Errorf("%s holds no PEM certificate", p)
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return 0, fmt.Errorf("parse certificate of %s: %w", p, err)
		}
		return cert.NotAfter.Unix(), nil
	}
}

func bool01(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
