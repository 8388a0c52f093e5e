package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/cluster"
	"github.com/fenced-project/fenced/cmd/fenced/status"
	"github.com/fenced-project/fenced/detector"
	"github.com/fenced-project/fenced/detector/groupview"
	"github.com/fenced-project/fenced/stonith"
)

// callersToken is the API token of TestCallersProvenNeverDeclared's group.
const callersToken = "callers-token-0123456789abcdef"

// TestCallersProvenNeverDeclared runs three fenced processes serving HTTPS
// with the API token and operator certificates. A caller is what it
// proves, never what a header declares:
//   - a replica's certificate with "X-Fenced-Caller: cert:alice" is refused
//     as an operator (403, saying the header is not believed), on a
//     follower and on the leader, and the leader logs it at WARN;
//   - a replica's certificate with "X-Fenced-Caller: replica:<other>" is
//     still the certificate's replica: a vantage report as the other
//     replica is refused, one as itself is taken;
//   - an operator's token call through a follower reaches the leader with
//     the token: the ledger's operator is the person, and the ledger's
//     reason and the leader's log name the follower that carried it;
//   - an operator's client-certificate call to a follower is redirected
//     (307) to the leader, which the CLI follows: the ledger names the
//     person, and no replica carried it.
func TestCallersProvenNeverDeclared(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three fenced processes")
	}
	bin := buildFenced(t)
	g := writeHTTPSGroupConfigs(t, 3, nil)
	tokenFile := filepath.Join(g.dir, "api-token")
	require.NoError(t, os.WriteFile(tokenFile, []byte(callersToken+"\n"), 0o600))
	for _, r := range g.reps {
		doc, err := os.ReadFile(r.config)
		require.NoError(t, err)
		withToken := strings.Replace(string(doc), "\nhttp:\n", "\nhttp:\n  tokenFile: "+tokenFile+"\n", 1)
		require.NotEqual(t, string(doc), withToken)
		require.NoError(t, os.WriteFile(r.config, []byte(withToken), 0o600))
		r.proc = start(t, bin, "run", "--config", r.config)
	}
	leader := g.leader(t)
	var followers []*e2eReplica
	for _, r := range g.reps {
		if r != leader {
			followers = append(followers, r)
		}
	}
	follower, other := followers[0], followers[1]
	raftOf := func(r *e2eReplica) *status.Raft {
		var st status.Status
		if !g.get(t, r, "/status", &st) || st.Raft == nil {
			return nil
		}
		return st.Raft
	}
	// sent is what the test reads of an answer (its body is read and closed in send).
	type sent struct {
		StatusCode int
		Header     http.Header
	}
	send := func(c *http.Client, r *e2eReplica, path string, header map[string]string, body any) (sent, string) {
		b, err := json.Marshal(body)
		require.NoError(t, err)
		req, err := http.NewRequest(http.MethodPost, "https://"+r.httpAddr+path, bytes.NewReader(b))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		out, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return sent{StatusCode: resp.StatusCode, Header: resp.Header}, string(out)
	}

	// (1) A replica's certificate and a caller header it writes itself is
	// no operator: not on a follower, not on the leader.
	forged := map[string]string{stonith.CallerHeader: "cert:alice"}
	for _, r := range []*e2eReplica{follower, leader} {
		resp, body := send(g.client(t, other.id), r, "/v1/pause", forged, stonith.PauseRequest{Reason: "forged"})
		assert.Equal(t, http.StatusForbidden, resp.StatusCode, "replica certificate with a caller header to %s: %s", r.id, body)
		assert.Contains(t, body, "replica:"+other.id+" may not call /v1/pause: it needs an operator")
		assert.Contains(t, body, "X-Fenced-Caller header is not believed")
	}
	// The process's log reaches the test through a pipe a moment after
	// the answer: wait for the lines rather than read once.
	logged := func(s string) func() bool {
		return func() bool { return strings.Contains(leader.proc.stderr.String(), s) }
	}
	assert.Eventually(t, logged("caller header from a replica's certificate ignored"), 10*time.Second, 20*time.Millisecond)
	assert.Eventually(t, logged("header=cert:alice"), 10*time.Second, 20*time.Millisecond)
	if rf := raftOf(leader); assert.NotNil(t, rf) {
		assert.False(t, rf.FencingPaused, "nothing was paused")
	}

	// (2) A replica's certificate is that replica, whatever its header
	// says: a vantage report as another replica is refused, on the leader
	// and on a follower (reports are never forwarded).
	report := func(as string) detector.VantageReport {
		return detector.VantageReport{Replica: as, SentAt: time.Now().UTC()}
	}
	asFollower := map[string]string{stonith.CallerHeader: "replica:" + follower.id}
	for _, r := range []*e2eReplica{leader, follower} {
		resp, body := send(g.client(t, other.id), r, groupview.Path, asFollower, report(follower.id))
		assert.Equal(t, http.StatusForbidden, resp.StatusCode, "a report as %s with %s's certificate to %s: %s", follower.id, other.id, r.id, body)
		assert.Contains(t, body, `the sender's certificate names replica \"`+other.id+`\"`)
	}
	resp, body := send(g.client(t, other.id), leader, groupview.Path, asFollower, report(other.id))
	assert.Equal(t, http.StatusOK, resp.StatusCode, "a report as the certificate's own replica is taken, the header ignored: %s", body)
	assert.Eventually(t, logged("header=replica:"+follower.id), 10*time.Second, 20*time.Millisecond)
	resp, body = send(g.client(t, other.id), follower, groupview.Path, nil, report(other.id))
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "a follower does not forward reports: %s", body)
	assert.Contains(t, body, `"not_leader"`)

	// (3) An operator's token call through a follower: the leader verifies
	// the token itself, and knows the follower from its certificate.
	cli := func(to *e2eReplica, args ...string) (string, error) {
		args = append(args, "--addr", "https://"+to.httpAddr, "--ca-file", g.files[to.id].CAFile)
		out, err := exec.Command(bin, args...).CombinedOutput()
		return string(out), err
	}
	out, err := cli(follower, "pause", "--reason", "storage maintenance", "--token-file", tokenFile, "--operator", "bob")
	require.NoError(t, err, out)
	for _, r := range g.reps {
		require.Eventually(t, func() bool {
			rf := raftOf(r)
			return rf != nil && rf.Pause != nil && rf.Pause.Operator == "token/bob"
		}, 10*time.Second, 50*time.Millisecond, "replica %s should record bob's pause", r.id)
		assert.Equal(t, "storage maintenance (carried by replica "+follower.id+")", raftOf(r).Pause.Reason,
			"the ledger names the follower that carried the call")
	}
	assert.Eventually(t, logged(`operator=token/bob reason="storage maintenance" carriedBy="replica `+follower.id+`"`), 10*time.Second, 20*time.Millisecond)
	assert.NotContains(t, leader.proc.stderr.String(), "header=token/bob", "a follower's forward is no forgery")

	// A forged caller header with the token changes nothing: the person is
	// what the token proves.
	resp, body = send(g.client(t, ""), follower, "/v1/resume",
		map[string]string{"Authorization": "Bearer " + callersToken, stonith.CallerHeader: "cert:alice"},
		stonith.PauseRequest{Reason: "done", All: true})
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	assert.Equal(t, leader.id, resp.Header.Get(cluster.HeaderForwardedBy), "the follower forwarded it")
	require.Eventually(t, func() bool {
		rf := raftOf(leader)
		return rf != nil && !rf.FencingPaused
	}, 10*time.Second, 50*time.Millisecond)

	// (4) An operator's client certificate cannot be carried by a
	// follower: it redirects the call to the leader.
	noFollow := g.client(t, "alice")
	noFollow.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, body = send(noFollow, follower, "/v1/pause", nil, stonith.PauseRequest{Reason: "not yet"})
	require.Equal(t, http.StatusTemporaryRedirect, resp.StatusCode, body)
	assert.Equal(t, "https://"+leader.httpAddr+"/v1/pause", resp.Header.Get("Location"))
	assert.Contains(t, body, `"redirect"`)
	if rf := raftOf(leader); assert.NotNil(t, rf) {
		assert.False(t, rf.FencingPaused, "a redirect does nothing by itself")
	}
	out, err = cli(follower, "pause", "--reason", "upgrade", "--cert-file", g.files["alice"].CertFile, "--key-file", g.files["alice"].KeyFile)
	require.NoError(t, err, out)
	for _, r := range g.reps {
		require.Eventually(t, func() bool {
			rf := raftOf(r)
			return rf != nil && rf.Pause != nil && rf.Pause.Operator == "cert:alice"
		}, 10*time.Second, 50*time.Millisecond, "replica %s should record alice's pause", r.id)
		assert.Equal(t, "upgrade", raftOf(r).Pause.Reason, "alice called the leader herself")
	}
	assert.NotContains(t, leader.proc.stderr.String(), "operator=replica:", "no replica acted as operator")
}
