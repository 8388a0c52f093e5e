package replica

import (
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/fenced-project/fenced/cluster"
	"github.com/fenced-project/fenced/configs"
	"github.com/fenced-project/fenced/detector/groupview"
	"github.com/fenced-project/fenced/stonith"
)

// routes serves the pipeline's API under /v1/. Every route is wrapped by
// the Raft node's forwarding, so any replica accepts it and the leader
// serves it. A mutating route is authorized first on the replica that
// received it (the API token or a listed operator's client certificate;
// 401 or 403 otherwise, and nothing is forwarded), then again by the
// leader's API, which believes the caller a follower names
// (stonith.CallerHeader) only from a replica's certificate.
func (f *fencing) routes() error {
	cfg := f.d.Config()
	auth := f.d.Authenticator()
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

// newVantage builds this replica's share of the kubelet probes: in a
// group of more than one, the client that reports to the leader (this
// replica's certificate, and the API token where that is needed).
func newVantage(cfg *configs.Config, credDir string, node groupview.Node, log *slog.Logger) (*groupview.Sharing, error) {
	sc := groupview.SharingConfig{Self: cfg.Replica.ID, Node: node, Logger: log,
		Cert: cfg.Replica.TLS.CertFile != "" && cfg.Replica.TLS.KeyFile != "",
		Caller: func(r *http.Request) (string, string, bool) {
			c, ok := stonith.CallerOf(r)
			if !ok || c.Role != stonith.RoleReplica {
				return "", "", false
			}
			return c.Replica, c.Via, true
		}}
	if len(cfg.Peers) == 0 {
		return groupview.NewSharing(sc), nil
	}
	client, err := forwardClient(cfg, credDir)
	if err != nil {
		return nil, fmt.Errorf("client for vantage reports: %w", err)
	}
	client.Timeout = groupview.SendTimeout
	sc.Client = client
	if cfg.HTTP.TokenFile != "" {
		p, err := configs.ResolveFile(cfg.HTTP.TokenFile, credDir)
		if err != nil {
			return nil, fmt.Errorf("http.tokenFile: %w", err)
		}
		tok, err := configs.ReadSecretFile(p)
		if err != nil {
			return nil, fmt.Errorf("http.tokenFile: %w", err)
		}
		sc.Token = tok
	}
	return groupview.NewSharing(sc), nil
}

// vantageAuth authorizes a vantage report: a replica's certificate (in
// person or forwarded by another replica), or, on an endpoint without TLS,
// the API token from loopback. The report is then taken as the replica the
// certificate names only (see ServeHTTP); without TLS there is no
// certificate and the replica is what the report says.
func vantageAuth(auth *stonith.Authenticator, h http.Handler) http.Handler {
	replica := auth.RequireReplica(h)
	operator := auth.RequireOperator(h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil {
			operator.ServeHTTP(w, r) // the token, from loopback only
			return
		}
		replica.ServeHTTP(w, r)
	})
}

// vantageRoute serves the internal route: authorized on the replica that
// receives it, forwarded to the leader.
func (f *fencing) vantageRoute() error {
	if len(f.d.Config().Peers) == 0 {
		return nil
	}
	client, err := forwardClient(f.d.Config(), f.d.CredentialsDir())
	if err != nil {
		return fmt.Errorf("client for forwarding to the leader: %w", err)
	}
	f.d.Handle(http.MethodPost+" "+groupview.Path, vantageAuth(f.d.Authenticator(), f.node.ForwardingHandler(f.vantage, cluster.ForwardOptions{Client: client})))
	return nil
}
