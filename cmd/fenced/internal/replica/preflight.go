package replica

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/arrayclients/all"
	"github.com/fenced-project/fenced/cluster/transport"
	"github.com/fenced-project/fenced/cmd/fenced/internal/daemon"
)

// Preflight runs the checks the runtime makes when it wires a replica,
// with the runtime's own code and without its side effects: the Raft
// group's configuration and mutual-TLS credentials, the array adapters
// (each family's refusals), the client that forwards calls to peers and
// every cluster's detector policy. It opens no store, listens nowhere and
// sends nothing. `fenced run` calls it before wiring, so that each error
// it returns is a permanent configuration error (exit 78), and
// `fenced config validate` calls it so that what validates starts.
// daemon.New has already read the secrets, the API token and the HTTP
// endpoint's certificate.
func Preflight(d *daemon.Daemon) error {
	cfg, credDir := d.Config(), d.CredentialsDir()
	rc, err := RaftConfig(cfg, credDir)
	if err != nil {
		return fmt.Errorf("raft: %w", err)
	}
	if rc.TLS.CertFile != "" {
		creds, err := transport.LoadCredentials(rc.TLS.CertFile, rc.TLS.KeyFile, rc.TLS.CAFile, rc.TLS.ServerName)
		if err != nil {
			return fmt.Errorf("replica.tls: %w", err)
		}
		if err := creds.CheckNames(rc.ID); err != nil {
			return fmt.Errorf("replica.tls.certFile %s: %w", rc.TLS.CertFile, err)
		}
	}
	// A registry of its own: the daemon's gets the real adapters' metrics.
	if _, err := all.New(d.ArrayConfigs(), arrayclients.Options{Registry: prometheus.NewRegistry()}); err != nil {
		return fmt.Errorf("arrays: %w", err)
	}
	if len(cfg.Peers) > 0 {
		if _, err := forwardClient(cfg, credDir); err != nil {
			return fmt.Errorf("client for calls to peers: %w", err)
		}
	}
	for i, c := range cfg.Clusters {
		if _, err := detectorPolicy(c); err != nil {
			return fmt.Errorf("clusters[%d] (%s): %w", i, c.Name, err)
		}
	}
	return nil
}
