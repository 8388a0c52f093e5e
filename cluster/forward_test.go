package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/cluster/ledger"
)

// noteAPI is a mutating endpoint as the daemon would mount it: it writes the
// request body as an operator note and answers with the index.
func noteAPI(n *Node) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			WriteError(w, err)
			return
		}
		l, _ := n.Leadership()
		if !l.Leader {
			WriteError(w, ErrNotLeader)
			return
		}
		index, err := n.Apply(r.Context(), note(l, string(body)))
		if err != nil {
			WriteError(w, err)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"index": index, "by": n.ID()})
	})
}

// serveHTTP serves the forwarding API of replica id on its configured HTTP address.
func serveHTTP(t *testing.T, g *testGroup, id string, wait time.Duration) *httptest.Server {
	addr := strings.TrimPrefix(g.peers[indexOf(g, id)].HTTPAddr, "http://")
	ln, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	srv := httptest.NewUnstartedServer(g.node(id).ForwardingHandler(noteAPI(g.node(id)), ForwardOptions{Wait: wait}))
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// answer is what a client got back.
type answer struct {
	StatusCode int
	Header     http.Header
}

func post(t *testing.T, url, body string) (answer, []byte) {
	resp, err := http.Post(url+"/v1/notes?x=1", "text/plain", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return answer{resp.StatusCode, resp.Header}, b
}

func TestForwardingHandler(t *testing.T) {
	g := newGroup(t, 3)
	g.startAll()
	leader, _ := waitLeader(t, g.running(), waitLong)
	servers := map[string]*httptest.Server{}
	for _, id := range g.ids() {
		servers[id] = serveHTTP(t, g, id, 700*time.Millisecond)
	}

	for _, id := range g.ids() {
		resp, body := post(t, servers[id].URL, "via "+id)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		assert.Equal(t, leader.ID(), resp.Header.Get(HeaderServedBy), "request to %s", id)
		var out struct {
			Index uint64 `json:"index"`
			By    string `json:"by"`
		}
		require.NoError(t, json.Unmarshal(body, &out))
		assert.Equal(t, leader.ID(), out.By)
		require.NoError(t, leader.WaitApplied(context.Background(), out.Index))
		assert.True(t, hasNote(leader.Ledger().Copy(), "via "+id))
	}

	// Without a quorum there is no leader: a bounded wait, then 503 no_leader.
	survivor := other(g, leader.ID())
	for _, id := range g.ids() {
		if id != survivor {
			servers[id].Close()
			g.stop(id)
		}
	}
	require.Eventually(t, func() bool { _, ok := g.node(survivor).Leader(); return !ok }, waitLong, 20*time.Millisecond)
	start := time.Now()
	resp, body := post(t, servers[survivor].URL, "nobody")
	elapsed := time.Since(start)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, string(body))
	var eb ErrorBody
	require.NoError(t, json.Unmarshal(body, &eb))
	assert.Equal(t, "no_leader", eb.Code)
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	assert.GreaterOrEqual(t, elapsed, 700*time.Millisecond, "it waited for a leader first")
	t.Logf("no leader: 503 after %s: %s", elapsed, eb.Error)
}

func TestWriteError(t *testing.T) {
	tcs := []struct {
		err    error
		status int
		code   string
	}{
		{fmt.Errorf("forward: %w", ErrNoLeader), 503, "no_leader"},
		{fmt.Errorf("apply: %w", ErrLeadershipLost), 503, "not_leader"},
		{fmt.Errorf("apply x at index 9: %w", fmt.Errorf("step: %w: is fenced", ledger.ErrConflict)), 409, "conflict"},
		{fmt.Errorf("apply: %w", ledger.ErrStaleTerm), 409, "stale_term"},
		{fmt.Errorf("apply: %w", ledger.ErrBadTransition), 409, "bad_step"},
		{fmt.Errorf("apply: %w", ledger.ErrPaused), 409, "paused"},
		{fmt.Errorf("apply: %w", ledger.ErrNotFound), 404, "not_found"},
		{fmt.Errorf("apply: %w", ledger.ErrInvalid), 400, "invalid"},
		{context.DeadlineExceeded, 503, "timeout"},
		{errors.New("disk on fire"), 500, "internal"},
	}
	for _, tc := range tcs {
		rec := httptest.NewRecorder()
		WriteError(rec, tc.err)
		assert.Equal(t, tc.status, rec.Code, tc.err.Error())
		var eb ErrorBody
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &eb))
		assert.Equal(t, tc.code, eb.Code, tc.err.Error())
		assert.Equal(t, tc.err.Error(), eb.Error)
	}
}

