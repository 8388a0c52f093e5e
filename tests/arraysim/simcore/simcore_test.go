package simcore_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/tests/arraysim/simcore"
)

// kvFamily is a tiny family: PUT /kv/{key} sets a value, GET reads it.
type kvFamily struct {
	mu      sync.Mutex
	kv      map[string]string
	signals map[string]simcore.Signals
}

func newKV() *kvFamily {
	return &kvFamily{kv: map[string]string{}, signals: map[string]simcore.Signals{"host-a": {}}}
}

func (f *kvFamily) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := strings.TrimPrefix(r.URL.Path, "/kv/")
	f.mu.Lock()
	defer f.mu.Unlock()
	switch r.Method {
	case http.MethodGet:
		v, ok := f.kv[key]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write(f.ErrorBody(404, "no key "+key))
			return
		}
		simcore.WriteJSON(w, 200, map[string]string{"value": v})
	case http.MethodPut:
		b, _ := io.ReadAll(r.Body)
		f.kv[key] = string(b)
		w.WriteHeader(http.StatusNoContent)
	case http.MethodDelete:
		delete(f.kv, key)
		w.WriteHeader(http.StatusNoContent)
	default:
		w.WriteHeader(http.StatusMethodNotAllowed)
	}
}

type kvSnap struct {
	Items []map[string]string `json:"items"`
}

func (f *kvFamily) Snapshot() any {
	f.mu.Lock()
	defer f.mu.Unlock()
	keys := make([]string, 0, len(f.kv))
	for k := range f.kv {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	s := kvSnap{Items: []map[string]string{}}
	for _, k := range keys {
		s.Items = append(s.Items, map[string]string{"id": k, "value": f.kv[k]})
	}
	return s
}

func (f *kvFamily) SetSignals(host string, s simcore.Signals) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	cur, ok := f.signals[host]
	if !ok {
		return fmt.Errorf("no host %q", host)
	}
	if s.Connected != nil {
		cur.Connected = s.Connected
	}
	if s.IOActive != nil {
		cur.IOActive = s.IOActive
	}
	f.signals[host] = cur
	return nil
}

func (f *kvFamily) ErrorBody(status int, msg string) []byte {
	b, _ := json.Marshal(map[string]any{"status": status, "msg": msg})
	return b
}

func serve(t *testing.T, useTLS bool) (*simcore.Server, *kvFamily, *simcore.Listener, *http.Client) {
	t.Helper()
	fam := newKV()
	srv := simcore.New("kv-1", fam, nil)
	l, err := simcore.Serve(srv, "127.0.0.1:0", useTLS, t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, l.Close()) })
	client := &http.Client{Timeout: 5 * time.Second}
	if useTLS {
		pem, err := os.ReadFile(l.CAFile)
		require.NoError(t, err)
		pool := x509.NewCertPool()
		require.True(t, pool.AppendCertsFromPEM(pem))
		client.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	}
	return srv, fam, l, client
}

func do(t *testing.T, c *http.Client, method, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestAuditRecordsWritesWithChange(t *testing.T) {
	srv, _, l, c := serve(t, false)
	st, _ := do(t, c, http.MethodPut, l.URL+"/kv/a", `{"password":"s3cret","x":1}`)
	require.Equal(t, 204, st)
	st, _ = do(t, c, http.MethodGet, l.URL+"/kv/a?x=1", "")
	require.Equal(t, 200, st)
	st, _ = do(t, c, http.MethodDelete, l.URL+"/kv/missing", "")
	require.Equal(t, 204, st)

	audit := srv.Audit()
	require.Len(t, audit, 3)
	assert.Equal(t, int64(1), audit[0].Seq)
	assert.True(t, audit[0].Changed)
	assert.Equal(t, "+$.items[a]", audit[0].Change)
	assert.NotContains(t, audit[0].Body, "s3cret")
	assert.Contains(t, audit[0].Body, `"password":"***"`)
	assert.Equal(t, "/kv/a?x=1", audit[1].Path)
	assert.False(t, audit[1].Changed)
	assert.False(t, audit[2].Changed, "deleting an absent key changes nothing")
	assert.Equal(t, 204, audit[2].Status)

	writes := srv.AuditWrites()
	require.Len(t, writes, 1)
	assert.Equal(t, http.MethodPut, writes[0].Method)
}

// queryKV is kvFamily whose POST /kv/{key} reads the key, as arrays answer
// metric queries with POST, and whose PUT waits on hold once entered.
type queryKV struct {
	*kvFamily
	entered, hold chan struct{}
	snapshots     atomic.Int64
}

func (f *queryKV) IsQuery(r *http.Request) bool { return r.Method == http.MethodPost }

func (f *queryKV) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodPost:
		r = r.Clone(r.Context())
		r.Method = http.MethodGet
	case http.MethodPut:
		f.entered <- struct{}{}
		<-f.hold
	}
	f.kvFamily.ServeHTTP(w, r)
}

