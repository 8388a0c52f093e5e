package stonith

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"log/slog"
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
// operators (403). Only a replica reaches the replica route. A caller
// header is believed from nobody: a replica's certificate with
// "X-Fenced-Caller: cert:alice" is still no operator, and one naming
// another replica is still the certificate's replica. A replica carrying
// an operator's call is believed only with the operator's own token.
func TestOperatorsAndReplicasOverHTTPS(t *testing.T) {
	replicaCA, err := clustertest.NewCA("replica CA")
	require.NoError(t, err)
	operatorCA, err := clustertest.NewCA("operator CA")
	require.NoError(t, err)
	peers := []transport.Peer{{ID: "mgmt1", Addr: "127.0.0.1:7441"}, {ID: "mgmt2", Addr: "127.0.0.1:7442"}}
	var logs bytes.Buffer
	a := (&Authenticator{token: []byte(testToken)}).WithLogger(slog.New(slog.NewTextHandler(&logs, nil))).WithIdentities(Identities{
		Operators: []string{"alice"}, OperatorCAs: poolOf(operatorCA.Cert), ReplicaCAs: poolOf(replicaCA.Cert),
		Peers: func() []transport.Peer { return peers },
	})

	seen := make(chan Caller, 1)
	record := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, ok := CallerOf(r)
		if !ok {
			seen <- Caller{Name: "(no caller)"}
			return
		}
		if c.Role == RoleOperator && !c.Certificate {
			assert.Equal(t, c.Name, r.Header.Get(CallerHeader), "a token call passes on what the token proves, for leaders of earlier versions")
		} else {
			assert.Empty(t, r.Header.Get(CallerHeader), "nothing else is passed on")
		}
		seen <- c
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

	post := func(cert *tls.Certificate, path string, header map[string]string) (int, string) {
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
		var body errorBody
		if resp.StatusCode >= 400 {
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
			t.Logf("%s %s: %d %s", path, header, resp.StatusCode, body.Error)
		}
		return resp.StatusCode, body.Error
	}
	code := func(cert *tls.Certificate, path string, header map[string]string) int {
		c, _ := post(cert, path, header)
		return c
	}
	alice := issue(t, operatorCA, "alice")
	mallory := issue(t, operatorCA, "mallory")
	mgmt2 := issue(t, replicaCA, "mgmt2")
	monitoring := issue(t, replicaCA, "monitoring")

	assert.Equal(t, http.StatusNoContent, code(&alice, "/op", nil), "a listed operator acts")
	c := <-seen
	assert.Equal(t, Caller{Name: "cert:alice", Role: RoleOperator, Certificate: true}, c)
	assert.Equal(t, http.StatusForbidden, code(&mgmt2, "/op", nil), "a replica certificate is no operator")
	assert.Equal(t, http.StatusForbidden, code(&mallory, "/op", nil), "an unlisted certificate is no operator")
	assert.Equal(t, http.StatusForbidden, code(&monitoring, "/op", nil), "a certificate naming no replica is nothing")
	assert.Equal(t, http.StatusUnauthorized, code(nil, "/op", nil), "no credentials")

	// A forged caller is not believed from anyone.
	assert.Equal(t, http.StatusNoContent, code(&alice, "/op", map[string]string{CallerHeader: "cert:root"}))
	assert.Equal(t, "cert:alice", (<-seen).Name, "an operator cannot name another caller")
	assert.Equal(t, http.StatusForbidden, code(&mallory, "/op", map[string]string{CallerHeader: "cert:alice"}))
	assert.NotContains(t, logs.String(), "caller header", "only a replica's certificate with the header is logged")
	st, msg := post(&mgmt2, "/op", map[string]string{CallerHeader: "cert:alice"})
	assert.Equal(t, http.StatusForbidden, st, "a replica's certificate and a header it writes is no operator")
	assert.Contains(t, msg, "replica:mgmt2 may not call /op: it needs an operator")
	assert.Contains(t, msg, CallerHeader+" header is not believed")
	assert.Contains(t, logs.String(), "level=WARN msg=\"caller header from a replica's certificate ignored")
	assert.Contains(t, logs.String(), "replica=mgmt2 header=cert:alice")
	assert.Equal(t, http.StatusForbidden, code(&mgmt2, "/op", map[string]string{CallerHeader: "token"}))
	assert.Equal(t, http.StatusForbidden, code(&mgmt2, "/op", map[string]string{CallerHeader: "replica:mgmt1"}),
		"a replica cannot pass another replica off as an operator")

	// A replica carrying an operator's call with the operator's token: the
	// token proves the person, the certificate the carrier.
	bearer := "Bearer " + testToken
	assert.Equal(t, http.StatusNoContent, code(&mgmt2, "/op", map[string]string{"Authorization": bearer, OperatorHeader: "bob"}))
	assert.Equal(t, Caller{Name: "token/bob", Role: RoleOperator, Via: "mgmt2"}, <-seen)
	assert.Equal(t, http.StatusNoContent, code(&mgmt2, "/op", map[string]string{"Authorization": bearer, CallerHeader: "cert:alice"}))
	assert.Equal(t, Caller{Name: "token", Role: RoleOperator, Via: "mgmt2"}, <-seen, "the header names nobody")
	assert.Contains(t, logs.String(), "replica=mgmt2 header=cert:alice")
	logs.Reset()
	assert.Equal(t, http.StatusNoContent, code(&mgmt2, "/op", map[string]string{"Authorization": bearer, CallerHeader: "token"}))
	assert.Equal(t, Caller{Name: "token", Role: RoleOperator, Via: "mgmt2"}, <-seen)
	assert.Empty(t, logs.String(), "a header saying what the token proves is no forgery (a follower's forward)")
	assert.Equal(t, http.StatusUnauthorized, code(&mgmt2, "/op", map[string]string{"Authorization": "Bearer wrong-token-wrong-token"}),
		"a replica carrying a wrong token carries nothing")
	assert.Equal(t, http.StatusNoContent, code(nil, "/op", map[string]string{"Authorization": bearer}))
	assert.Equal(t, Caller{Name: "token", Role: RoleOperator}, <-seen, "the token in person")

	// The replica route takes replicas only, as their certificate names them.
	assert.Equal(t, http.StatusNoContent, code(&mgmt2, "/replica", nil))
	assert.Equal(t, Caller{Name: "replica:mgmt2", Role: RoleReplica, Replica: "mgmt2"}, <-seen)
	assert.Equal(t, http.StatusNoContent, code(&mgmt2, "/replica", map[string]string{CallerHeader: "replica:mgmt1"}))
	assert.Equal(t, Caller{Name: "replica:mgmt2", Role: RoleReplica, Replica: "mgmt2"}, <-seen,
		"a replica is what its certificate names, never what its header says")
	assert.Contains(t, logs.String(), "replica=mgmt2 header=replica:mgmt1")
	assert.Equal(t, http.StatusForbidden, code(&alice, "/replica", nil), "an operator is no replica")
	assert.Equal(t, http.StatusForbidden, code(&alice, "/replica", map[string]string{CallerHeader: "replica:mgmt1"}))
	assert.Equal(t, http.StatusForbidden, code(&monitoring, "/replica", nil))
	assert.Equal(t, http.StatusForbidden, code(nil, "/replica", map[string]string{"Authorization": bearer, CallerHeader: "replica:mgmt1"}),
		"the token is no replica")
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
