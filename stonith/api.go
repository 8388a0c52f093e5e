package stonith

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/fenced-project/fenced/cluster"
	"github.com/fenced-project/fenced/cluster/ledger"
	"github.com/fenced-project/fenced/kube"
)

// API routes, relative to the daemon's root.
const (
	RouteFence   = "POST /v1/fence"
	RouteUnfence = "POST /v1/unfence"
	RoutePause   = "POST /v1/pause"
	RouteResume  = "POST /v1/resume"
	RouteFences  = "GET /v1/fences"
)

const maxBody = 64 << 10

// API is the operator's HTTP interface to the pipeline. The mutating
// routes need credentials (401 without) and act on the leader; the daemon
// wraps them with the group's forwarding so a follower passes them on.
type API struct {
	c    *Controller
	auth *Authenticator
}

// NewAPI returns the API of controller c.
func NewAPI(c *Controller, auth *Authenticator) *API {
	return &API{c: c, auth: auth}
}

// Routes returns the handlers by ServeMux pattern (method and path).
func (a *API) Routes() map[string]http.Handler {
	return map[string]http.Handler{
		RouteFence: a.action(func(ctx context.Context, who string, body []byte) (any, error) {
			var req FenceRequest
			if err := decode(body, &req); err != nil {
				return nil, err
			}
			if err := validNames(req.Cluster, req.Node); err != nil {
				return nil, err
			}
			return a.c.Fence(ctx, who, req)
		}),
		RouteUnfence: a.action(func(ctx context.Context, who string, body []byte) (any, error) {
			var req UnfenceRequest
			if err := decode(body, &req); err != nil {
				return nil, err
			}
			if err := validNames(req.Cluster, req.Node); err != nil {
				return nil, err
			}
			return a.c.Unfence(ctx, who, req)
		}),
		RoutePause: a.action(func(ctx context.Context, who string, body []byte) (any, error) {
			var req PauseRequest
			if err := decode(body, &req); err != nil {
				return nil, err
			}
			if err := validNames(req.Cluster, ""); err != nil {
				return nil, err
			}
			return a.c.SetPause(ctx, who, req, true)
		}),
		RouteResume: a.action(func(ctx context.Context, who string, body []byte) (any, error) {
			var req PauseRequest
			if err := decode(body, &req); err != nil {
				return nil, err
			}
			if err := validNames(req.Cluster, ""); err != nil {
				return nil, err
			}
			return a.c.SetPause(ctx, who, req, false)
		}),
		RouteConfirm: a.action(func(ctx context.Context, who string, body []byte) (any, error) {
			var req ConfirmRequest
			if err := decode(body, &req); err != nil {
				return nil, err
			}
			if err := validNames(req.Cluster, req.Node); err != nil {
				return nil, err
			}
			return a.c.Confirm(ctx, who, req)
		}),
		RouteAbandon: a.action(func(ctx context.Context, who string, body []byte) (any, error) {
			var req AbandonRequest
			if err := decode(body, &req); err != nil {
				return nil, err
			}
			if err := validNames(req.Cluster, req.Node); err != nil {
				return nil, err
			}
			return a.c.Abandon(ctx, who, req)
		}),
		RoutePlan: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if _, ok := a.auth.Authenticate(r); !ok {
				w.Header().Set("WWW-Authenticate", `Bearer realm="fenced"`)
				writeJSON(w, http.StatusUnauthorized, errorBody{Error: "unauthorized: present the API token or a client certificate"})
				return
			}
			q := r.URL.Query()
			res, err := a.c.PlanNode(r.Context(), PlanRequest{Cluster: q.Get("cluster"), Node: q.Get("node")})
			if err != nil {
				writeJSON(w, statusOf(err), errorBody{Error: err.Error()})
				return
			}
			writeJSON(w, http.StatusOK, res)
		}),
		RouteFences: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusOK, a.c.Status())
		}),
	}
}

// Handler returns a ServeMux serving every route.
func (a *API) Handler() http.Handler {
	mux := http.NewServeMux()
	for pattern, h := range a.Routes() {
		mux.Handle(pattern, h)
	}
	return mux
}

// validNames checks a request's cluster name (an RFC 1123 label, as in
// the configuration; empty allowed, the caller requires it where needed)
// and node name (an RFC 1123 subdomain, as Kubernetes names nodes).
func validNames(cluster, node string) error {
	if cluster != "" {
		if errs := validation.IsDNS1123Label(cluster); len(errs) > 0 {
			return fmt.Errorf("%w: cluster %q: %s", ErrBadRequest, truncateName(cluster), strings.Join(errs, "; "))
		}
	}
	if node != "" {
		if errs := validation.IsDNS1123Subdomain(node); len(errs) > 0 {
			return fmt.Errorf("%w: node %q: %s", ErrBadRequest, truncateName(node), strings.Join(errs, "; "))
		}
	}
	return nil
}

func decode(body []byte, v any) error {
	dec := json.NewDecoder(bytesReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: request body: %w", ErrBadRequest, err)
	}
	return nil
}

// action authenticates, reads the body and maps errors to status codes.
func (a *API) action(fn func(ctx context.Context, who string, body []byte) (any, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, ok := CallerOf(r)
		var err error
		if !ok {
			c, err = a.auth.Identify(r)
		}
		if err == nil && c.Role != RoleOperator {
			err = fmt.Errorf("%s is not an operator: %w", c.Name, ErrNotOperator)
		}
		if errors.Is(err, ErrNotOperator) {
			writeJSON(w, http.StatusForbidden, errorBody{Error: "forbidden: " + err.Error()})
			return
		}
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="fenced"`)
			writeJSON(w, http.StatusUnauthorized, errorBody{Error: "unauthorized: present the API token or a client certificate"})
			return
		}
		who := c.Name
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeJSON(w, http.StatusRequestEntityTooLarge, errorBody{Error: fmt.Sprintf("request body larger than %d bytes", maxBody)})
			return
		}
		if err != nil {
			writeJSON(w, http.StatusBadRequest, errorBody{Error: "read request body: " + err.Error()})
			return
		}
		res, err := fn(withCarrier(r.Context(), c.Via), who, body)
		if err != nil {
			writeJSON(w, statusOf(err), errorBody{Error: err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, res)
	})
}

type errorBody struct {
	Error string `json:"error"`
}

func statusOf(err error) int {
	switch {
	case errors.Is(err, ErrBadRequest), errors.Is(err, ledger.ErrInvalid):
		return http.StatusBadRequest
	case errors.Is(err, ErrUnknownCluster):
		return http.StatusNotFound
	case errors.Is(err, ErrConflict), errors.Is(err, ErrRefused), errors.Is(err, ledger.ErrConflict), errors.Is(err, ErrLedgerVersion),
		errors.Is(err, ledger.ErrBadTransition), errors.Is(err, ledger.ErrPaused):
		return http.StatusConflict
	case errors.Is(err, ErrNotLeader), errors.Is(err, cluster.ErrNotLeader), errors.Is(err, cluster.ErrNoLeader),
		errors.Is(err, kube.ErrNotSynced):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
