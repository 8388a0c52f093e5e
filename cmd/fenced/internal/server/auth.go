package server

import (
	"crypto/subtle"
	"net"
	"net/http"
	"strings"
)

// Authorize wraps a mutating handler with Options.Authorize when set.
// Otherwise the request must carry the configured bearer token, accepted
// over HTTPS, or over plain HTTP from a loopback client only; a client
// certificate alone is not enough (who may act by certificate is for
// Options.Authorize to say). Everything else gets 401.
func (s *Server) Authorize(h http.Handler) http.Handler {
	if s.opts.Authorize != nil {
		return s.opts.Authorize(h)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.authorized(r) {
			h.ServeHTTP(w, r)
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="fenced"`)
		http.Error(w, "unauthorized: present the API token or a client certificate", http.StatusUnauthorized)
	})
}

func (s *Server) authorized(r *http.Request) bool {
	if s.opts.Token == "" {
		return false
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(s.opts.Token)) != 1 {
		return false
	}
	if r.TLS != nil {
		return true
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
