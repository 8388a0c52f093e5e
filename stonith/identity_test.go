package stonith

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/cluster/clustertest"
	"github.com/fenced-project/fenced/cluster/transport"
)

// TestOperatorsAndReplicasOverHTTPS serves an operator route and a replica
// route over real mutual TLS. The replicas' CA and a separate operator CA
// are both trusted for client certificates. A listed operator acts; a
// replica's certificate, an unlisted certificate from the operator CA and a
// certificate from the replicas' CA that names no replica are refused as
// operators (403). Only a replica reaches the replica route; a replica that
// forwards names the original caller, which is believed from it and from
// nobody else.
func TestOperatorsAndReplicasOverHTTPS(t *testing.T) {
	replicaCA, err := clustertest.NewCA("replica CA")
	require.NoError(t, err)
	operatorCA, err := clustertest.NewCA("operator CA")
	require.NoError(t, err)
	peers := []transport.Peer{{ID: "mgmt1", Addr: "127.0.0.1:7441"}, {ID: "mgmt2", Addr: "127.0.0.1:7442"}}
	a := (&Authenticator{}).WithIdentities(Identities{
		Operators: []string{"alice"}, OperatorCAs: poolOf(operatorCA.Cert), ReplicaCAs: poolOf(replicaCA.Cert),
		Peers: func() []transport.Peer { return peers },
	})

	seen := make(chan string, 1)
	record := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, ok := CallerOf(r)
		if !ok {
			seen <- "(no caller)"
			return
		}
		seen <- c.Name
		w.WriteHeader(http.StatusNoContent)
	})
	mux := http.NewServeMux()
	mux.Handle("POST /op", a.RequireOperator(record))
	mux.Handle("POST /replica", a.RequireReplica(record))
	srv := httptest.NewUnstartedServer(mux)
	server := issue(t, replicaCA, "server")
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{server}, ClientAuth: tls.VerifyClientCertIfGiven,
		ClientCAs: poolOf(replicaCA.Cert, operatorCA.Cert), MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	defer srv.Close()

	post := func(cert *tls.Certificate, path string, header map[string]string) int {
		tc := &tls.Config{RootCAs: poolOf(replicaCA.Cert), MinVersion: tls.VersionTLS12}
		if cert != nil {
			tc.Certificates = []tls.Certificate{*cert}
		}
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: tc}, Timeout: 5 * time.Second}
		req, err := http.NewRequest(http.MethodPost, srv.URL+path, nil)
		require.NoError(t, err)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		if resp.StatusCode >= 400 {
			var body errorBody
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
			t.Logf("%s %s: %d %s", path, header, resp.StatusCode, body.Error)
		}
		return resp.StatusCode
	}
	alice := issue(t, operatorCA, "alice")
	mallory := issue(t, operatorCA, "mallory")
	mgmt2 := issue(t, replicaCA, "mgmt2")
	monitoring := issue(t, replicaCA, "monitoring")

	assert.Equal(t, http.StatusNoContent, post(&alice, "/op", nil), "a listed operator acts")
	assert.Equal(t, "cert:alice", <-seen)
	assert.Equal(t, http.StatusForbidden, post(&mgmt2, "/op", nil), "a replica certificate is no operator")
	assert.Equal(t, http.StatusForbidden, post(&mallory, "/op", nil), "an unlisted certificate is no operator")
	assert.Equal(t, http.StatusForbidden, post(&monitoring, "/op", nil), "a certificate naming no replica is nothing")
	assert.Equal(t, http.StatusUnauthorized, post(nil, "/op", nil), "no credentials")

	// A forged caller from anyone but a replica is not believed.
	assert.Equal(t, http.StatusNoContent, post(&alice, "/op", map[string]string{CallerHeader: "cert:root"}))
	assert.Equal(t, "cert:alice", <-seen, "an operator cannot name another caller")
	assert.Equal(t, http.StatusForbidden, post(&mallory, "/op", map[string]string{CallerHeader: "cert:alice"}))

	// A replica forwarding an operator's call names the operator.
	assert.Equal(t, http.StatusNoContent, post(&mgmt2, "/op", map[string]string{CallerHeader: "cert:alice"}))
	assert.Equal(t, "cert:alice", <-seen, "the ledger records the person, not the replica")
	assert.Equal(t, http.StatusForbidden, post(&mgmt2, "/op", map[string]string{CallerHeader: "replica:mgmt1"}),
		"a replica cannot pass another replica off as an operator")

	// The replica route takes replicas only.
	assert.Equal(t, http.StatusNoContent, post(&mgmt2, "/replica", nil))
	assert.Equal(t, "replica:mgmt2", <-seen)
	assert.Equal(t, http.StatusForbidden, post(&alice, "/replica", nil), "an operator is no replica")
	assert.Equal(t, http.StatusForbidden, post(&monitoring, "/replica", nil))
}

func issue(t *testing.T, ca *clustertest.CA, name string) tls.Certificate {
	t.Helper()
	leaf, err := ca.Issue(name, net.IPv4(127, 0, 0, 1))
	require.NoError(t, err)
	c, err := leaf.TLSCertificate()
	require.NoError(t, err)
	return c
}

func poolOf(certs ...*x509.Certificate) *x509.CertPool {
	p := x509.NewCertPool()
	for _, c := range certs {
		p.AddCert(c)
	}
	return p
}
