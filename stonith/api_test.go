package stonith

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/cluster/ledger"
	"github.com/fenced-project/fenced/detector"
	"github.com/fenced-project/fenced/kube"
)

const testToken = "s3cret-token-0123456789"

func newAPIServer(t *testing.T, w *world) *httptest.Server {
	t.Helper()
	path := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(path, []byte(testToken+"\n"), 0o600))
	auth, err := NewAuthenticator(path)
	require.NoError(t, err)
	srv := httptest.NewServer(NewAPI(w.ctrl, auth).Handler())
	t.Cleanup(srv.Close)
	return srv
}

func TestOperatorActionsNeedCredentials(t *testing.T) {
	w := newWorld(t)
	_, stop := w.lead()
	defer stop()
	srv := newAPIServer(t, w)
	ctx := t.Context()

	for _, c := range []*Client{{BaseURL: srv.URL}, {BaseURL: srv.URL, Token: "wrong-token-0123456789"}} {
		_, err := c.Fence(ctx, FenceRequest{Cluster: "c1", Node: "n1", Reason: "test"})
		var apiErr *APIError
		require.ErrorAs(t, err, &apiErr)
		assert.Equal(t, http.StatusUnauthorized, apiErr.StatusCode)
		_, err = c.Unfence(ctx, UnfenceRequest{Cluster: "c1", Node: "n1", Reason: "test", Force: true})
		require.ErrorAs(t, err, &apiErr)
		assert.Equal(t, http.StatusUnauthorized, apiErr.StatusCode)
		_, err = c.Pause(ctx, PauseRequest{Reason: "test"})
		require.ErrorAs(t, err, &apiErr)
		assert.Equal(t, http.StatusUnauthorized, apiErr.StatusCode)
		_, err = c.Resume(ctx, PauseRequest{Reason: "test"})
		require.ErrorAs(t, err, &apiErr)
		assert.Equal(t, http.StatusUnauthorized, apiErr.StatusCode)
	}
	assert.Nil(t, w.group.fence("c1", "n1"), "a refused call wrote nothing")
	var paused bool
	w.group.fsm.Read(func(s *ledger.State) { paused = s.Pause.Paused })
	assert.False(t, paused)

	// Reading the status needs no credentials.
	st, err := (&Client{BaseURL: srv.URL}).Fences(ctx)
	require.NoError(t, err)
	assert.True(t, st.Leading)
}

