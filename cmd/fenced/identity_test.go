package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/cluster/clustertest"
	"github.com/fenced-project/fenced/cmd/fenced/status"
	"github.com/fenced-project/fenced/detector"
	"github.com/fenced-project/fenced/detector/groupview"
	"github.com/fenced-project/fenced/stonith"
)

// httpsGroup is a group of fenced processes serving HTTPS, with replica
// certificates from one CA and operator certificates from another.
type httpsGroup struct {
	reps        []*e2eReplica
	dir         string
	replicaCA   *clustertest.CA
	operatorCA  *clustertest.CA
	replicaPool *x509.CertPool
	files       map[string]clustertest.Files // by replica ID or operator name
}

// writeHTTPSGroupConfigs writes one configuration per replica: Raft and
// HTTPS with the replica's certificate, client certificates from both CAs,
// and alice as the one operator allowed by certificate. clusters is the
// clusters and arrays sections, given the group's directory; nil gives a
// cluster whose API server is not there.
func writeHTTPSGroupConfigs(t *testing.T, n int, clusters func(dir string) string) *httpsGroup {
	t.Helper()
	g := &httpsGroup{dir: t.TempDir(), files: map[string]clustertest.Files{}}
	if clusters == nil {
		clusters = func(dir string) string { return absentCluster(t, dir) }
	}
	var err error
	g.replicaCA, err = clustertest.NewCA("fenced replica CA")
	require.NoError(t, err)
	g.operatorCA, err = clustertest.NewCA("fenced operator CA")
	require.NoError(t, err)
	g.replicaPool = x509.NewCertPool()
	g.replicaPool.AddCert(g.replicaCA.Cert)
	for _, name := range []string{"alice", "mallory"} {
		f, err := g.operatorCA.WriteFiles(g.dir, name)
		require.NoError(t, err)
		g.files[name] = f
	}
	for i := 0; i < n; i++ {
		g.reps = append(g.reps, &e2eReplica{id: fmt.Sprintf("mgmt%d", i+1), raftAddr: freeAddr(t), httpAddr: freeAddr(t)})
	}
	section := clusters(g.dir)
	for _, r := range g.reps {
		f, err := g.replicaCA.WriteFiles(g.dir, r.id)
		require.NoError(t, err)
		g.files[r.id] = f
		doc := fmt.Sprintf(`replica:
  id: %s
  dataDir: %s
  raftBindAddress: %s
  tls:
    certFile: %s
    keyFile: %s
    caFile: %s
peers:
`, r.id, filepath.Join(g.dir, r.id), r.raftAddr, f.CertFile, f.KeyFile, f.CAFile)
		for _, p := range g.reps {
			if p != r {
				doc += fmt.Sprintf("  - id: %s\n    raftAddress: %s\n    httpAddress: https://%s\n", p.id, p.raftAddr, p.httpAddr)
			}
		}
		doc += fmt.Sprintf(`http:
  listen: %s
  advertiseURL: https://%s
  tls:
    certFile: %s
    keyFile: %s
    clientCAFile: %s
    operatorCAFile: %s
    operators: [alice]
log:
  level: info
`, r.httpAddr, r.httpAddr, f.CertFile, f.KeyFile, f.CAFile, g.files["alice"].CAFile) + section
		r.config = filepath.Join(g.dir, r.id+".yaml")
		require.NoError(t, os.WriteFile(r.config, []byte(doc), 0o600))
	}
	return g
}

