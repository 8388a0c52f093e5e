package server

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/fenced-project/fenced/cmd/fenced/status"
)

// StatusProvider fills the sections of the status document its component
// owns (st.Raft, st.Clusters, st.Fences, st.Arrays). Providers run one
// after another for each request, each bounded by a timeout; a provider
// must not keep st after it returns.
type StatusProvider func(ctx context.Context, st *status.Status)

// AddStatusProvider adds a provider. Providers run in the order added.
func (s *Server) AddStatusProvider(p StatusProvider) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.providers = append(s.providers, p)
}

// Status builds the status document.
func (s *Server) Status(ctx context.Context) status.Status {
	now := s.opts.Now()
	up := now.Sub(s.startedAt)
	st := status.Status{
		Version:       s.opts.Build.Version,
		Revision:      s.opts.Build.Revision,
		GoVersion:     s.opts.Build.GoVersion,
		ReplicaID:     s.opts.ReplicaID,
		StartedAt:     s.startedAt.UTC().Round(time.Millisecond),
		Uptime:        up.Round(time.Second).String(),
		UptimeSeconds: up.Seconds(),
	}
	st.Ready, st.Checks = s.Ready(ctx)
	s.mu.RLock()
	providers := append([]StatusProvider(nil), s.providers...)
	s.mu.RUnlock()
	for _, p := range providers {
		pctx, cancel := context.WithTimeout(ctx, s.opts.CheckTimeout)
		p(pctx, &st)
		cancel()
	}
	return st
}

func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	st := s.Status(r.Context())
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		s.opts.Logger.Warn("encode /status", "error", err)
		http.Error(w, "encode status", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	// /status is unauthenticated: every secret and credential the daemon
	// holds is taken out of it, in whatever form a component put it there.
	_, _ = w.Write(append([]byte(s.opts.Redact(string(b))), '\n'))
}