func TestOperatorActionsAreRecorded(t *testing.T) {
	w := newWorld(t)
	_, stop := w.lead()
	defer stop()
	srv := newAPIServer(t, w)
	ctx := t.Context()
	c := &Client{BaseURL: srv.URL, Token: testToken, Operator: "alice"}

	_, err := c.Pause(ctx, PauseRequest{Cluster: "c1", Reason: "array upgrade"})
	require.NoError(t, err)
	w.group.fsm.Read(func(s *ledger.State) {
		assert.True(t, s.Paused("c1"))
		hs := s.HoldersOf("c1")
		require.Len(t, hs, 1)
		assert.Equal(t, "c1", hs[0].Cluster)
		assert.Equal(t, "token/alice", hs[0].Operator)
		assert.Equal(t, "array upgrade", hs[0].Reason)
		assert.False(t, hs[0].At.IsZero())
	})

	// An operator fence goes on while paused: the operator decided.
	res, err := c.Fence(ctx, FenceRequest{Cluster: "c1", Node: "n1", Reason: "disk controller errors"})
	require.NoError(t, err)
	require.NotEmpty(t, res.FenceID)
	w.waitState(ledger.StateEvicted)
	f := w.group.fence("c1", "n1")
	assert.Equal(t, ledger.OriginOperator, f.Origin)
	assert.Equal(t, "token/alice", f.Operator)
	assert.Equal(t, "disk controller errors", f.Reason)

	// Again: idempotent, same fence.
	again, err := c.Fence(ctx, FenceRequest{Cluster: "c1", Node: "n1", Reason: "again"})
	require.NoError(t, err)
	assert.Equal(t, res.FenceID, again.FenceID)

	// Unfence without a reboot is refused; --force is recorded as such.
	_, err = c.Unfence(ctx, UnfenceRequest{Cluster: "c1", Node: "n1", Reason: "back"})
	var apiErr *APIError
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, http.StatusConflict, apiErr.StatusCode)
	assert.Contains(t, apiErr.Message, "has not rebooted")
	_, err = c.Unfence(ctx, UnfenceRequest{Cluster: "c1", Node: "n1", Reason: "verified by hand", Force: true})
	require.NoError(t, err)
	w.waitClosed()
	h := w.group.history("c1", "n1")
	var unfence ledger.Step
	for _, s := range h[len(h)-1].Steps {
		if s.To == ledger.StateUnfenceIntent {
			unfence = s
		}
	}
	assert.Equal(t, "token/alice", unfence.Operator)
	assert.Equal(t, "forced: verified by hand", unfence.Note)
	assert.True(t, unfence.Forced, "the ledger marks the forced unfence in its own field")
	assert.False(t, unfence.Unverified)
	for _, a := range w.arrays {
		assert.True(t, a.hasAccess("n1"))
	}

	_, err = c.Resume(ctx, PauseRequest{Cluster: "c1", Reason: "upgrade done"})
	require.NoError(t, err)
	var actions []ledger.Action
	w.group.fsm.Read(func(s *ledger.State) { actions = append(actions, s.Actions...) })
	require.Len(t, actions, 2)
	assert.Equal(t, "resume", actions[1].Action)

	t.Run("bad requests name the field", func(t *testing.T) {
		_, err := c.Fence(ctx, FenceRequest{Cluster: "c1", Node: "n1"})
		require.ErrorAs(t, err, &apiErr)
		assert.Equal(t, http.StatusBadRequest, apiErr.StatusCode)
		assert.Contains(t, apiErr.Message, "reason is required")
		_, err = c.Fence(ctx, FenceRequest{Cluster: "nope", Node: "n1", Reason: "x"})
		require.ErrorAs(t, err, &apiErr)
		assert.Equal(t, http.StatusNotFound, apiErr.StatusCode)
		resp, err := http.Post(srv.URL+"/v1/fence", "application/json", strings.NewReader(`{"cluster":"c1","bogus":1}`))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "credentials are checked before the body")
	})
}

func TestOperatorActionOnFollower(t *testing.T) {
	w := newWorld(t)
	srv := newAPIServer(t, w)
	_, err := (&Client{BaseURL: srv.URL, Token: testToken}).Pause(t.Context(), PauseRequest{Reason: "x"})
	var apiErr *APIError
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, http.StatusServiceUnavailable, apiErr.StatusCode)
}

func TestAuthenticator(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(path, []byte(testToken+"\r\n"), 0o600))
	a, err := NewAuthenticator(path)
	require.NoError(t, err)
	cert := &x509.Certificate{Subject: pkix.Name{CommonName: "ops-bob"}}
	tcs := []struct {
		name   string
		remote string
		header string
		tls    *tls.ConnectionState
		who    string
		ok     bool
	}{
		{"no credentials", "127.0.0.1:5000", "", nil, "", false},
		{"token on loopback", "127.0.0.1:5000", "Bearer " + testToken, nil, "token", true},
		{"token over plain http from afar", "10.0.0.8:5000", "Bearer " + testToken, nil, "", false},
		{"token over tls from afar", "10.0.0.8:5000", "Bearer " + testToken, &tls.ConnectionState{}, "token", true},
		{"wrong token", "127.0.0.1:5000", "Bearer nope", nil, "", false},
		{"token prefix only", "127.0.0.1:5000", "Bearer " + testToken[:10], nil, "", false},
		{"basic auth", "127.0.0.1:5000", "Basic " + testToken, nil, "", false},
		{"verified client cert, no operators configured", "10.0.0.8:5000", "", &tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert},
			VerifiedChains: [][]*x509.Certificate{{cert}}}, "", false},
		{"unverified client cert", "10.0.0.8:5000", "", &tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}}, "", false},
	}
	for _, tc := range tcs {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/v1/pause", nil)
			r.RemoteAddr, r.TLS = tc.remote, tc.tls
			if tc.header != "" {
				r.Header.Set("Authorization", tc.header)
			}
			who, ok := a.Authenticate(r)
			assert.Equal(t, tc.ok, ok)
			assert.Equal(t, tc.who, who)
		})
	}

	// One rule for secret files: one trailing newline goes, a blank line
	// after the token is refused rather than sent.
	blank := filepath.Join(t.TempDir(), "blank")
	require.NoError(t, os.WriteFile(blank, []byte(testToken+"\n\n"), 0o600))
	_, err = NewAuthenticator(blank)
	require.ErrorContains(t, err, "more than one line")

	_, err = NewAuthenticator(filepath.Join(t.TempDir(), "missing"))
	require.Error(t, err)
	short := filepath.Join(t.TempDir(), "short")
	require.NoError(t, os.WriteFile(short, []byte("abc"), 0o600))
	_, err = NewAuthenticator(short)
	require.ErrorContains(t, err, "at least 16")
	certOnly, err := NewAuthenticator("")
	require.NoError(t, err)
	r := httptest.NewRequest(http.MethodPost, "/v1/pause", nil)
	r.RemoteAddr = "127.0.0.1:1"
	r.Header.Set("Authorization", "Bearer ")
	_, ok := certOnly.Authenticate(r)
	assert.False(t, ok, "without a token file an empty bearer token is not a credential")
}

