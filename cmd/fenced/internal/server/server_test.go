package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/cmd/fenced/internal/buildinfo"
	"github.com/fenced-project/fenced/cmd/fenced/status"
)

func newTestServer(t *testing.T) (*Server, *httptest.Server) {
	t.Helper()
	s := New(Options{ReplicaID: "r1", Build: buildinfo.Info{Version: "v9.9.9", Revision: "abc", GoVersion: "go1.26"}, Token: "tok"})
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return s, ts
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func TestHealthAndReadiness(t *testing.T) {
	s, ts := newTestServer(t)
	code, body := get(t, ts.URL+"/healthz")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "ok\n", body)

	code, _ = get(t, ts.URL+"/readyz")
	assert.Equal(t, http.StatusOK, code, "no checks: ready")

	failing := errors.New("api server unreachable")
	s.AddReadinessCheck("cluster/prod", func(context.Context) error { return failing })
	s.AddReadinessCheck("raft", func(context.Context) error { return nil })
	code, body = get(t, ts.URL+"/readyz")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, "[-] cluster/prod: api server unreachable\nnot ready\n", body)

	failing = nil
	code, body = get(t, ts.URL+"/readyz?verbose")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "[+] cluster/prod\n[+] raft\nok\n", body)
}

func TestReadinessCheckTimeout(t *testing.T) {
	s := New(Options{CheckTimeout: 10 * time.Millisecond})
	s.AddReadinessCheck("slow", func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() })
	ready, checks := s.Ready(context.Background())
	assert.False(t, ready)
	assert.Equal(t, context.DeadlineExceeded.Error(), checks[0].Error)
}

func TestStatusDocument(t *testing.T) {
	s, ts := newTestServer(t)
	s.AddStatusProvider(func(_ context.Context, st *status.Status) {
		st.Raft = &status.Raft{State: "Leader", Term: 3}
	})
	s.AddStatusProvider(func(_ context.Context, st *status.Status) {
		st.Clusters = append(st.Clusters, status.Cluster{Name: "prod", Ready: true})
	})
	s.AddReadinessCheck("raft", func(context.Context) error { return nil })
	code, body := get(t, ts.URL+"/status")
	require.Equal(t, http.StatusOK, code)

	var st status.Status
	require.NoError(t, json.Unmarshal([]byte(body), &st))
	assert.Equal(t, "v9.9.9", st.Version)
	assert.Equal(t, "r1", st.ReplicaID)
	assert.True(t, st.Ready)
	assert.Equal(t, []status.Check{{Name: "raft", OK: true}}, st.Checks)
	assert.Equal(t, "Leader", st.Raft.State)
	assert.Equal(t, "prod", st.Clusters[0].Name)
	assert.False(t, st.StartedAt.IsZero())
	assert.NotEmpty(t, st.Uptime)

	var raw map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &raw))
	for _, k := range []string{"version", "goVersion", "replicaID", "startedAt", "uptime", "uptimeSeconds", "ready", "checks", "raft", "clusters"} {
		assert.Contains(t, raw, k)
	}
	assert.NotContains(t, raw, "fences", "absent sections are omitted")
	assert.NotContains(t, raw, "arrays")
}

func TestMetrics(t *testing.T) {
	_, ts := newTestServer(t)
	code, body := get(t, ts.URL+"/metrics")
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, `fenced_build_info{goversion="go1.26",revision="abc",version="v9.9.9"} 1`)
	assert.Contains(t, body, "go_goroutines")
	assert.Contains(t, body, "process_start_time_seconds")
}

func TestRoutesAndAuthorize(t *testing.T) {
	s, ts := newTestServer(t)
	s.Handle("POST /v1/pause", s.Authorize(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "paused")
	})))
	post := func(token string) (int, string) {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, ts.URL+"/v1/pause", nil)
		require.NoError(t, err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, _ := post("")
	assert.Equal(t, http.StatusUnauthorized, code)
	code, _ = post("wrong")
	assert.Equal(t, http.StatusUnauthorized, code)
	code, body := post("tok")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "paused", body)

	code, _ = get(t, ts.URL+"/v1/pause")
	assert.Equal(t, http.StatusMethodNotAllowed, code)
}

func TestAuthorizeRefusesTokenFromRemotePlainHTTP(t *testing.T) {
	s := New(Options{Token: "tok"})
	req := httptest.NewRequest(http.MethodPost, "/v1/x", nil)
	req.RemoteAddr = "192.0.2.7:5555"
	req.Header.Set("Authorization", "Bearer tok")
	assert.False(t, s.authorized(req))
	req.RemoteAddr = "127.0.0.1:5555"
	assert.True(t, s.authorized(req))
	assert.False(t, New(Options{}).authorized(req), "no token configured: nothing authorizes")
}

func TestServeShutsDownOnCancel(t *testing.T) {
	s := New(Options{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln, nil, time.Second) }()
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + ln.Addr().String() + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 5*time.Second, 20*time.Millisecond)
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after cancel")
	}
	_, err = net.Dial("tcp", ln.Addr().String())
	assert.Error(t, err, "listener closed")
}

// TestUnknownRouteSaysWhatIsServed: a path no route serves is a JSON 404
// naming what the replica serves; under /v1/ it says the fencing API needs
// a configured cluster.
func TestUnknownRouteSaysWhatIsServed(t *testing.T) {
	_, ts := newTestServer(t)
	code, body := get(t, ts.URL+"/v1/fences")
	assert.Equal(t, http.StatusNotFound, code)
	var e struct {
		Error string `json:"error"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &e), body)
	assert.Contains(t, e.Error, "no route GET /v1/fences")
	assert.Contains(t, e.Error, "served only when a cluster is configured")
	code, body = get(t, ts.URL+"/statuz")
	assert.Equal(t, http.StatusNotFound, code)
	assert.Contains(t, body, "/status")
	assert.NotContains(t, body, "fencing API")
}
