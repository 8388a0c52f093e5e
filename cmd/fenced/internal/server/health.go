package server

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/fenced-project/fenced/cmd/fenced/status"
)

// ReadinessCheck returns nil when its component is ready to serve its role,
// or an error saying why not. It must return promptly and honour ctx.
type ReadinessCheck func(ctx context.Context) error

type namedCheck struct {
	name  string
	check ReadinessCheck
}

// AddReadinessCheck adds a check /readyz runs. The replica is ready when
// every check passes. Names appear in /readyz and /status; give each
// component its own (e.g. "cluster/prod", "raft").
func (s *Server) AddReadinessCheck(name string, check ReadinessCheck) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checks = append(s.checks, namedCheck{name: name, check: check})
}

// Ready runs every readiness check.
func (s *Server) Ready(ctx context.Context) (bool, []status.Check) {
	s.mu.RLock()
	checks := append([]namedCheck(nil), s.checks...)
	s.mu.RUnlock()
	ready := true
	out := make([]status.Check, 0, len(checks))
	for _, c := range checks {
		cctx, cancel := context.WithTimeout(ctx, s.opts.CheckTimeout)
		err := c.check(cctx)
		cancel()
		r := status.Check{Name: c.name, OK: err == nil}
		if err != nil {
			ready = false
			r.Error = s.opts.Redact(err.Error())
			if len(r.Error) > maxCheckError {
				r.Error = r.Error[:maxCheckError] + "…"
			}
		}
		out = append(out, r)
	}
	return ready, out
}

// healthz answers 200 while the process serves HTTP at all.
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = fmt.Fprintln(w, "ok")
}

// readyz answers 200 when every readiness check passes and 503 otherwise,
// listing the failing checks (all checks with ?verbose).
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ready, checks := s.Ready(r.Context())
	_, verbose := r.URL.Query()["verbose"]
	var b strings.Builder
	for _, c := range checks {
		switch {
		case !c.OK:
			fmt.Fprintf(&b, "[-] %s: %s\n", c.Name, c.Error)
		case verbose:
			fmt.Fprintf(&b, "[+] %s\n", c.Name)
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if !ready {
		w.WriteHeader(http.StatusServiceUnavailable)
		b.WriteString("not ready\n")
	} else {
		b.WriteString("ok\n")
	}
	_, _ = w.Write([]byte(s.opts.Redact(b.String())))
}

// maxCheckError bounds a readiness check's error in /readyz and /status:
// an array's error body can be long.
const maxCheckError = 512