func (f *queryKV) Snapshot() any {
	f.snapshots.Add(1)
	return f.kvFamily.Snapshot()
}

func TestQueriesBypassTheWriteLock(t *testing.T) {
	fam := &queryKV{kvFamily: newKV(), entered: make(chan struct{}, 1), hold: make(chan struct{})}
	srv := simcore.New("kv-1", fam, nil)
	l, err := simcore.Serve(srv, "127.0.0.1:0", false, t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, l.Close()) })
	c := &http.Client{Timeout: 5 * time.Second}

	// A write holds the write lock; a query is answered meanwhile.
	done := make(chan int)
	go func() {
		req, _ := http.NewRequest(http.MethodPut, l.URL+"/kv/a", strings.NewReader("1"))
		resp, err := c.Do(req)
		if err != nil {
			done <- 0
			return
		}
		_ = resp.Body.Close()
		done <- resp.StatusCode
	}()
	<-fam.entered
	st, _ := do(t, c, http.MethodPost, l.URL+"/kv/a", "")
	assert.Equal(t, http.StatusNotFound, st, "the query reads the state before the held write")
	assert.Equal(t, int64(1), fam.snapshots.Load(), "only the held write took its before snapshot")
	close(fam.hold)
	require.Equal(t, http.StatusNoContent, <-done)
	st, body := do(t, c, http.MethodPost, l.URL+"/kv/a", "")
	assert.Equal(t, http.StatusOK, st)
	assert.JSONEq(t, `{"value":"1"}`, body)
	assert.Equal(t, int64(2), fam.snapshots.Load(), "queries take no snapshots")

	audit := srv.Audit()
	require.Len(t, audit, 3)
	byMethod := map[string][]simcore.AuditEntry{}
	for _, e := range audit {
		byMethod[e.Method] = append(byMethod[e.Method], e)
	}
	require.Len(t, byMethod[http.MethodPut], 1)
	assert.True(t, byMethod[http.MethodPut][0].Changed)
	assert.False(t, byMethod[http.MethodPut][0].Query)
	for _, e := range byMethod[http.MethodPost] {
		assert.True(t, e.Query)
		assert.False(t, e.Changed)
	}
	assert.Len(t, srv.AuditWrites(), 1)
}

func TestAdminEndpoints(t *testing.T) {
	srv, fam, l, c := serve(t, false)
	do(t, c, http.MethodPut, l.URL+"/kv/a", "1")

	st, body := do(t, c, http.MethodGet, l.URL+"/_sim/state", "")
	require.Equal(t, 200, st)
	assert.JSONEq(t, `{"items":[{"id":"a","value":"1"}]}`, body)

	st, _ = do(t, c, http.MethodPost, l.URL+"/_sim/signals", `{"host":"host-a","connected":false}`)
	require.Equal(t, 204, st)
	fam.mu.Lock()
	require.NotNil(t, fam.signals["host-a"].Connected)
	assert.False(t, *fam.signals["host-a"].Connected)
	assert.Nil(t, fam.signals["host-a"].IOActive)
	fam.mu.Unlock()
	st, body = do(t, c, http.MethodPost, l.URL+"/_sim/signals", `{"host":"nope","ioActive":true}`)
	assert.Equal(t, 404, st)
	assert.Contains(t, body, "nope")

	st, body = do(t, c, http.MethodPost, l.URL+"/_sim/faults", `{"kind":"error","status":503,"path":"^/kv/b$","count":1}`)
	require.Equal(t, 200, st, body)
	var added struct{ ID string }
	require.NoError(t, json.Unmarshal([]byte(body), &added))
	require.NotEmpty(t, added.ID)
	st, _ = do(t, c, http.MethodPost, l.URL+"/_sim/faults", `{"kind":"bogus"}`)
	assert.Equal(t, 400, st)
	st, _ = do(t, c, http.MethodPost, l.URL+"/_sim/faults", `{"kind":"latency","latency":"5ms"}`)
	assert.Equal(t, 200, st)
	require.Len(t, srv.Faults(), 2)
	st, _ = do(t, c, http.MethodDelete, l.URL+"/_sim/faults/"+added.ID, "")
	assert.Equal(t, 204, st)
	require.Len(t, srv.Faults(), 1)
	st, _ = do(t, c, http.MethodDelete, l.URL+"/_sim/faults", "")
	assert.Equal(t, 204, st)
	assert.Empty(t, srv.Faults())

	st, body = do(t, c, http.MethodGet, l.URL+"/_sim/audit?writes=1", "")
	require.Equal(t, 200, st)
	lines := 0
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		var e simcore.AuditEntry
		require.NoError(t, json.Unmarshal(sc.Bytes(), &e))
		assert.True(t, e.Changed)
		lines++
	}
	assert.Equal(t, 1, lines, "admin requests are never audited")
	assert.Len(t, srv.Audit(), 1)
}

