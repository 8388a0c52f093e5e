package pki

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/cluster/transport"
)

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func newCA(t *testing.T, name string) (*CA, Pair) {
	t.Helper()
	p, err := NewCA(name, now, DefaultCAValidity)
	require.NoError(t, err)
	ca, err := LoadCA(p.CertPEM, p.KeyPEM)
	require.NoError(t, err)
	return ca, p
}

func parse(t *testing.T, p Pair) *x509.Certificate {
	t.Helper()
	certs, err := ParseCertificates(p.CertPEM)
	require.NoError(t, err)
	require.Len(t, certs, 1)
	_, err = tls.X509KeyPair(p.CertPEM, p.KeyPEM)
	require.NoError(t, err, "certificate and key belong together")
	return certs[0]
}

func TestReplicaCertificate(t *testing.T) {
	ca, caPair := newCA(t, "fenced-replica-ca")
	p, err := ca.IssueReplica(ReplicaRequest{ID: "mgmt1", Hosts: []string{"mgmt1.example.net", "10.0.0.1", "[::1]", "MGMT1.example.net", ""}}, now, DefaultReplicaValidity)
	require.NoError(t, err)
	cert := parse(t, p)
	assert.Equal(t, "mgmt1", cert.Subject.CommonName)
	assert.Equal(t, []string{"mgmt1", "mgmt1.example.net"}, cert.DNSNames)
	require.Len(t, cert.IPAddresses, 2)
	assert.Equal(t, "10.0.0.1", cert.IPAddresses[0].String())
	assert.Equal(t, "::1", cert.IPAddresses[1].String())
	assert.False(t, cert.IsCA)

	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPair.CertPEM)
	for _, u := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		_, err := cert.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{u}})
		require.NoError(t, err, "usage %v", u)
	}
	_, err = cert.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: now, DNSName: "mgmt1.example.net"})
	require.NoError(t, err, "serves HTTPS as its host name")

	// The Raft transport recognises it as mgmt1, by its URI SAN.
	require.Len(t, cert.URIs, 1)
	assert.Equal(t, "fenced://replica/mgmt1", cert.URIs[0].String())
	peers := []transport.Peer{{ID: "mgmt1", Addr: "mgmt1.example.net:7441"}, {ID: "mgmt2", Addr: "mgmt2.example.net:7441"}}
	assert.Equal(t, []string{"mgmt1"}, transport.NamedPeers(cert, peers))
	d := Describe(cert, now)
	assert.Empty(t, d.Warnings)
	assert.Equal(t, []string{"mgmt1"}, d.Replicas)
	assert.Equal(t, "replica (serverAuth and clientAuth: Raft and HTTPS)", d.Role)
}

func TestOperatorCertificate(t *testing.T) {
	ca, caPair := newCA(t, "fenced-operator-ca")
	p, err := ca.IssueOperator("alice", "alice@example.net", now, DefaultOperatorValidity)
	require.NoError(t, err)
	cert := parse(t, p)
	assert.Equal(t, "alice", cert.Subject.CommonName)
	assert.Equal(t, []string{"alice@example.net"}, cert.EmailAddresses)
	assert.Empty(t, cert.DNSNames)
	assert.Equal(t, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, cert.ExtKeyUsage)

	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPair.CertPEM)
	_, err = cert.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	require.NoError(t, err)
	_, err = cert.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	require.Error(t, err, "an operator's certificate cannot serve")

	// It names no replica, even one called like the operator's host.
	peers := []transport.Peer{{ID: "mgmt1", Addr: "mgmt1.example.net:7441"}}
	assert.Empty(t, transport.NamedPeers(cert, peers))
	d := Describe(cert, now)
	assert.Equal(t, 90, d.DaysLeft)
	assert.Equal(t, "operator (clientAuth only)", d.Role)
	assert.Empty(t, d.Warnings)
}

