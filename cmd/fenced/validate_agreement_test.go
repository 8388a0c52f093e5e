package main

import (
	"bytes"
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/configs"
	"github.com/fenced-project/fenced/configs/configstest"
	"github.com/fenced-project/fenced/tests/testbed"
)

// agreementYAML is a single replica with mutual TLS for Raft, HTTPS, an
// API token, a cluster and a PowerStore array with CHAP secrets; %s are
// the data directory, the Raft and the HTTP address.
const agreementYAML = `replica:
  id: r1
  dataDir: %s
  raftBindAddress: %s
  tls: {certFile: raft.crt, keyFile: raft.key, caFile: ca.crt}
http:
  listen: %s
  tls: {certFile: http.crt, keyFile: http.key, clientCAFile: ca.crt}
  tokenFile: token
clusters:
  - name: c1
    kubeconfig: kc
    arrays: [ps-1]
arrays:
  - name: ps-1
    family: powerstore
    endpoint: https://127.0.0.1:9
    username: u
    passwordFile: pw
    powerstore: {chapSecretsFile: chap}
`

// agreementFixture writes the configuration doc (agreementYAML when
// empty) and every file it names into a new directory, with the files in
// change (name to content) instead, and returns the configuration's path.
func agreementFixture(t *testing.T, ca *configstest.CA, doc string, change map[string]string) string {
	t.Helper()
	if doc == "" {
		doc = agreementYAML
	}
	dir := t.TempDir()
	raftCert, raftKey := ca.Issue(t, configstest.Cert{CN: "r1", Names: []string{"r1", "127.0.0.1", "fenced://replica/r1"}})
	httpCert, httpKey := ca.Issue(t, configstest.Cert{CN: "r1", Names: []string{"127.0.0.1"}, Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	files := map[string]string{
		"fenced.yaml": fmt.Sprintf(doc, filepath.Join(dir, "data"), freeAddr(t), freeAddr(t)),
		"ca.crt":      string(ca.PEM), "raft.crt": string(raftCert), "raft.key": string(raftKey),
		"http.crt": string(httpCert), "http.key": string(httpKey), "token": "0123456789abcdef0123\n",
		"kc": string(configstest.Kubeconfig("https://127.0.0.1:9", "kube-token")), "pw": "pa55word\n",
		"chap": "iqn.1993-08.org.debian:01:w1: chapsecret1234\n",
	}
	for k, v := range change {
		files[k] = v
	}
	for k, v := range files {
		configstest.Write(t, dir, k, []byte(v))
	}
	return filepath.Join(dir, "fenced.yaml")
}

// TestValidateRefusesWhatRunRefuses checks that every configuration
// `fenced run` refuses as permanent (exit 78) `fenced config validate`
// refuses too, naming the field and line, and that the fixture they vary
// validates and starts.
func TestValidateRefusesWhatRunRefuses(t *testing.T) {
	ca := configstest.NewCA(t, "ca")
	_, strayKey := ca.Issue(t, configstest.Cert{CN: "stray"})
	sub := func(old, repl string) string {
		require.Contains(t, agreementYAML, old)
		return strings.Replace(agreementYAML, old, repl, 1)
	}
	noTLSWithPeers := strings.Replace(sub("http:\n", "peers:\n  - id: r2\n    raftAddress: 127.0.0.2:7441\n    httpAddress: https://127.0.0.2:7440\nhttp:\n"),
		"  tls: {certFile: raft.crt, keyFile: raft.key, caFile: ca.crt}\n", "", 1)
	tcs := []struct {
		name   string
		doc    string
		change map[string]string
		want   string
	}{
		{"peers without replica.tls", noTLSWithPeers, nil, "replica.tls: required with peers"},
		{"HTTP certificate and key do not match", "", map[string]string{"http.key": string(strayKey)}, "http.tls.certFile: certificate and http.tls.keyFile do not load as a pair"},
		{"Raft certificate and key do not match", "", map[string]string{"raft.key": string(strayKey)}, "replica.tls.certFile: certificate and replica.tls.keyFile do not load as a pair"},
		{"CA file without a certificate", "", map[string]string{"ca.crt": "nothing\n"}, "replica.tls.caFile: holds no PEM certificate"},
		{"short API token", "", map[string]string{"token": "short\n"}, "http.tokenFile: the token is 5 characters long"},
		{"invalid CHAP secrets", "", map[string]string{"chap": "[a, b]\n"}, "arrays[0].powerstore.chapSecretsFile:"},
		{"password file with two lines", "", map[string]string{"pw": "pa55\nword\n"}, "arrays[0].passwordFile: secret file"},
		{"caFile on PowerScale", sub("family: powerstore\n", "family: powerscale\n    caFile: ca.crt\n"), nil, "arrays[0].caFile: not supported for powerscale arrays"},
		{"caFile on Unity", sub("family: powerstore\n", "family: unity\n    caFile: ca.crt\n"), nil, "arrays[0].caFile: not supported for unity arrays"},
		{"Unity endpoint with a path", sub("family: powerstore\n    endpoint: https://127.0.0.1:9\n", "family: unity\n    endpoint: https://127.0.0.1:9/api\n"), nil, "arrays[0].endpoint: \"https://127.0.0.1:9/api\": give scheme, host and port only"},
		{"unknown setting", sub("  tokenFile: token\n", "  tokenFile: token\n  tokenFiel: token\n"), nil, "http.tokenFiel: unknown setting"},
	}

	for _, tc := range tcs {
		t.Run(tc.name, func(t *testing.T) {
			f := agreementFixture(t, ca, tc.doc, tc.change)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			var out, errb bytes.Buffer
			code := run(ctx, []string{"run", "--config", f, "--log-output", "stream"}, &out, &errb)
			require.Equal(t, exitConfig, code, "fenced run must refuse it as a configuration error\n%s", errb.String())

			out.Reset()
			errb.Reset()
			code = run(context.Background(), []string{"config", "validate", f}, &out, &errb)
			assert.Equal(t, exitFailure, code, "fenced config validate must refuse it\n%s", out.String())
			assert.Contains(t, errb.String(), tc.want)
			assert.Regexp(t, `\(line \d+\)`, errb.String(), "the problem names its line")
		})
	}

	t.Run("the fixture validates and starts", func(t *testing.T) {
		f := agreementFixture(t, ca, "", nil)
		var out, errb bytes.Buffer
		require.Equal(t, exitOK, run(context.Background(), []string{"config", "validate", f}, &out, &errb), errb.String())
		assert.Contains(t, out.String(), "valid: replica r1")
		runStarts(t, f, "", 0)
	})
}

// runStarts runs `fenced run --config f` in process until it logs that it
// started, then stops it and checks it stopped cleanly.
//
// clusters is how many clusters' API servers it must reach before it is
// stopped.
func runStarts(t *testing.T, f, credDir string, clusters int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errb := &syncBuffer{}
	done := make(chan int, 1)
	args := []string{"run", "--config", f, "--log-output", "stream", "--log-format", "text"}
	if credDir != "" {
		args = append(args, "--credentials-dir", credDir)
	}
	go func() { done <- run(ctx, args, &bytes.Buffer{}, errb) }()
	deadline := time.After(30 * time.Second)
	for !strings.Contains(errb.String(), "fenced started") ||
		strings.Count(errb.String(), "cluster API server reachable") < clusters {
		select {
		case code := <-done:
			t.Fatalf("fenced run exited with %d before it started:\n%s", code, errb.String())
		case <-deadline:
			t.Fatalf("fenced run did not start (and reach %d API servers) in 30s:\n%s", clusters, errb.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	cancel()
	select {
	case code := <-done:
		assert.Equal(t, exitOK, code, errb.String())
	case <-time.After(10 * time.Second):
		t.Fatal("fenced run did not stop")
	}
	assert.NotContains(t, errb.String(), "invalid configuration")
}

// TestShippedConfigsValidateAndStart validates every configuration shipped
// in configs/ with usable credentials and starts it against the test bed:
// each cluster's kubeconfig credential names the test bed's kube-apiserver,
// and fenced must reach it. The listen addresses and the data directory are
// moved by FENCED_* variables to free ports and a temporary directory;
// everything else is as shipped (the arrays' addresses are not there).
func TestShippedConfigsValidateAndStart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	files, err := filepath.Glob("../../configs/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	const kubeToken = "shipped-configs-kube-token-0123456789"
	cp := testbed.Start(t, testbed.Options{
		Tokens: []testbed.Token{{Token: kubeToken, User: "fenced", UID: "fenced", Groups: []string{"system:masters"}}}})
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Setenv("FENCED_HTTP_LISTEN", freeAddr(t))
			t.Setenv("FENCED_REPLICA_RAFTBINDADDRESS", freeAddr(t))
			t.Setenv("FENCED_REPLICA_DATADIR", t.TempDir())
			cfg, err := configs.Load(f, configs.Options{})
			require.NoError(t, err)
			credDir := t.TempDir()
			var names []string
			for _, ref := range cfg.UncheckedCredentials() {
				names = append(names, strings.TrimPrefix(ref, configs.CredentialPrefix))
			}
			site := configstest.NewSite(t)
			site.ReplicaID = cfg.Replica.ID
			site.Host, _, _ = net.SplitHostPort(cfg.Replica.RaftAdvertiseAddress)
			site.Credentials(t, credDir, names)
			for _, c := range cfg.Clusters {
				if name, ok := strings.CutPrefix(c.Kubeconfig, configs.CredentialPrefix); ok {
					require.NoError(t, cp.WriteKubeconfig(filepath.Join(credDir, name), kubeToken))
				}
			}

			var out, errb bytes.Buffer
			code := run(context.Background(), []string{"config", "validate", "--credentials-dir", credDir, f}, &out, &errb)
			require.Equal(t, exitOK, code, errb.String())
			assert.Contains(t, out.String(), "valid: replica "+cfg.Replica.ID)
			assert.NotContains(t, out.String(), "not checked")
			runStarts(t, f, credDir, len(cfg.Clusters))
		})
	}
}

// TestValidateChecksKubeconfigs: validate loads each cluster's kubeconfig
// the way fenced run does and refuses one that does not load or names no
// API server, naming the field, and never prints the kubeconfig's token.
// (fenced run starts with such a cluster and reports it unprotected.)
func TestValidateChecksKubeconfigs(t *testing.T) {
	ca := configstest.NewCA(t, "ca")
	const token = "planted-kube-token-0123456789"
	for _, tc := range []struct{ name, kc string }{
		{"garbage kubeconfig", "this is not a kubeconfig " + token + "\n"},
		{"kubeconfig without a server", string(configstest.Kubeconfig(`""`, token))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := agreementFixture(t, ca, "", map[string]string{"kc": tc.kc})
			var out, errb bytes.Buffer
			code := run(context.Background(), []string{"config", "validate", f}, &out, &errb)
			assert.Equal(t, exitFailure, code, out.String())
			assert.Contains(t, errb.String(), "clusters[0].kubeconfig: ")
			assert.NotContains(t, out.String()+errb.String(), token)
		})
	}
}
