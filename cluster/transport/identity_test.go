package transport

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/cluster/clustertest"
)

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	require.NoError(t, err)
	return u
}

// A certificate names a replica by the URI SAN fenced://replica/<id> and
// by nothing else: not its common name, DNS names or addresses, even when
// they are the replica's ID or the host of its Raft address.
func TestNamedPeersByURIOnly(t *testing.T) {
	peers := []Peer{{ID: "mgmt1", Addr: "10.0.0.11:7441"}, {ID: "mgmt2", Addr: "mgmt2.example.net:7441"}}
	cases := []struct {
		name string
		cert x509.Certificate
		want []string
	}{
		{"the URI", x509.Certificate{URIs: []*url.URL{ReplicaURI("mgmt1")}}, []string{"mgmt1"}},
		{"the URI, another case of scheme and host", x509.Certificate{URIs: []*url.URL{mustURL(t, "FENCED://Replica/mgmt2")}}, []string{"mgmt2"}},
		{"two URIs", x509.Certificate{URIs: []*url.URL{ReplicaURI("mgmt2"), ReplicaURI("mgmt1")}}, []string{"mgmt1", "mgmt2"}},
		{"the URI of no configured replica", x509.Certificate{URIs: []*url.URL{ReplicaURI("mgmt9")}}, nil},
		{"the ID as common name and DNS name", x509.Certificate{Subject: pkix.Name{CommonName: "mgmt1"}, DNSNames: []string{"mgmt1"}}, nil},
		{"the host's address", x509.Certificate{Subject: pkix.Name{CommonName: "node-exporter"}, IPAddresses: []net.IP{net.ParseIP("10.0.0.11")}}, nil},
		{"the host's name", x509.Certificate{Subject: pkix.Name{CommonName: "mgmt2.example.net"}, DNSNames: []string{"mgmt2.example.net"}}, nil},
		{"a deeper path", x509.Certificate{URIs: []*url.URL{mustURL(t, "fenced://replica/mgmt1/x")}}, nil},
		{"a port", x509.Certificate{URIs: []*url.URL{mustURL(t, "fenced://replica:1/mgmt1")}}, nil},
		{"a query", x509.Certificate{URIs: []*url.URL{mustURL(t, "fenced://replica/mgmt1?x=1")}}, nil},
		{"a fragment", x509.Certificate{URIs: []*url.URL{mustURL(t, "fenced://replica/mgmt1#x")}}, nil},
		{"a user", x509.Certificate{URIs: []*url.URL{mustURL(t, "fenced://u@replica/mgmt1")}}, nil},
		{"another scheme", x509.Certificate{URIs: []*url.URL{mustURL(t, "spiffe://replica/mgmt1")}}, nil},
		{"another host", x509.Certificate{URIs: []*url.URL{mustURL(t, "fenced://mgmt1")}}, nil},
		{"an opaque URI", x509.Certificate{URIs: []*url.URL{mustURL(t, "fenced:replica/mgmt1")}}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, NamedPeers(&tc.cert, peers))
		})
	}
}

// A refusal of a certificate that names a replica by common name or DNS
// name only says how to reissue it; other refusals add nothing.
func TestRefusalHint(t *testing.T) {
	peers := []Peer{{ID: "mgmt1", Addr: "10.0.0.11:7441"}}
	legacy := &x509.Certificate{Subject: pkix.Name{CommonName: "mgmt1"}, DNSNames: []string{"mgmt1"}}
	assert.Contains(t, RefusalHint(legacy, peers), "fenced://replica/mgmt1")
	assert.Contains(t, RefusalHint(legacy, peers), "fenced pki replica --from-cert")
	assert.Empty(t, RefusalHint(&x509.Certificate{Subject: pkix.Name{CommonName: "node-exporter"}}, peers))
	named := *legacy
	named.URIs = []*url.URL{ReplicaURI("mgmt1")}
	assert.Empty(t, RefusalHint(&named, peers))
}

// A replica's own certificate must name it by its URI.
func TestCheckNames(t *testing.T) {
	ca, err := clustertest.NewCA("test CA")
	require.NoError(t, err)
	creds := func(n clustertest.Names) *Credentials {
		leaf, err := ca.IssueNames(n)
		require.NoError(t, err)
		c, err := leaf.TLSCertificate()
		require.NoError(t, err)
		return NewCredentials(c, x509.NewCertPool(), "")
	}
	require.NoError(t, creds(clustertest.Names{CommonName: "x", URIs: []*url.URL{ReplicaURI("mgmt1")}}).CheckNames("mgmt1"))

	err = creds(clustertest.Names{CommonName: "x", URIs: []*url.URL{ReplicaURI("mgmt2")}}).CheckNames("mgmt1")
	require.ErrorIs(t, err, ErrNotAPeer)
	require.ErrorContains(t, err, "fenced pki replica --config")

	err = creds(clustertest.Names{CommonName: "mgmt1", DNSNames: []string{"mgmt1"}, IPs: []net.IP{net.ParseIP("10.0.0.11")}}).CheckNames("mgmt1")
	require.ErrorIs(t, err, ErrNotAPeer)
	require.ErrorContains(t, err, `does not name replica "mgmt1" by the URI SAN fenced://replica/mgmt1`)
	assert.ErrorContains(t, err, "fenced pki replica --from-cert")
}
