package configs

import (
	"crypto/x509"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/configs/configstest"
)

const contentsYAML = `replica:
  id: r1
  raftBindAddress: 127.0.0.1:7441
  tls: {certFile: raft.crt, keyFile: raft.key, caFile: ca.crt}
peers:
  - id: r2
    raftAddress: 127.0.0.2:7441
    httpAddress: https://127.0.0.2:7440
http:
  listen: 127.0.0.1:7440
  tls: {certFile: http.crt, keyFile: http.key, clientCAFile: ca.crt}
  tokenFile: token
clusters:
  - name: c1
    kubeconfig: kc
    arrays: [ps-1]
arrays:
  - name: ps-1
    family: powerstore
    endpoint: https://127.0.0.1:9443
    username: u
    passwordFile: pw
    powerstore: {chapSecretsFile: chap}
`

// plantedKubeToken must never appear in a problem.
const plantedKubeToken = "kube-token-PLANTED-4711"

// contentsFixture writes every file contentsYAML names, all usable, then
// applies change (file name to content) and returns the directory.
func contentsFixture(t *testing.T, ca *configstest.CA, change map[string][]byte) string {
	t.Helper()
	dir := t.TempDir()
	raftCert, raftKey := ca.Issue(t, configstest.Cert{CN: "r1", Names: []string{"r1", "127.0.0.1", "fenced://replica/r1"}})
	httpCert, httpKey := ca.Issue(t, configstest.Cert{CN: "r1", Names: []string{"127.0.0.1"}, Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	files := map[string][]byte{
		"ca.crt": ca.PEM, "raft.crt": raftCert, "raft.key": raftKey, "http.crt": httpCert, "http.key": httpKey,
		"token": []byte("0123456789abcdef\n"), "kc": configstest.Kubeconfig("https://127.0.0.1:6443", plantedKubeToken),
		"pw": []byte("pa55word\n"), "chap": []byte("iqn.1993-08.org.debian:01:w1: chapsecret1234\n"),
	}
	for k, v := range change {
		files[k] = v
	}
	for k, v := range files {
		configstest.Write(t, dir, k, v)
	}
	return dir
}

// TestContentsValid checks the fixture passes, so each case below fails
// for its one change. Its one warning is the deprecated chapSecretsFile,
// kept in the fixture because a file it names is still checked.
func TestContentsValid(t *testing.T) {
	dir := contentsFixture(t, configstest.NewCA(t, "ca"), nil)
	cfg, err := Parse([]byte(contentsYAML), dir, Options{CheckContents: true})
	require.NoError(t, err)
	require.Len(t, cfg.Warnings(), 1)
	w := cfg.Warnings()[0].String()
	assert.True(t, strings.HasPrefix(w, "arrays[0].powerstore.chapSecretsFile: deprecated and ignored: "), w)
	assert.Contains(t, w, "(line 23)")
	assert.NotContains(t, w, "chapsecret1234")
}

// TestContentsRefused lists what `fenced config validate` refuses in the
// files a configuration names, each with its field and line.
func TestContentsRefused(t *testing.T) {
	ca := configstest.NewCA(t, "ca")
	other := configstest.NewCA(t, "another ca")
	otherCert, otherKey := other.Issue(t, configstest.Cert{CN: "r1", Names: []string{"r1", "127.0.0.1"}})
	_, strayKey := ca.Issue(t, configstest.Cert{CN: "r1"})
	httpPair := func(c configstest.Cert) map[string][]byte {
		cert, key := ca.Issue(t, c)
		return map[string][]byte{"http.crt": cert, "http.key": key}
	}
	raft := func(c configstest.Cert) map[string][]byte {
		cert, key := ca.Issue(t, c)
		return map[string][]byte{"raft.crt": cert, "raft.key": key}
	}
	tcs := []struct {
		name   string
		change map[string][]byte
		want   string
	}{
		{"HTTP certificate and key do not match", map[string][]byte{"http.key": strayKey}, "http.tls.certFile: certificate and http.tls.keyFile do not load as a pair: tls: private key does not match public key (line 11)"},
		{"raft certificate without the host's name", raft(configstest.Cert{CN: "r1", Names: []string{"r1"}}), `replica.tls.certFile: the certificate does not name "127.0.0.1", the host of replica.raftAdvertiseAddress`},
		{"raft certificate naming another replica", raft(configstest.Cert{CN: "r2", Names: []string{"r2", "127.0.0.2", "fenced://replica/r2"}}), `replica.tls.certFile: the certificate does not name replica "r1"`},
		{"raft certificate naming the replica by common name only", raft(configstest.Cert{CN: "r1", Names: []string{"r1", "127.0.0.1"}}), "replica.tls.certFile: the certificate does not name replica \"r1\" by the URI SAN fenced://replica/r1: peers refuse it (a common name, DNS name or address is no replica identity); issue it with `fenced pki replica --config`, or reissue it with `fenced pki replica --from-cert`"},
		{"raft certificate without clientAuth", raft(configstest.Cert{CN: "r1", Names: []string{"r1", "127.0.0.1"}, Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}), "replica.tls.certFile: the certificate lacks the clientAuth extended key usage"},
		{"raft certificate expired", raft(configstest.Cert{CN: "r1", Names: []string{"r1", "127.0.0.1"}, NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-time.Hour)}), "replica.tls.certFile: the certificate expired on "},
		{"raft certificate of another CA", map[string][]byte{"raft.crt": otherCert, "raft.key": otherKey}, "replica.tls.certFile: the certificate does not chain to replica.tls.caFile"},
		{"HTTP certificate without the listen host", httpPair(configstest.Cert{CN: "x", Names: []string{"mgmt9.example.net"}}), `http.tls.certFile: the certificate does not name "127.0.0.1", the host of http.listen that clients and peers check`},
		{"CA file without a certificate", map[string][]byte{"ca.crt": []byte("-----BEGIN NOTHING-----\n")}, "replica.tls.caFile: holds no PEM certificate (line 4)"},
		{"short token", map[string][]byte{"token": []byte("0123456789\n")}, "http.tokenFile: the token is 10 characters long: the API needs at least 16"},
		{"invalid CHAP file", map[string][]byte{"chap": []byte("- just\n- a list\n")}, "arrays[0].powerstore.chapSecretsFile: "},
		{"password on two lines", map[string][]byte{"pw": []byte("pa55word\n\n")}, "arrays[0].passwordFile: secret file "},
	}
	for _, tc := range tcs {
		t.Run(tc.name, func(t *testing.T) {
			dir := contentsFixture(t, ca, tc.change)
			_, err := Parse([]byte(contentsYAML), dir, Options{CheckContents: true})
			var pe *ProblemsError
			require.ErrorAs(t, err, &pe, "the configuration must be refused")
			msg := pe.Error()
			assert.Contains(t, msg, tc.want)
			assert.Regexp(t, `\(line \d+\)`, msg, "every problem names its line")
			assert.NotContains(t, msg, plantedKubeToken)
			assert.NotContains(t, msg, "chapsecret1234")

			// Without CheckContents only the files' existence is checked.
			_, err = Parse([]byte(contentsYAML), dir, Options{})
			require.NoError(t, err)
		})
	}
}

// TestContentsWarnExpiry checks a certificate expiring within 30 days
// validates with a warning naming the field and line.
func TestContentsWarnExpiry(t *testing.T) {
	ca := configstest.NewCA(t, "ca")
	cert, key := ca.Issue(t, configstest.Cert{CN: "r1", Names: []string{"r1", "127.0.0.1", "fenced://replica/r1"}, NotAfter: time.Now().Add(24 * time.Hour)})
	dir := contentsFixture(t, ca, map[string][]byte{"raft.crt": cert, "raft.key": key})
	cfg, err := Parse([]byte(contentsYAML), dir, Options{CheckContents: true})
	require.NoError(t, err)
	require.Len(t, cfg.Warnings(), 2, "the expiry and the deprecated chapSecretsFile")
	w := cfg.Warnings()[0].String()
	assert.True(t, strings.HasPrefix(w, "replica.tls.certFile: the certificate expires on "), w)
	assert.Contains(t, w, "in 0 days: renew it (line 4)")
}
