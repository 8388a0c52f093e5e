// Package configstest makes the files a configuration names, for tests:
// a CA and certificates with chosen names, usages and validity, and
// kubeconfigs.
package configstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// CA is a test certificate authority.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// PEM is the CA certificate.
	PEM []byte
}

// NewCA makes a CA named name.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(10 * 365 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return &CA{cert: cert, key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// Cert describes a certificate to issue.
type Cert struct {
	CN    string
	Names []string // DNS names, IP addresses or URIs (scheme://...)
	// Usages are the extended key usages; nil means serverAuth and
	// clientAuth.
	Usages    []x509.ExtKeyUsage
	NotBefore time.Time // zero: an hour ago
	NotAfter  time.Time // zero: in a year
}

// Issue returns the PEM certificate and PEM private key of c, signed by ca.
func (ca *CA) Issue(t testing.TB, c Cert) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: c.CN},
		NotBefore: c.NotBefore, NotAfter: c.NotAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: c.Usages,
	}
	if tmpl.NotBefore.IsZero() {
		tmpl.NotBefore = time.Now().Add(-time.Hour)
	}
	if tmpl.NotAfter.IsZero() {
		tmpl.NotAfter = time.Now().Add(365 * 24 * time.Hour)
	}
	if tmpl.ExtKeyUsage == nil {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	}
	for _, n := range c.Names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if strings.Contains(n, "://") {
			u, err := url.Parse(n)
			require.NoError(t, err)
			tmpl.URIs = append(tmpl.URIs, u)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})
}

// Kubeconfig is a kubeconfig for server with a bearer token.
func Kubeconfig(server, token string) []byte {
	return []byte(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: ` + server + `
    insecure-skip-tls-verify: true
users:
- name: u
  user:
    token: ` + token + `
contexts:
- name: c
  context: {cluster: c, user: u}
current-context: c
`)
}

// Write writes data to dir/name with mode 0600 and returns the path.
func Write(t testing.TB, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, data, 0o600))
	return p
}

// Site is the material of one replica of a test site: the replica CA and
// the operator CA, and the replica's names.
type Site struct {
	ReplicaCA, OperatorCA, ArraysCA *CA
	// ReplicaID and Host name the replica; its Raft and HTTPS certificates
	// name both.
	ReplicaID, Host string
	// KubeServer is the API server the kubeconfigs name.
	KubeServer string
}

// NewSite makes the CAs of a site.
func NewSite(t testing.TB) *Site {
	t.Helper()
	return &Site{ReplicaCA: NewCA(t, "fenced replicas"), OperatorCA: NewCA(t, "fenced operators"),
		ArraysCA: NewCA(t, "arrays"), KubeServer: "https://127.0.0.1:6443"}
}

// Credentials writes into dir a usable file for each credential name (the
// NAME of credential:NAME), chosen by its name the way the shipped
// configurations name them: *.crt and *.key (raft.*, http.*; *-ca.crt
// CAs), kubeconfig-*, *.password, *.chap and api-token.
func (s *Site) Credentials(t testing.TB, dir string, names []string) {
	t.Helper()
	raftCert, raftKey := s.ReplicaCA.Issue(t, Cert{CN: s.ReplicaID, Names: []string{s.ReplicaID, s.Host, "fenced://replica/" + s.ReplicaID}})
	httpCert, httpKey := s.ReplicaCA.Issue(t, Cert{CN: s.Host, Names: []string{s.Host, "localhost", "127.0.0.1"}})
	for _, n := range names {
		var data []byte
		switch {
		case n == "raft.crt":
			data = raftCert
		case n == "raft.key":
			data = raftKey
		case n == "http.crt":
			data = httpCert
		case n == "http.key":
			data = httpKey
		case n == "operator-ca.crt":
			data = s.OperatorCA.PEM
		case n == "arrays-ca.crt":
			data = s.ArraysCA.PEM
		case filepath.Ext(n) == ".crt":
			data = s.ReplicaCA.PEM
		case n == "api-token":
			data = []byte("0123456789abcdef0123456789abcdef\n")
		case filepath.Ext(n) == ".chap":
			data = []byte("iqn.1993-08.org.debian:01:worker-1: chapsecret1234\n")
		case filepath.Ext(n) == ".password":
			data = []byte("array-pa55word\n")
		case len(n) > 11 && n[:11] == "kubeconfig-":
			data = Kubeconfig(s.KubeServer, "kube-token-"+n)
		default:
			t.Fatalf("no test content for credential %q", n)
		}
		Write(t, dir, n, data)
	}
}
