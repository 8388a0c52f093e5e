package transport

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/cluster/clustertest"
)

func mustCert(t *testing.T, ca *clustertest.CA, name string) tls.Certificate {
	leaf, err := ca.Issue(name, net.IPv4(127, 0, 0, 1))
	require.NoError(t, err)
	cert, err := leaf.TLSCertificate()
	require.NoError(t, err)
	return cert
}

func poolOf(certs ...*x509.Certificate) *x509.CertPool {
	p := x509.NewCertPool()
	for _, c := range certs {
		p.AddCert(c)
	}
	return p
}

func port(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

func tlsDial(addr string, cfg *tls.Config) (*tls.Conn, error) {
	return tls.Dial("tcp", addr, cfg)
}