func TestRefusals(t *testing.T) {
	ca, caPair := newCA(t, "ca")
	other, _ := newCA(t, "other")
	tcs := []struct {
		name string
		do   func() error
		want string
	}{
		{"empty replica ID", func() error {
			_, err := ca.IssueReplica(ReplicaRequest{}, now, time.Hour)
			return err
		}, "replica ID is empty"},
		{"bad host", func() error {
			_, err := ca.IssueReplica(ReplicaRequest{ID: "mgmt1", Hosts: []string{"mgmt 1"}}, now, time.Hour)
			return err
		}, `replica mgmt1: host "mgmt 1": not a host name`},
		{"beyond the CA", func() error {
			_, err := ca.IssueReplica(ReplicaRequest{ID: "mgmt1"}, now, 20*365*24*time.Hour)
			return err
		}, `after its CA "ca" expires`},
		{"CA not yet valid", func() error {
			_, err := ca.IssueOperator("alice", "", now.Add(-time.Hour), time.Hour)
			return err
		}, `CA "ca" is not valid now`},
		{"zero validity", func() error {
			_, err := ca.IssueOperator("alice", "", now, 0)
			return err
		}, "validity 0s: must be positive"},
		{"control character", func() error {
			_, err := ca.IssueOperator("alice\nbob", "", now, time.Hour)
			return err
		}, "contains a control character"},
		{"bad e-mail", func() error {
			_, err := ca.IssueOperator("alice", "alice", now, time.Hour)
			return err
		}, `e-mail "alice": not an address`},
		{"key of another CA", func() error {
			_, err := LoadCA(caPair.CertPEM, mustKeyPEM(t, other))
			return err
		}, `CA key does not belong to CA certificate "ca"`},
		{"leaf as CA", func() error {
			p, err := ca.IssueOperator("alice", "", now, time.Hour)
			require.NoError(t, err)
			_, err = LoadCA(p.CertPEM, p.KeyPEM)
			return err
		}, `CA certificate "alice": not a CA`},
		{"no PEM", func() error {
			_, err := LoadCA([]byte("garbage"), []byte("garbage"))
			return err
		}, "CA certificate: no PEM CERTIFICATE block"},
	}
	for _, tc := range tcs {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.do()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func mustKeyPEM(t *testing.T, ca *CA) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(ca.Key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

func TestDescribeWarnsOfExpiry(t *testing.T) {
	ca, _ := newCA(t, "ca")
	p, err := ca.IssueReplica(ReplicaRequest{ID: "mgmt1"}, now, 10*24*time.Hour)
	require.NoError(t, err)
	cert := parse(t, p)
	assert.Equal(t, []string{"expires in 9 days (2026-03-11): renew it"}, Describe(cert, now.Add(24*time.Hour)).Warnings)
	assert.Equal(t, []string{"expired on 2026-03-11T12:00:00Z"}, Describe(cert, now.Add(11*24*time.Hour)).Warnings)
	assert.Equal(t, "CA", Describe(ca.Cert, now).Role)
}

// A replica certificate made before replicas were named by URI (CN and DNS
// name equal to the ID, the host's names and address): peers recognise no
// replica in it, `pki show` warns and says how to reissue it, and
// ReplicaFromCert reissues it with the same ID and hosts and the URI.
func TestLegacyReplicaCertificateIsReissued(t *testing.T) {
	ca, _ := newCA(t, "fenced-replica-ca")
	p, err := ca.IssueReplica(ReplicaRequest{ID: "mgmt2", Hosts: []string{"mgmt2.example.net", "10.0.0.12"}}, now, DefaultReplicaValidity)
	require.NoError(t, err)
	issued := parse(t, p)
	legacy := *issued
	legacy.URIs = nil // as issued before
	peers := []transport.Peer{{ID: "mgmt1", Addr: "10.0.0.11:7441"}, {ID: "mgmt2", Addr: "10.0.0.12:7441"}}
	assert.Empty(t, transport.NamedPeers(&legacy, peers), "a common name, DNS name or address is no replica identity")
	assert.Contains(t, transport.RefusalHint(&legacy, peers), "fenced pki replica --from-cert")
	d := Describe(&legacy, now)
	require.Len(t, d.Warnings, 1)
	assert.Contains(t, d.Warnings[0], "names no replica by the URI SAN fenced://replica/<id>")

	req, err := ReplicaFromCert(&legacy)
	require.NoError(t, err)
	assert.Equal(t, ReplicaRequest{ID: "mgmt2", Hosts: []string{"mgmt2.example.net", "10.0.0.12"}}, req)
	again, err := ca.IssueReplica(req, now, DefaultReplicaValidity)
	require.NoError(t, err)
	cert := parse(t, again)
	assert.Equal(t, []string{"mgmt2"}, transport.NamedPeers(cert, peers))
	assert.Equal(t, issued.DNSNames, cert.DNSNames)
	assert.Equal(t, issued.IPAddresses, cert.IPAddresses)
	assert.Empty(t, Describe(cert, now).Warnings)

	// An operator's certificate is not offered as a replica.
	op, err := ca.IssueOperator("alice", "", now, DefaultOperatorValidity)
	require.NoError(t, err)
	assert.Empty(t, Describe(parse(t, op), now).Warnings)
}
