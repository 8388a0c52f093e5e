package stonith

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/cluster/clustertest"
	"github.com/fenced-project/fenced/cluster/transport"
)

// TestHostNamedCertificateIsNoReplicaOverHTTPS serves r2's replica routes
// (a vantage report, the ledger version, a call forwarded with its caller)
// on 127.0.0.2, with r1, r2 and r3 configured on 127.0.0.1, .2 and .3. A
// certificate from the replicas' CA that names r1's host or address, or r1
// by common name or DNS name, but not the URI SAN fenced://replica/r1,
// calling from r1's address, is no replica: every replica route refuses it
// (403), and the caller it writes into the forwarding header is not
// believed. r1's own certificate (its URI) is r1, from any address.
func TestHostNamedCertificateIsNoReplicaOverHTTPS(t *testing.T) {
	hosts := []string{"127.0.0.1", "127.0.0.2", "127.0.0.3"}
	replicaCA, err := clustertest.NewCA("replica CA")
	require.NoError(t, err)
	operatorCA, err := clustertest.NewCA("operator CA")
	require.NoError(t, err)
	pool := func(certs ...*x509.Certificate) *x509.CertPool {
		p := x509.NewCertPool()
		for _, c := range certs {
			p.AddCert(c)
		}
		return p
	}
	peers := []transport.Peer{
		{ID: "r1", Addr: net.JoinHostPort(hosts[0], "7441")},
		{ID: "r2", Addr: net.JoinHostPort(hosts[1], "7441")},
		{ID: "r3", Addr: net.JoinHostPort(hosts[2], "7441")},
	}
	a := (&Authenticator{}).WithIdentities(Identities{
		Operators: []string{"alice"}, OperatorCAs: pool(operatorCA.Cert), ReplicaCAs: pool(replicaCA.Cert),
		Peers: func() []transport.Peer { return peers },
	})

	seen := make(chan Caller, 32) // never blocks a handler, even when the test fails
	record := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _ := CallerOf(r)
		seen <- c
		w.WriteHeader(http.StatusNoContent)
	})
	mux := http.NewServeMux()
	mux.Handle("POST /v1/vantage", a.RequireReplica(record))
	mux.Handle("GET /v1/ledger-version", a.RequireReplica(record))
	mux.Handle("POST /v1/pause", a.RequireOperator(record))

	issue := func(ca *clustertest.CA, n clustertest.Names) tls.Certificate {
		leaf, err := ca.IssueNames(n)
		require.NoError(t, err)
		c, err := leaf.TLSCertificate()
		require.NoError(t, err)
		return c
	}
	r2IP := net.ParseIP(hosts[1])
	srv := httptest.NewUnstartedServer(mux)
	srv.Listener.Close()
	srv.Listener, err = net.Listen("tcp", net.JoinHostPort(hosts[1], "0"))
	require.NoError(t, err, "listen on r2's address")
	srv.TLS = &tls.Config{MinVersion: tls.VersionTLS12, ClientAuth: tls.VerifyClientCertIfGiven,
		ClientCAs:    pool(replicaCA.Cert, operatorCA.Cert),
		Certificates: []tls.Certificate{issue(replicaCA, clustertest.Names{CommonName: "r2", IPs: []net.IP{r2IP}, URIs: []*url.URL{transport.ReplicaURI("r2")}})}}
	srv.StartTLS()
	defer srv.Close()

	// call sends a request with cert from the address from.
	call := func(t *testing.T, cert tls.Certificate, from, method, path string, header map[string]string) int {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: d.DialContext,
			TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool(replicaCA.Cert), Certificates: []tls.Certificate{cert}}}}
		req, err := http.NewRequest(method, srv.URL+path, nil)
		require.NoError(t, err)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		return resp.StatusCode
	}

	r1IP := net.ParseIP(hosts[0])
	for _, tc := range []struct {
		name  string
		names clustertest.Names
	}{
		{"a monitoring agent's certificate for r1's address", clustertest.Names{CommonName: "node-exporter-on-r1", IPs: []net.IP{r1IP}}},
		{"r1's address as common name", clustertest.Names{CommonName: hosts[0], DNSNames: []string{"r1.example.net"}, IPs: []net.IP{r1IP}}},
		{"the ID as common name and DNS name only", clustertest.Names{CommonName: "r1", DNSNames: []string{"r1"}, IPs: []net.IP{r1IP}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cert := issue(replicaCA, tc.names)
			assert.Equal(t, http.StatusForbidden, call(t, cert, hosts[0], http.MethodPost, "/v1/vantage", nil), "a vantage report as r1")
			assert.Equal(t, http.StatusForbidden, call(t, cert, hosts[0], http.MethodGet, "/v1/ledger-version", nil), "the ledger version as r1")
			assert.Equal(t, http.StatusForbidden, call(t, cert, hosts[0], http.MethodPost, "/v1/vantage", map[string]string{CallerHeader: "replica:r1"}),
				"a vantage report forwarded as from r1")
			assert.Equal(t, http.StatusForbidden, call(t, cert, hosts[0], http.MethodPost, "/v1/pause", map[string]string{CallerHeader: "cert:alice"}),
				"a call forwarded as r1 for an operator")
			select {
			case c := <-seen:
				t.Fatalf("a handler ran for %+v", c)
			default:
			}
		})
	}

	// r1's certificate names it by URI: it is r1 wherever it calls from.
	r1 := issue(replicaCA, clustertest.Names{CommonName: "r1", IPs: []net.IP{r1IP}, URIs: []*url.URL{transport.ReplicaURI("r1")}})
	for _, from := range []string{hosts[0], "127.0.0.4"} {
		assert.Equal(t, http.StatusNoContent, call(t, r1, from, http.MethodPost, "/v1/vantage", nil), "r1 from %s", from)
		c := <-seen
		assert.Equal(t, RoleReplica, c.Role)
		assert.Equal(t, "r1", c.Replica)
	}
}
