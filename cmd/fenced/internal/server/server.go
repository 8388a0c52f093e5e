// Package server is fenced's HTTP endpoint: /healthz, /readyz, /status and
// /metrics, plus whatever routes the daemon's components add. Components
// plug in through Handle (routes), AddReadinessCheck, AddStatusProvider and
// Registry (metrics).
package server

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fenced-project/fenced/cmd/fenced/internal/buildinfo"
)

// Options configure a Server.
type Options struct {
	// ReplicaID is reported in /status.
	ReplicaID string
	// Build is reported in /status and fenced_build_info.
	Build buildinfo.Info
	// Logger receives request errors.
	Logger *slog.Logger
	// Token, when set, authorizes mutating requests that present it as
	// "Authorization: Bearer <token>" (see Authorize). Ignored when
	// Authorize is set.
	Token string
	// Redact, when set, removes secrets from /status and /readyz (which
	// need no credentials); default none.
	Redact func(string) string
	// Authorize, when set, replaces the token check of Authorize: it wraps
	// a mutating handler with the daemon's own rules for callers.
	Authorize func(http.Handler) http.Handler
	// CheckTimeout bounds each readiness check and status provider.
	// Default 2s.
	CheckTimeout time.Duration
	// Pprof registers net/http/pprof's handlers under /debug/pprof/,
	// wrapped by Authorize: profiles are for operators.
	Pprof bool
	// Now returns the current time; default time.Now.
	Now func() time.Time

	// Request limits. MaxBodyBytes bounds a request body (default 1 MiB;
	// more is answered 413), MaxHeaderBytes the request line and headers
	// (default 64 KiB; more is answered 431). ReadHeaderTimeout (default
	// 10s) and ReadTimeout (default 30s) bound reading a request, so a slow
	// client cannot hold connections open; WriteTimeout (default 2m) bounds
	// a response, longer than any handler waits (forwarding to the leader
	// waits at most a few seconds).
	MaxBodyBytes      int64
	MaxHeaderBytes    int
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration
}

// Server is the HTTP endpoint. Its methods are safe for concurrent use, and
// routes, checks and providers may be added while it serves.
type Server struct {
	opts      Options
	mux       *http.ServeMux
	reg       *prometheus.Registry
	startedAt time.Time

	mu        sync.RWMutex
	checks    []namedCheck
	providers []StatusProvider
	// methods are the methods registered per path (for a 405 from the
	// catch-all route).
	methods map[string][]string
}

// New returns a Server with the built-in routes registered.
func New(opts Options) *Server {
	if opts.CheckTimeout <= 0 {
		opts.CheckTimeout = 2 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Redact == nil {
		opts.Redact = func(s string) string { return s }
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 1 << 20
	}
	if opts.MaxHeaderBytes <= 0 {
		opts.MaxHeaderBytes = 64 << 10
	}
	if opts.ReadHeaderTimeout <= 0 {
		opts.ReadHeaderTimeout = 10 * time.Second
	}
	if opts.ReadTimeout <= 0 {
		opts.ReadTimeout = 30 * time.Second
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = 2 * time.Minute
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{opts: opts, mux: http.NewServeMux(), startedAt: opts.Now()}
	s.reg = newRegistry(opts.Build)
	s.Handle("GET /healthz", http.HandlerFunc(s.healthz))
	s.Handle("GET /readyz", http.HandlerFunc(s.readyz))
	s.Handle("GET /status", http.HandlerFunc(s.status))
	s.Handle("GET /metrics", s.metricsHandler())
	if opts.Pprof {
		s.registerPprof()
	}
	s.mux.HandleFunc("/", s.notFound)
	return s
}

// notFound answers a path no route serves with a JSON error that says
// what this replica does serve: the fencing API (/v1/...) exists only on a
// replica with a cluster configured.
func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	s.mu.RLock()
	allowed := s.methods[r.URL.Path]
	served := slices.Sorted(maps.Keys(s.methods))
	s.mu.RUnlock()
	if len(allowed) > 0 { // the path is served, with another method
		w.Header().Set("Allow", strings.Join(allowed, ", "))
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	msg := fmt.Sprintf("no route %s %s on this replica: it serves %s", r.Method, r.URL.Path, strings.Join(served, ", "))
	if strings.HasPrefix(r.URL.Path, "/v1/") && !slices.ContainsFunc(served, func(p string) bool { return strings.HasPrefix(p, "/v1/") }) {
		msg += "; the fencing API (/v1/...) is served only when a cluster is configured"
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusNotFound)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

// Handle registers a route. Patterns are net/http.ServeMux patterns and
// may name a method: Handle("POST /v1/fence", h). Like ServeMux, it panics
// when the pattern conflicts with one already registered: routes are wired
// at start-up, and a conflict is a programming error.
func (s *Server) Handle(pattern string, h http.Handler) {
	s.mux.Handle(pattern, h)
	if method, path, ok := strings.Cut(pattern, " "); ok {
		s.mu.Lock()
		if s.methods == nil {
			s.methods = map[string][]string{}
		}
		s.methods[path] = append(s.methods[path], method)
		s.mu.Unlock()
	}
}

// Handler returns the server's root handler.
func (s *Server) Handler() http.Handler { return s.mux }

// Registry is the server's own Prometheus registry (no global state):
// components register their collectors here.
func (s *Server) Registry() *prometheus.Registry { return s.reg }

// StartedAt is when the server was created.
func (s *Server) StartedAt() time.Time { return s.startedAt }

// Serve serves on ln until ctx is cancelled, then shuts down gracefully,
// waiting at most shutdownTimeout for requests in flight. tlsConfig, when
// not nil, makes it HTTPS. It returns nil after a clean shutdown.
func (s *Server) Serve(ctx context.Context, ln net.Listener, tlsConfig *tls.Config, shutdownTimeout time.Duration) error {
	hs := &http.Server{
		Handler:           http.MaxBytesHandler(s.mux, s.opts.MaxBodyBytes),
		ReadHeaderTimeout: s.opts.ReadHeaderTimeout,
		ReadTimeout:       s.opts.ReadTimeout,
		WriteTimeout:      s.opts.WriteTimeout,
		MaxHeaderBytes:    s.opts.MaxHeaderBytes,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.opts.Logger.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	if tlsConfig != nil {
		ln = tls.NewListener(ln, tlsConfig)
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve http on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		_ = hs.Close()
		return fmt.Errorf("shut down http server: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve http on %s: %w", ln.Addr(), err)
	}
	return nil
}