// absentCluster is a cluster whose API server is not there: the API is
// served, and pause and resume need only the ledger.
func absentCluster(t *testing.T, dir string) string {
	t.Helper()
	kc, pw := filepath.Join(dir, "kubeconfig"), filepath.Join(dir, "pw")
	require.NoError(t, os.WriteFile(pw, []byte("unity-password\n"), 0o600))
	require.NoError(t, os.WriteFile(kc, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://%s", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: kube-token}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`, freeAddr(t))), 0o600))
	return fmt.Sprintf(`clusters:
  - name: lab
    kubeconfig: %s
    arrays: [unity-1]
arrays:
  - name: unity-1
    family: unity
    endpoint: https://%s
    username: admin
    passwordFile: %s
`, kc, freeAddr(t), pw)
}

// client is an HTTPS client presenting the certificate of name (none when
// empty).
func (g *httpsGroup) client(t *testing.T, name string) *http.Client {
	t.Helper()
	tc := &tls.Config{RootCAs: g.replicaPool, MinVersion: tls.VersionTLS12}
	if name != "" {
		pair, err := tls.LoadX509KeyPair(g.files[name].CertFile, g.files[name].KeyFile)
		require.NoError(t, err)
		tc.Certificates = []tls.Certificate{pair}
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: tc}, Timeout: 10 * time.Second}
}

func (g *httpsGroup) get(t *testing.T, r *e2eReplica, path string, out any) bool {
	resp, err := g.client(t, "").Get("https://" + r.httpAddr + path)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	return resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(out) == nil
}

func (g *httpsGroup) leader(t *testing.T) *e2eReplica {
	t.Helper()
	var leader, exited *e2eReplica
	require.Eventually(t, func() bool {
		leader = nil
		id := ""
		for _, r := range g.reps {
			if r.proc != nil {
				select {
				case <-r.proc.exited:
					exited = r
					return true
				default:
				}
			}
			var st status.Status
			if !g.get(t, r, "/status", &st) || st.Raft == nil || st.Raft.LeaderID == "" || (id != "" && st.Raft.LeaderID != id) {
				return false
			}
			id = st.Raft.LeaderID
			if r.id == id && st.Raft.State == "Leader" {
				leader = r
			}
		}
		return leader != nil
	}, 30*time.Second, 50*time.Millisecond, "replicas do not agree on a leader")
	if exited != nil {
		require.Failf(t, "replica exited", "%s: %v", exited.id, exited.proc.err)
	}
	return leader
}

// post sends body to path on r with the certificate of name and returns
// the status code and the body.
func (g *httpsGroup) post(t *testing.T, name string, r *e2eReplica, path string, body any) (int, string) {
	t.Helper()
	b, err := json.Marshal(body)
	require.NoError(t, err)
	resp, err := g.client(t, name).Post("https://"+r.httpAddr+path, "application/json", bytes.NewReader(b))
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(out)
}

// TestIdentitiesAcrossTheGroup runs three fenced processes serving HTTPS.
// Alice, a listed operator, pauses and resumes fencing with the CLI through
// a follower, which redirects her to the leader: the ledger and the
// leader's log name her. A replica's certificate and an unlisted operator
// certificate are refused as operators. A vantage report is accepted only
// as the replica the sender's certificate names, by the leader or a
// follower; an operator cannot send one.
func TestIdentitiesAcrossTheGroup(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three fenced processes")
	}
	bin := buildFenced(t)
	g := writeHTTPSGroupConfigs(t, 3, nil)
	for _, r := range g.reps {
		r.proc = start(t, bin, "run", "--config", r.config)
	}
	leader := g.leader(t)
	var followers []*e2eReplica
	for _, r := range g.reps {
		if r != leader {
			followers = append(followers, r)
		}
	}
	follower := followers[0]

	cli := func(name string, args ...string) (string, error) {
		f := g.files[name]
		args = append(args, "--addr", "https://"+follower.httpAddr, "--ca-file", g.files[follower.id].CAFile,
			"--cert-file", f.CertFile, "--key-file", f.KeyFile)
		out, err := exec.Command(bin, args...).CombinedOutput()
		return string(out), err
	}
	out, err := cli("alice", "pause", "--reason", "maintenance window")
	require.NoError(t, err, out)
	for _, r := range g.reps {
		require.Eventually(t, func() bool {
			var st stonith.Status
			return g.get(t, r, "/v1/fences", &st) && st.Paused && st.PausedBy == "cert:alice"
		}, 10*time.Second, 50*time.Millisecond, "replica %s should record alice's pause", r.id)
	}
	assert.Contains(t, leader.proc.stderr.String(), "cert:alice", "the leader's log names the person")
	assert.NotContains(t, leader.proc.stderr.String(), "operator=replica:", "no replica acted as operator")

	// A replica's certificate and an unlisted one are no operators, on a
	// follower and on the leader.
	for _, r := range []*e2eReplica{follower, leader} {
		code, body := g.post(t, followers[1].id, r, "/v1/resume", stonith.PauseRequest{Reason: "replica"})
		assert.Equal(t, http.StatusForbidden, code, "replica certificate to %s: %s", r.id, body)
		code, body = g.post(t, "mallory", r, "/v1/resume", stonith.PauseRequest{Reason: "mallory"})
		assert.Equal(t, http.StatusForbidden, code, "unlisted certificate to %s: %s", r.id, body)
	}
	out, err = cli("mallory", "resume", "--reason", "mallory")
	require.Error(t, err, "the CLI reports the refusal")
	assert.Contains(t, out, "neither a listed operator nor a replica")

	out, err = cli("alice", "resume", "--reason", "done")
	require.NoError(t, err, out)
	require.Eventually(t, func() bool {
		var st stonith.Status
		return g.get(t, leader, "/v1/fences", &st) && !st.Paused
	}, 10*time.Second, 50*time.Millisecond)

	// Vantage reports: as oneself, yes; as another replica, no.
	sender := followers[1]
	report := func(as string) detector.VantageReport {
		return detector.VantageReport{Replica: as, SentAt: time.Now().UTC()}
	}
	code, body := g.post(t, sender.id, leader, groupview.Path, report(sender.id))
	assert.Equal(t, http.StatusOK, code, "a report as the sender itself: %s", body)
	code, body = g.post(t, sender.id, leader, groupview.Path, report(follower.id))
	assert.Equal(t, http.StatusForbidden, code, "a forged report to the leader: %s", body)
	assert.Contains(t, body, "certificate names replica")
	code, body = g.post(t, sender.id, follower, groupview.Path, report(follower.id))
	assert.Equal(t, http.StatusForbidden, code, "a forged report to a follower: %s", body)
	code, body = g.post(t, "alice", follower, groupview.Path, report(sender.id))
	assert.Equal(t, http.StatusForbidden, code, "an operator sends no vantage report: %s", body)
	assert.Contains(t, leader.proc.stderr.String(), "vantage report refused", "the leader logs the refusal")
}