func TestStatusOf(t *testing.T) {
	assert.Equal(t, http.StatusConflict, statusOf(ledger.ErrConflict))
	assert.Equal(t, http.StatusServiceUnavailable, statusOf(ErrNotLeader))
	// fenced plan while the API server is away: unavailable, not a 500.
	assert.Equal(t, http.StatusServiceUnavailable, statusOf(fmt.Errorf("plan fence of c1/n1: footprint of n1: %w", kube.ErrNotSynced)))
	assert.Equal(t, http.StatusInternalServerError, statusOf(errors.New("boom")))
}

func TestConfigErrorsNameTheField(t *testing.T) {
	_, err := New(Config{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "replicaID is required")
	assert.Contains(t, err.Error(), "at least one cluster")
	_, err = New(Config{ReplicaID: "r", Ledger: ledger.New(), Clusters: []ClusterConfig{
		{Name: "c1", Kube: newFakeKube(&opLog{}), ProtectionSelector: "a in (b"}}})
	require.ErrorContains(t, err, "clusters[c1].protectionSelector")
	require.ErrorContains(t, err, "clusters[c1].footprints is required")
	_, err = New(Config{ReplicaID: "r", Ledger: ledger.New(), Clusters: []ClusterConfig{
		{Name: "c1", Kube: newFakeKube(&opLog{}), Footprints: newFakeFootprints(), Arrays: []string{"nope"}}}})
	require.ErrorContains(t, err, `clusters[c1].arrays: no array "nope"`)
}

// An operator unfence without --force is refused while a volume of the
// node still waits for its detach (a detach is a storage action the node
// must still be fenced for); with --force it goes on.
func TestOperatorUnfenceRefusedWhileDetachesPending(t *testing.T) {
	w := newWorld(t)
	_, stop := w.lead()
	defer stop()
	srv := newAPIServer(t, w)
	c := &Client{BaseURL: srv.URL, Token: testToken, Operator: "alice"}
	w.verdict("n1", detector.Failed)
	w.waitState(ledger.StateEvicted)
	w.kube.setDetaching("n1", "csi-1 (pv-a)")
	w.reboot("boot-2")

	_, err := c.Unfence(t.Context(), UnfenceRequest{Cluster: "c1", Node: "n1", Reason: "rebooted"})
	var apiErr *APIError
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, http.StatusConflict, apiErr.StatusCode)
	assert.Contains(t, apiErr.Message, "still wait for a detach: csi-1 (pv-a)")
	assert.Equal(t, ledger.StateEvicted, w.state())
	for name, a := range w.arrays {
		assert.False(t, a.hasAccess("n1"), "n1 restored on %s", name)
	}

	_, err = c.Unfence(t.Context(), UnfenceRequest{Cluster: "c1", Node: "n1", Reason: "detach checked by hand", Force: true})
	require.NoError(t, err)
	w.waitClosed()
}

