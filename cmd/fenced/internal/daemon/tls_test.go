package daemon

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type certPair struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	der  []byte
}

func newCert(t *testing.T, cn string, parent *certPair, server bool) *certPair {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
	}
	signer, signerKey := tmpl, key
	if parent == nil {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage = x509.KeyUsageCertSign
	} else {
		signer, signerKey = parent.cert, parent.key
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
		if server {
			tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
			tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return &certPair{cert: cert, key: key, der: der}
}

func (c *certPair) write(t *testing.T, dir, name string) (certFile, keyFile string) {
	t.Helper()
	kb, err := x509.MarshalECPrivateKey(c.key)
	require.NoError(t, err)
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.der}), 0o600))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600))
	return certFile, keyFile
}

// TestHTTPSWithClientCertificates serves over TLS and authorizes a mutating
// route by client certificate.
func TestHTTPSWithClientCertificates(t *testing.T) {
	creds := t.TempDir()
	ca := newCert(t, "fenced-ca", nil, false)
	caFile, _ := ca.write(t, creds, "ca")
	newCert(t, "127.0.0.1", ca, true).write(t, creds, "http")
	client := newCert(t, "operator", ca, false)
	unlisted := newCert(t, "someone", ca, false)

	cfg := testConfig(t, "http:\n  tls:\n    certFile: credential:http.crt\n    keyFile: credential:http.key\n    clientCAFile: "+caFile+"\n    operators: [operator]\n")
	ln := listen(t)
	d, err := New(cfg, Options{Listener: ln, Notify: (&recorder{}).notify, CredentialsDir: creds})
	require.NoError(t, err)
	d.Handle("POST /v1/pause", d.Authorize(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		assert.NoError(t, <-done)
	})

	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	httpsClient := func(cert *certPair) *http.Client {
		tc := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
		if cert != nil {
			tc.Certificates = []tls.Certificate{{Certificate: [][]byte{cert.der}, PrivateKey: cert.key}}
		}
		return &http.Client{Transport: &http.Transport{TLSClientConfig: tc}, Timeout: 5 * time.Second}
	}
	base := "https://" + ln.Addr().String()
	require.Eventually(t, func() bool {
		resp, err := httpsClient(nil).Get(base + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 10*time.Second, 20*time.Millisecond)

	post := func(c *http.Client) int {
		resp, err := c.Post(base+"/v1/pause", "text/plain", nil)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	assert.Equal(t, http.StatusUnauthorized, post(httpsClient(nil)))
	assert.Equal(t, http.StatusNoContent, post(httpsClient(client)))
	assert.Equal(t, http.StatusForbidden, post(httpsClient(unlisted)), "a certificate not listed in http.tls.operators")
}
