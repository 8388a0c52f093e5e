// Package tracktest drives a family's simulator in-process with the audit
// check on (simcore.AuditCheckLog), for tests proving that the family's
// per-object change tracking (simcore.Tracker) audits every write as full
// snapshots do.
package tracktest

import (
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/tests/arraysim/simcore"
)

// Bed is one simulator behind a server that compares the tracked audit
// of every write with full snapshots.
type Bed struct {
	// Srv is the server; Header is sent with every request (credentials).
	Srv    *simcore.Server
	Header http.Header
}

// New wraps fam, which must be a simcore.Tracker, with the audit check on.
func New(t testing.TB, name string, fam simcore.Family) *Bed {
	t.Helper()
	_, ok := fam.(simcore.Tracker)
	require.True(t, ok, "%T tracks its objects", fam)
	srv := simcore.New(name, fam, nil)
	srv.SetAuditCheck(simcore.AuditCheckLog)
	return &Bed{Srv: srv, Header: http.Header{}}
}

// Call is one request; Header adds to the bed's.
type Call struct {
	Method, Path, Body string
	Header             http.Header
}

// Do serves one request with the bed's header and returns the answer.
func (b *Bed) Do(t testing.TB, c Call) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequestWithContext(t.Context(), c.Method, c.Path, strings.NewReader(c.Body))
	for _, h := range []http.Header{b.Header, c.Header} {
		for k, v := range h {
			r.Header[k] = v
		}
	}
	if c.Body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	w := httptest.NewRecorder()
	b.Srv.ServeHTTP(w, r)
	return w
}

// Must serves a request that must succeed (status below 300).
func (b *Bed) Must(t testing.TB, c Call) *httptest.ResponseRecorder {
	t.Helper()
	w := b.Do(t, c)
	require.Less(t, w.Code, 300, "%s %s: %s", c.Method, c.Path, w.Body.String())
	return w
}

// Signals sets a host's signals through /_sim/signals, between writes.
func (b *Bed) Signals(t testing.TB, host string, connected, ioActive bool) {
	t.Helper()
	body, err := json.Marshal(simcore.SignalsRequest{Host: host,
		Signals: simcore.Signals{Connected: simcore.Bool(connected), IOActive: simcore.Bool(ioActive)}})
	require.NoError(t, err)
	w := httptest.NewRecorder()
	b.Srv.ServeHTTP(w, httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/_sim/signals", strings.NewReader(string(body))))
	require.Equal(t, http.StatusNoContent, w.Code, w.Body.String())
}

// Random serves n requests made by next, one at a time: a randomized
// sequence for the audit check (failures are part of it).
func (b *Bed) Random(t testing.TB, seed uint64, n int, next func(rng *rand.Rand) Call) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	for range n {
		b.Do(t, next(rng))
	}
}

// RequireAuditsMatch checks that the audit check compared every write the
// server audited (not the queries), found no mismatch, and that at least
// minChanged of them changed the array (so the comparison was not
// vacuous).
func (b *Bed) RequireAuditsMatch(t testing.TB, minChanged int) {
	t.Helper()
	writes := 0
	for _, e := range b.Srv.Audit() {
		if simcore.IsWrite(e.Method) && !e.Query && e.Fault == "" {
			writes++
		}
	}
	rep := b.Srv.AuditCheckReport()
	require.Empty(t, rep.Mismatches, "writes whose tracked audit differs from full snapshots")
	require.Equal(t, writes, rep.Checked, "every write was compared")
	require.True(t, b.Srv.Tracked(), "tracking never fell back to full snapshots")
	require.GreaterOrEqual(t, len(b.Srv.AuditWrites()), minChanged, "writes that changed the array")
}
