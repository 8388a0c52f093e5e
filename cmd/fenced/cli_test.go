package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/cmd/fenced/status"
	"github.com/fenced-project/fenced/stonith"
)

func TestVersionJSON(t *testing.T) {
	var out, errb bytes.Buffer
	require.Equal(t, exitOK, run(context.Background(), []string{"version", "-o", "json"}, &out, &errb), errb.String())
	var v versionInfo
	require.NoError(t, json.Unmarshal(out.Bytes(), &v), out.String())
	assert.NotEmpty(t, v.GoVersion)
	assert.Equal(t, exitUsage, run(context.Background(), []string{"version", "-o", "yaml"}, &out, &errb))
}

func TestStatusExitCodes(t *testing.T) {
	leader := &status.Raft{State: "Follower", LeaderID: "r1"}
	code := func(st status.Status) int {
		err := statusExit(st)
		if err == nil {
			return exitOK
		}
		var ee *exitError
		require.ErrorAs(t, err, &ee)
		return ee.code
	}
	assert.Equal(t, exitOK, code(status.Status{Ready: true, Raft: leader}))
	assert.Equal(t, exitNotReady, code(status.Status{Ready: false, Raft: leader}))
	assert.Equal(t, exitNoLeader, code(status.Status{Ready: false, Raft: &status.Raft{State: "Candidate"}}))
	assert.Equal(t, exitNoLeader, code(status.Status{Ready: true, Raft: &status.Raft{State: "Follower"}}))
}

// TestStatusTableShowsWhatOperatorsActOn: peers with reachability and last
// contact, the pause with who, when and why, unprotected nodes with their
// gaps, and multi-line errors kept on their row.
type testCert struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	der  []byte
}

func newTestCert(t *testing.T, cn string, parent *testCert, usage x509.ExtKeyUsage) *testCert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	signer, signerKey := tmpl, key
	if parent == nil {
		tmpl.IsCA, tmpl.BasicConstraintsValid, tmpl.KeyUsage = true, true, x509.KeyUsageCertSign
	} else {
		signer, signerKey = parent.cert, parent.key
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{usage}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return &testCert{cert: cert, key: key, der: der}
}

func (c *testCert) write(t *testing.T, certFile, keyFile string) {
	t.Helper()
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.der}), 0o600))
	if keyFile != "" {
		kb, err := x509.MarshalECPrivateKey(c.key)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600))
	}
}