func TestFaultError(t *testing.T) {
	srv, _, l, c := serve(t, false)
	srv.AddFault(simcore.Fault{Kind: simcore.FaultError, Status: 503, Message: "busy", Method: http.MethodGet, Count: 1})
	st, body := do(t, c, http.MethodGet, l.URL+"/kv/a", "")
	assert.Equal(t, 503, st)
	assert.JSONEq(t, `{"status":503,"msg":"busy"}`, body)
	st, _ = do(t, c, http.MethodGet, l.URL+"/kv/a", "")
	assert.Equal(t, 404, st, "a count-1 fault fires once")
	audit := srv.Audit()
	require.Len(t, audit, 2)
	assert.Equal(t, "error", audit[0].Fault)
	assert.Equal(t, 503, audit[0].Status)
	assert.Empty(t, audit[1].Fault)
}

func TestFaultErrorOnWriteDoesNotChangeState(t *testing.T) {
	srv, fam, l, c := serve(t, false)
	srv.AddFault(simcore.Fault{Kind: simcore.FaultError, Status: 500, Method: http.MethodPut})
	st, _ := do(t, c, http.MethodPut, l.URL+"/kv/a", "1")
	assert.Equal(t, 500, st)
	assert.Empty(t, fam.Snapshot().(kvSnap).Items)
	assert.Empty(t, srv.AuditWrites())
}

func TestFaultMalformed(t *testing.T) {
	srv, _, l, c := serve(t, false)
	do(t, c, http.MethodPut, l.URL+"/kv/a", "1")
	srv.AddFault(simcore.Fault{Kind: simcore.FaultMalformed, Path: "^/kv/"})
	st, body := do(t, c, http.MethodGet, l.URL+"/kv/a", "")
	assert.Equal(t, 200, st)
	var v any
	assert.Error(t, json.Unmarshal([]byte(body), &v))
}

func TestFaultReset(t *testing.T) {
	for _, useTLS := range []bool{false, true} {
		t.Run(fmt.Sprintf("tls=%v", useTLS), func(t *testing.T) {
			srv, _, l, c := serve(t, useTLS)
			srv.AddFault(simcore.Fault{Kind: simcore.FaultReset, Count: 1})
			resp, err := c.Get(l.URL + "/kv/a")
			if resp != nil {
				_ = resp.Body.Close()
			}
			require.Error(t, err)
			st, _ := do(t, c, http.MethodGet, l.URL+"/kv/a", "")
			assert.Equal(t, 404, st)
			require.Eventually(t, func() bool { return len(srv.Audit()) == 2 }, 5*time.Second, 10*time.Millisecond)
			// The reset request is audited once its connection is closed,
			// which can be after the next request is: count, not order.
			var faults []string
			for _, e := range srv.Audit() {
				faults = append(faults, e.Fault)
			}
			assert.ElementsMatch(t, []string{"reset", ""}, faults)
		})
	}
}

func TestFaultHangUntilClientTimeout(t *testing.T) {
	srv, _, l, c := serve(t, false)
	srv.AddFault(simcore.Fault{Kind: simcore.FaultHang})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, l.URL+"/kv/a", nil)
	resp, err := c.Do(req)
	if resp != nil {
		_ = resp.Body.Close()
	}
	require.Error(t, err)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Eventually(t, func() bool { return len(srv.Audit()) == 1 }, 5*time.Second, 10*time.Millisecond)
	assert.Equal(t, "hang", srv.Audit()[0].Fault)
}