// TestAPIRefusesBadNamesAndLargeBodies: node and cluster names are RFC 1123
// names (400 naming the field), and a body over the limit gets 413.
func TestAPIRefusesBadNamesAndLargeBodies(t *testing.T) {
	w := newWorld(t)
	_, stop := w.lead()
	defer stop()
	srv := newAPIServer(t, w)
	ctx := t.Context()
	c := &Client{BaseURL: srv.URL, Token: testToken}
	var apiErr *APIError
	for _, tc := range []struct {
		name string
		call func() error
		want string
	}{
		{"node with a slash", func() error {
			_, err := c.Unfence(ctx, UnfenceRequest{Cluster: "c1", Node: "../n1", Reason: "x"})
			return err
		}, `node "../n1"`},
		{"upper-case node", func() error {
			_, err := c.Fence(ctx, FenceRequest{Cluster: "c1", Node: "Worker-1", Reason: "x"})
			return err
		}, `node "Worker-1"`},
		{"cluster with a space", func() error {
			_, err := c.Pause(ctx, PauseRequest{Cluster: "c 1", Reason: "x"})
			return err
		}, `cluster "c 1"`},
		{"overlong node", func() error {
			_, err := c.Fence(ctx, FenceRequest{Cluster: "c1", Node: strings.Repeat("n", 300), Reason: "x"})
			return err
		}, "node"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			require.ErrorAs(t, err, &apiErr)
			assert.Equal(t, http.StatusBadRequest, apiErr.StatusCode)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	assert.Nil(t, w.group.fence("c1", "Worker-1"))

	big := `{"cluster":"c1","node":"n1","reason":"` + strings.Repeat("x", maxBody) + `"}`
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/v1/fence", strings.NewReader(big))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
}

// TestForcedUnfenceNeedsTheAPIServer: a forced unfence is refused while the
// API server cannot be read, unless it is also unverified; the ledger marks
// both in their own fields.
func TestForcedUnfenceNeedsTheAPIServer(t *testing.T) {
	w := newWorld(t)
	_, stop := w.lead()
	defer stop()
	srv := newAPIServer(t, w)
	c := &Client{BaseURL: srv.URL, Token: testToken, Operator: "alice"}
	w.verdict("n1", detector.Failed)
	w.waitState(ledger.StateEvicted)
	setAPIErr := func(err error) {
		w.kube.mu.Lock()
		w.kube.apiErr = err
		w.kube.mu.Unlock()
	}
	setAPIErr(errors.New("connection refused"))
	// While the API server cannot be read the detector doubts its view and
	// blocks every verdict (detector README, "Never on doubt about
	// ourselves"); a Failed verdict left standing here would open a new
	// fence the moment the unfence closes this one.
	w.ctrl.PublishVerdicts(t.Context(), []detector.Verdict{{Cluster: "c1", Node: "n1", State: detector.Blocked,
		Reason: detector.ReasonAPIServerUnreachable, Since: time.Now()}})

	_, err := c.Unfence(t.Context(), UnfenceRequest{Cluster: "c1", Node: "n1", Reason: "by hand", Force: true})
	var apiErr *APIError
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, http.StatusConflict, apiErr.StatusCode)
	assert.Contains(t, apiErr.Message, "cannot read n1 and its pods from the API server: connection refused")
	assert.Contains(t, apiErr.Message, "--unverified")
	assert.Equal(t, ledger.StateEvicted, w.state())

	_, err = c.Unfence(t.Context(), UnfenceRequest{Cluster: "c1", Node: "n1", Reason: "by hand", Unverified: true})
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, http.StatusBadRequest, apiErr.StatusCode)

	_, err = c.Unfence(t.Context(), UnfenceRequest{Cluster: "c1", Node: "n1", Reason: "checked by phone", Force: true, Unverified: true})
	require.NoError(t, err)
	setAPIErr(nil)
	w.waitClosed()
	h := w.group.history("c1", "n1")
	var unfence ledger.Step
	for _, s := range h[len(h)-1].Steps {
		if s.To == ledger.StateUnfenceIntent {
			unfence = s
		}
	}
	assert.True(t, unfence.Forced)
	assert.True(t, unfence.Unverified)
}
