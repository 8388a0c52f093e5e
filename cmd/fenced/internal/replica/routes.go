package replica

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/fenced-project/fenced/cluster"
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
