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
// 401 or 403 otherwise, and nothing is forwarded). A follower forwards a
// call proven by the API token with the token, over this replica's
// certificate, so the leader verifies the token itself and knows from the
// certificate which replica carried it; it redirects a call proven by a
// client certificate to the leader (307), where the operator's client
// presents the certificate itself.
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
		fh := f.node.ForwardingHandler(h, cluster.ForwardOptions{Client: client, Redirect: certificateCaller})
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
		Caller: func(r *http.Request) (string, bool) {
			c, ok := stonith.CallerOf(r)
			if !ok || c.Role != stonith.RoleReplica {
				return "", false
			}
			return c.Replica, true
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

// certificateCaller says whether a request behind the API's authorization
// was proven by an operator's client certificate: a follower redirects it
// to the leader rather than forwarding it.
func certificateCaller(r *http.Request) bool {
	c, ok := stonith.CallerOf(r)
	return ok && c.Certificate
}

// vantageAuth authorizes a vantage report: a replica's certificate, or, on an endpoint without TLS,
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

// vantageRoute serves the internal route on every replica: the leader
// takes the report, a follower answers 503 not_leader (a report is never
// forwarded: the leader would see the follower's certificate, not the
// sender's).
func (f *fencing) vantageRoute() error {
	if len(f.d.Config().Peers) == 0 {
		return nil
	}
	f.d.Handle(http.MethodPost+" "+groupview.Path, vantageAuth(f.d.Authenticator(), f.vantage))
	return nil
}