// recordingTransport records the requests that went out.
type recordingTransport struct{ sent []*http.Request }

func (c *recordingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.sent = append(c.sent, r)
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("{}")), Request: r}, nil
}

// A follower never forwards a call carrying the API token (or a cookie) to
// a leader on another host over plain HTTP: nothing is sent, the error
// says why and maps to 502 insecure_forward. A call without a credential,
// and one to a loopback or https:// leader, is forwarded.
func TestForwardNeverSendsCredentialOverPlainHTTP(t *testing.T) {
	n := &Node{cfg: Config{ID: "r2"}}
	for _, tc := range []struct {
		name, addr, header string
		sent               bool
	}{
		{"token to remote http", "http://10.0.0.1:9443", "Authorization", false},
		{"token to remote http by name", "mgmt1.example:9443", "Authorization", false},
		{"cookie to remote http", "http://10.0.0.1:9443", "Cookie", false},
		{"no credential to remote http", "http://10.0.0.1:9443", "", true},
		{"token to loopback http", "http://127.0.0.1:9443", "Authorization", true},
		{"token to https", "https://10.0.0.1:9443", "Authorization", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := &recordingTransport{}
			r := httptest.NewRequest(http.MethodPost, "/v1/fence", strings.NewReader("{}"))
			if tc.header != "" {
				r.Header.Set(tc.header, "Bearer the-api-token")
			}
			resp, err := n.send(context.Background(), r, []byte("{}"), 0, LeaderInfo{ID: "r1", HTTPAddr: tc.addr}, &http.Client{Transport: rt})
			if tc.sent {
				require.NoError(t, err)
				resp.Body.Close()
				require.Len(t, rt.sent, 1)
				return
			}
			require.ErrorIs(t, err, ErrPlainHTTPCredential)
			assert.Contains(t, err.Error(), "https://")
			assert.Empty(t, rt.sent, "nothing went over the wire")
			w := httptest.NewRecorder()
			WriteError(w, err)
			assert.Equal(t, http.StatusBadGateway, w.Code)
			assert.Contains(t, w.Body.String(), `"insecure_forward"`)
		})
	}
}

// A call the caller must prove to the leader itself (a client certificate)
// is answered with a 307 to the same path and query on the leader's
// https:// address; the body says why. A plain-HTTP leader gets 502
// insecure_forward: no certificate can be presented there.
func TestRedirectToTheLeader(t *testing.T) {
	n := &Node{cfg: Config{ID: "r2"}}
	r := httptest.NewRequest(http.MethodPost, "/v1/pause?x=1", strings.NewReader("{}"))
	w := httptest.NewRecorder()
	n.redirect(w, r, LeaderInfo{ID: "r1", HTTPAddr: "https://mgmt1.example:7440"})
	assert.Equal(t, http.StatusTemporaryRedirect, w.Code)
	assert.Equal(t, "https://mgmt1.example:7440/v1/pause?x=1", w.Header().Get("Location"))
	assert.Equal(t, "r2", w.Header().Get(HeaderForwardedBy))
	var eb ErrorBody
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &eb))
	assert.Equal(t, "redirect", eb.Code)
	assert.Contains(t, eb.Error, "replica r2 is not the leader: call the leader r1 at https://mgmt1.example:7440/v1/pause?x=1")

	for _, addr := range []string{"http://10.0.0.1:7440", "10.0.0.1:7440"} {
		w = httptest.NewRecorder()
		n.redirect(w, r, LeaderInfo{ID: "r1", HTTPAddr: addr})
		assert.Equal(t, http.StatusBadGateway, w.Code, addr)
		assert.Contains(t, w.Body.String(), `"insecure_forward"`, addr)
		assert.Empty(t, w.Header().Get("Location"), addr)
	}
}
