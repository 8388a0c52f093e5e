package server

import (
	"net/http"
	"net/http/pprof"
)

// registerPprof serves Go's runtime profiles under /debug/pprof/ to
// operators (Authorize). Only the routes registered here are served:
// importing net/http/pprof adds them to http.DefaultServeMux, which fenced
// never serves.
func (s *Server) registerPprof() {
	s.Handle("GET /debug/pprof/", s.Authorize(http.HandlerFunc(pprof.Index)))
	s.Handle("GET /debug/pprof/cmdline", s.Authorize(http.HandlerFunc(pprof.Cmdline)))
	s.Handle("GET /debug/pprof/profile", s.Authorize(http.HandlerFunc(pprof.Profile)))
	s.Handle("GET /debug/pprof/symbol", s.Authorize(http.HandlerFunc(pprof.Symbol)))
	s.Handle("GET /debug/pprof/trace", s.Authorize(http.HandlerFunc(pprof.Trace)))
}