func TestFaultLatencyThenServes(t *testing.T) {
	srv, _, l, c := serve(t, false)
	srv.AddFault(simcore.Fault{Kind: simcore.FaultLatency, Latency: 30 * time.Millisecond})
	srv.AddFault(simcore.Fault{Kind: simcore.FaultError, Status: 502, Path: "^/kv/x$"})
	start := time.Now()
	st, _ := do(t, c, http.MethodGet, l.URL+"/kv/a", "")
	assert.Equal(t, 404, st)
	assert.GreaterOrEqual(t, time.Since(start), 30*time.Millisecond)
	st, _ = do(t, c, http.MethodGet, l.URL+"/kv/x", "")
	assert.Equal(t, 502, st, "latency combines with one other fault")
	assert.Equal(t, "latency,error", srv.Audit()[1].Fault)
}

func TestFaultExpires(t *testing.T) {
	srv, _, l, c := serve(t, false)
	srv.AddFault(simcore.Fault{Kind: simcore.FaultError, Status: 503, For: 50 * time.Millisecond})
	require.Eventually(t, func() bool {
		st, _ := do(t, c, http.MethodGet, l.URL+"/kv/a", "")
		return st == 404
	}, 5*time.Second, 10*time.Millisecond)
	assert.Empty(t, srv.Faults())
}

func TestFaultValidate(t *testing.T) {
	tcs := []struct {
		name  string
		fault simcore.Fault
		want  string
	}{
		{"unknown kind", simcore.Fault{Kind: "x"}, `fault kind "x"`},
		{"latency without duration", simcore.Fault{Kind: simcore.FaultLatency}, "latency must be > 0"},
		{"bad status", simcore.Fault{Kind: simcore.FaultError, Status: 200}, "status must be 400..599"},
		{"bad path", simcore.Fault{Kind: simcore.FaultHang, Path: "("}, `fault path "("`},
		{"negative count", simcore.Fault{Kind: simcore.FaultReset, Count: -1}, "count must be >= 0"},
	}
	for _, tc := range tcs {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.fault.Validate()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			srv := simcore.New("x", newKV(), nil)
			assert.Empty(t, srv.AddFault(tc.fault))
		})
	}
}

func TestConcurrentWritesAuditedSeparately(t *testing.T) {
	srv, _, l, c := serve(t, false)
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() { do(t, c, http.MethodPut, fmt.Sprintf("%s/kv/k%02d", l.URL, i), "v") })
	}
	wg.Wait()
	writes := srv.AuditWrites()
	require.Len(t, writes, 20)
	for i, e := range writes {
		assert.Equal(t, "+$.items["+strings.TrimPrefix(e.Path, "/kv/")+"]", e.Change)
		if i > 0 {
			assert.Greater(t, e.Seq, writes[i-1].Seq)
		}
	}
}

func TestServeRejectsNonLoopback(t *testing.T) {
	_, err := simcore.Serve(http.NotFoundHandler(), "0.0.0.0:0", false, "")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not a loopback address")
}

func TestAuditLimit(t *testing.T) {
	srv, _, l, c := serve(t, false)
	srv.SetAuditLimit(3)
	for range 5 {
		do(t, c, http.MethodGet, l.URL+"/kv/a", "")
	}
	audit := srv.Audit()
	require.Len(t, audit, 3)
	assert.Equal(t, int64(5), audit[2].Seq)
	assert.Equal(t, int64(5), srv.LastSeq())
	assert.Len(t, srv.AuditSince(4), 1)
}

type expiringKV struct {
	*kvFamily
	expired int
}

func (e *expiringKV) ExpireSessions() { e.expired++ }

func TestExpireSessions(t *testing.T) {
	_, _, l, c := serve(t, false)
	st, _ := do(t, c, http.MethodPost, l.URL+"/_sim/expire-sessions", "")
	assert.Equal(t, http.StatusNotImplemented, st)

	fam := &expiringKV{kvFamily: newKV()}
	srv := simcore.New("kv-2", fam, nil)
	l2, err := simcore.Serve(srv, "127.0.0.1:0", false, "")
	require.NoError(t, err)
	defer func() { assert.NoError(t, l2.Close()) }()
	st, _ = do(t, c, http.MethodPost, l2.URL+"/_sim/expire-sessions", "")
	assert.Equal(t, http.StatusNoContent, st)
	assert.Equal(t, 1, fam.expired)
}
