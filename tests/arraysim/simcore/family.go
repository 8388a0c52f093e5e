// Package simcore is the framework every array simulator builds on.
//
// A family package (powerflex, powerstore, powerscale, powermax, unity)
// implements Family: the array's own REST API as an http.Handler plus a few
// hooks. Server wraps a Family with what every simulator needs and no family
// should write twice: fault injection per path pattern, an audit log that
// records every request and the state change each write caused (the
// array-side witness for the fencing invariants), and admin endpoints under
// /_sim/. Serve puts a handler on a loopback port, over plain HTTP or HTTPS
// with a generated self-signed certificate.
package simcore

import (
	"encoding/json"
	"net/http"
)

// Family is one simulated array family's REST API plus the hooks the
// framework needs. Implementations must be safe for concurrent use.
type Family interface {
	// ServeHTTP serves the array's own REST API (everything not under /_sim/).
	http.Handler
	// Snapshot returns the full state, JSON-serialisable, in a deterministic
	// (sorted) order so two snapshots of equal states marshal identically.
	Snapshot() any
	// SetSignals sets the array-side health signals of one host. host is
	// the family's object id or name (SDC id/name/GUID, host id/name, client
	// IP). It returns an error naming host when there is no such host.
	SetSignals(host string, s Signals) error
	// ErrorBody returns the family's own error body for an injected error.
	ErrorBody(status int, msg string) []byte
}

// SessionExpirer is implemented by families with login sessions or tokens.
// ExpireSessions invalidates every session so the next request with an old
// token gets the array's "not authenticated" answer and the client must log
// in again. It is served at POST /_sim/expire-sessions.
type SessionExpirer interface {
	ExpireSessions()
}

// Querier is implemented by families whose API answers some read-only
// queries with a write method (POST metrics/generate and the like). The
// server serves a request IsQuery accepts like a GET: concurrently, outside
// the write lock and without before/after snapshots, and audits it as
// unchanged. IsQuery must not read the body, and must accept only requests
// that change nothing in Snapshot.
type Querier interface {
	IsQuery(r *http.Request) bool
}

// Signals are array-side health signals of one host; nil fields are left
// unchanged.
type Signals struct {
	Connected *bool `json:"connected,omitempty"`
	IOActive  *bool `json:"ioActive,omitempty"`
}

// Bool returns a pointer to b, for building Signals.
func Bool(b bool) *bool { return &b }

// WriteJSON writes v as a JSON response with the given status. Family
// packages may use it for their replies.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "marshal response: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// IsWrite reports whether an HTTP method may change state (POST, PUT, PATCH,
// DELETE). The server snapshots state around such requests.
func IsWrite(method string) bool {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}
