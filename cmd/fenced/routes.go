package main

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/fenced-project/fenced/cluster"
	"github.com/fenced-project/fenced/configs"
	"github.com/fenced-project/fenced/stonith"
)

// routes serves the pipeline's API under /v1/. Every route is wrapped by
// the Raft node's forwarding, so any replica accepts it and the leader
// serves it. A mutating route is authorized first on the replica that
// received it (the API token or a client certificate; 401 otherwise, and
// nothing is forwarded), then again by the leader's API.
func (f *fencing) routes() error {
	cfg := f.d.Config()
	tokenPath := ""
	if cfg.HTTP.TokenFile != "" {
		p, err := configs.ResolveFile(cfg.HTTP.TokenFile, f.d.CredentialsDir())
		if err != nil {
			return fmt.Errorf("http.tokenFile: %w", err)
		}
		tokenPath = p
	}
	auth, err := stonith.NewAuthenticator(tokenPath)
	if err != nil {
		return fmt.Errorf("http.tokenFile: %w", err)
	}
	client, err := forwardClient(cfg, f.d.CredentialsDir())
	if err != nil {
		return fmt.Errorf("client for forwarding to the leader: %w", err)
	}
	api := stonith.NewAPI(f.ctrl, auth)
	for pattern, h := range api.Routes() {
		if pattern == stonith.RoutePlan {
			// Read-only: any replica answers from its own informers,
			// ledger and arrays.
			f.d.Handle(pattern, h)
			continue
		}
		fh := f.node.ForwardingHandler(h, cluster.ForwardOptions{Client: client})
		if strings.HasPrefix(pattern, http.MethodPost+" ") {
			fh = f.d.Authorize(fh)
		}
		f.d.Handle(pattern, fh)
	}
	return nil
}