// TestCommandsWithOnlyConfig runs status and pause against an HTTPS
// endpoint given nothing but the replica's configuration: the URL (https,
// since the configuration serves TLS), the CA and the API token (a
// credential: reference, found in the credentials directory under the
// shipped unit's name), with the operator taken from sudo.
func TestCommandsWithOnlyConfig(t *testing.T) {
	dir, creds := t.TempDir(), t.TempDir()
	ca := newTestCert(t, "fenced-ca", nil, 0)
	ca.write(t, filepath.Join(creds, "fenced_ca.crt"), "")
	srvCert := newTestCert(t, "mgmt1", ca, x509.ExtKeyUsageServerAuth)
	pair, err := tls.X509KeyPair(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srvCert.der}), func() []byte {
		kb, err := x509.MarshalECPrivateKey(srvCert.key)
		require.NoError(t, err)
		return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
	}())
	require.NoError(t, err)
	const token = "0123456789abcdef0123456789abcdef-token"
	require.NoError(t, os.WriteFile(filepath.Join(creds, "fenced_api-token"), []byte(token+"\n"), 0o600))

	var mu sync.Mutex
	var auth, operator string
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(status.Status{ReplicaID: "mgmt1", Ready: true, Raft: &status.Raft{State: "Leader", LeaderID: "mgmt1"}})
	})
	mux.HandleFunc("POST /v1/pause", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth, operator = r.Header.Get("Authorization"), r.Header.Get(stonith.OperatorHeader)
		mu.Unlock()
		_ = json.NewEncoder(w).Encode(stonith.ActionResult{Message: "fencing paused"})
	})
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)

	cfg := filepath.Join(dir, "fenced.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(`replica:
  id: mgmt1
  dataDir: `+filepath.Join(dir, "data")+`
  raftBindAddress: 127.0.0.1:7441
  tls:
    certFile: credential:raft.crt
    keyFile: credential:raft.key
    caFile: credential:ca.crt
http:
  listen: `+srv.Listener.Addr().String()+`
  tokenFile: credential:api-token
  tls:
    certFile: credential:http.crt
    keyFile: credential:http.key
clusters: []
arrays: []
`), 0o600))

	t.Setenv("SUDO_USER", "alice")
	t.Setenv("USER", "root")
	t.Setenv("CREDENTIALS_DIRECTORY", "")
	t.Setenv("FENCED_ADDR", "")
	t.Setenv("FENCED_TOKEN_FILE", "")
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"status", "--config", cfg, "--credentials-dir", creds}, &out, &errb)
	require.Equal(t, exitOK, code, errb.String())
	assert.Regexp(t, `Replica:\s+mgmt1\n`, out.String())

	out.Reset()
	code = run(context.Background(), []string{"pause", "--config", cfg, "--credentials-dir", creds, "--reason", "array upgrade", "-o", "json"}, &out, &errb)
	require.Equal(t, exitOK, code, errb.String())
	var res stonith.ActionResult
	require.NoError(t, json.Unmarshal(out.Bytes(), &res), out.String())
	assert.Equal(t, "fencing paused", res.Message)
	mu.Lock()
	assert.Equal(t, "Bearer "+token, auth)
	assert.True(t, strings.HasPrefix(operator, "alice@"), operator)
	mu.Unlock()

	// Scheme-less --addr takes https from the configuration.
	out.Reset()
	code = run(context.Background(), []string{"status", "-c", cfg, "--credentials-dir", creds, "--addr", srv.Listener.Addr().String(), "-o", "json"}, &out, &errb)
	require.Equal(t, exitOK, code, errb.String())
	assert.True(t, strings.HasSuffix(out.String(), "}\n") && !strings.HasSuffix(out.String(), "\n\n"),
		"one JSON document, one newline: %q", out.String())

	// Without the credentials directory the token reference cannot resolve:
	// the error names the field and the way out.
	errb.Reset()
	code = run(context.Background(), []string{"pause", "--config", cfg, "--credentials-dir", "", "--reason", "x"}, &out, &errb)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errb.String(), "replica.tls.caFile")
	assert.Contains(t, errb.String(), "--credentials-dir")

	// Without --config the system roots do not trust the group's CA.
	errb.Reset()
	code = run(context.Background(), []string{"status", "--addr", srv.URL, "--timeout", "5s"}, &out, &errb)
	assert.Equal(t, exitFailure, code)
	assert.Contains(t, errb.String(), "certificate")
}

// TestErrorsAsJSON: a command asked for -o json that fails writes its
// error as JSON on standard output (with the exit code), besides the line
// on standard error.
func TestErrorsAsJSON(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens there now
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"history", "--cluster", "c1", "--addr", "http://" + addr, "-o", "json"}, &out, &errb)
	require.NotEqual(t, exitOK, code)
	var got struct {
		Error    string `json:"error"`
		ExitCode int    `json:"exitCode"`
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &got), "stdout: %q", out.String())
	assert.Equal(t, code, got.ExitCode)
	assert.Contains(t, got.Error, addr)
	assert.Contains(t, errb.String(), got.Error)

	out.Reset()
	errb.Reset()
	code = run(context.Background(), []string{"history", "--cluster", "c1", "--addr", "http://" + addr}, &out, &errb)
	require.NotEqual(t, exitOK, code)
	assert.Empty(t, out.String(), "table output: the error goes to standard error only")
}

// TestCompletions: the shell completion offers -o's formats and the
// configuration's cluster names for --cluster.
func TestCompletions(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "fenced.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("clusters:\n  - name: prod\n  - name: lab\n"), 0o600))
	complete := func(args ...string) string {
		var out, errb bytes.Buffer
		require.Equal(t, exitOK, run(context.Background(), append([]string{"__complete"}, args...), &out, &errb), errb.String())
		return out.String()
	}
	got := complete("history", "--config", cfg, "--cluster", "")
	assert.Contains(t, got, "prod\n")
	assert.Contains(t, got, "lab\n")
	got = complete("status", "-o", "")
	assert.Contains(t, got, "table\n")
	assert.Contains(t, got, "json\n")
}

// TestValidateCredentialsDirNotADirectory: a --credentials-dir that is a
// file is one clear usage error, not a problem per credential.
func TestValidateCredentialsDirNotADirectory(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "creds")
	require.NoError(t, os.WriteFile(f, []byte("x"), 0o600))
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"config", "validate", "--credentials-dir", f, filepath.Join(dir, "fenced.yaml")}, &out, &errb)
	assert.Equal(t, exitUsage, code)
	assert.Equal(t, 1, strings.Count(strings.TrimSpace(errb.String()), "\n")+1, errb.String())
	assert.Contains(t, errb.String(), "--credentials-dir "+f+": not a directory")
}
