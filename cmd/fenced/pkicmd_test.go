package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runPKI runs the command line in process and returns its exit code and
// outputs.
func runPKI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestPKICommands(t *testing.T) {
	dir := t.TempDir()
	at := func(name string) string { return filepath.Join(dir, name) }
	mustRun := func(args ...string) string {
		t.Helper()
		code, out, errOut := runPKI(t, args...)
		require.Equal(t, 0, code, "fenced %v: %s%s", args, out, errOut)
		return out
	}

	out := mustRun("pki", "ca", "--name", "fenced-replica-ca", "--out", dir)
	assert.Equal(t, "wrote "+at("fenced-replica-ca.crt")+"\nwrote "+at("fenced-replica-ca.key")+"\n", out)
	mustRun("pki", "ca", "--name", "fenced-operator-ca", "--out", dir)

	// From the shipped example configuration: the ID and both advertised
	// hosts.
	mustRun("pki", "replica", "--config", filepath.Join("..", "..", "configs", "production-mgmt1.yaml"),
		"--ca", at("fenced-replica-ca"), "--host", "10.0.0.11", "--out", dir)
	mustRun("pki", "operator", "alice", "--ca-cert", at("fenced-operator-ca.crt"), "--ca-key", at("fenced-operator-ca.key"), "--out", dir)

	for _, key := range []string{"fenced-replica-ca.key", "mgmt1.key", "alice.key"} {
		fi, err := os.Stat(at(key))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), key)
	}
	pair, err := tls.LoadX509KeyPair(at("mgmt1.crt"), at("mgmt1.key"))
	require.NoError(t, err)
	replica, err := x509.ParseCertificate(pair.Certificate[0])
	require.NoError(t, err)
	assert.Equal(t, "mgmt1", replica.Subject.CommonName)
	assert.Equal(t, []string{"mgmt1", "mgmt1.example.net"}, replica.DNSNames)
	require.Len(t, replica.IPAddresses, 1)
	assert.Equal(t, "10.0.0.11", replica.IPAddresses[0].String())
	assert.ElementsMatch(t, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, replica.ExtKeyUsage)
	require.Len(t, replica.URIs, 1)
	assert.Equal(t, "fenced://replica/mgmt1", replica.URIs[0].String(), "peers recognise the replica by this name only")

	// Reissued from the certificate: the same ID, names and addresses.
	require.NoError(t, os.Mkdir(at("again"), 0o700))
	mustRun("pki", "replica", "--from-cert", at("mgmt1.crt"), "--ca", at("fenced-replica-ca"), "--out", at("again"))
	again, err := tls.LoadX509KeyPair(at("again/mgmt1.crt"), at("again/mgmt1.key"))
	require.NoError(t, err)
	reissued, err := x509.ParseCertificate(again.Certificate[0])
	require.NoError(t, err)
	assert.Equal(t, replica.DNSNames, reissued.DNSNames)
	assert.Equal(t, replica.IPAddresses, reissued.IPAddresses)
	assert.Equal(t, replica.URIs, reissued.URIs)

	// show, as JSON.
	out = mustRun("pki", "show", "-o", "json", at("mgmt1.crt"), at("alice.crt"))
	var shown []struct {
		File         string `json:"file"`
		Certificates []struct {
			Subject string   `json:"subject"`
			Issuer  string   `json:"issuer"`
			Usages  []string `json:"extKeyUsages"`
			Role    string   `json:"role"`
		} `json:"certificates"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &shown), out)
	require.Len(t, shown, 2)
	assert.Equal(t, "CN=fenced-replica-ca", shown[0].Certificates[0].Issuer)
	assert.Equal(t, []string{"serverAuth", "clientAuth"}, shown[0].Certificates[0].Usages)
	assert.Equal(t, "CN=alice", shown[1].Certificates[0].Subject)
	assert.Equal(t, "operator (clientAuth only)", shown[1].Certificates[0].Role)

	// Refusals name what is wrong; nothing is overwritten.
	before, err := os.ReadFile(at("mgmt1.key"))
	require.NoError(t, err)
	tcs := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"overwrite", []string{"pki", "replica", "mgmt1", "--ca", at("fenced-replica-ca"), "--out", dir}, exitFailure, at("mgmt1.crt") + " exists: refusing to overwrite it"},
		{"no CA", []string{"pki", "operator", "bob", "--out", dir}, exitFailure, "name the issuing CA"},
		{"leaf as CA", []string{"pki", "operator", "bob", "--ca", at("alice"), "--out", dir}, exitFailure, `CA certificate "alice": not a CA`},
		{"key of the other CA", []string{"pki", "operator", "bob", "--ca-cert", at("fenced-operator-ca.crt"), "--ca-key", at("fenced-replica-ca.key"), "--out", dir}, exitFailure, "CA key does not belong to CA certificate"},
		{"no ID", []string{"pki", "replica", "--ca", at("fenced-replica-ca"), "--out", dir}, exitUsage, "name the replica"},
		{"ID differs from config", []string{"pki", "replica", "mgmt2", "--config", filepath.Join("..", "..", "configs", "production-mgmt1.yaml"), "--ca", at("fenced-replica-ca"), "--out", dir}, exitUsage, `replica ID "mgmt2" differs from replica.id "mgmt1"`},
		{"bad host", []string{"pki", "replica", "mgmt9", "--host", "a_b", "--ca", at("fenced-replica-ca"), "--out", dir}, exitFailure, `host "a_b": not a host name`},
		{"path as name", []string{"pki", "operator", "../x", "--ca", at("fenced-operator-ca"), "--out", dir}, exitUsage, `name "../x": not usable as a file name`},
		{"not PEM", []string{"pki", "show", at("mgmt1.key")}, exitFailure, "no PEM CERTIFICATE block"},
		{"beyond the CA", []string{"pki", "operator", "carol", "--days", "4000", "--ca", at("fenced-operator-ca"), "--out", dir}, exitFailure, "after its CA \"fenced-operator-ca\" expires"},
	}
	for _, tc := range tcs {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := runPKI(t, tc.args...)
			assert.Equal(t, tc.code, code, errOut)
			assert.Contains(t, errOut, tc.want)
		})
	}
	after, err := os.ReadFile(at("mgmt1.key"))
	require.NoError(t, err)
	assert.Equal(t, before, after)
	assert.NoFileExists(t, at("mgmt9.key"))
	assert.NoFileExists(t, at("carol.key"))

	// A certificate inside its last 30 days is shown with a warning and
	// exit 1.
	mustRun("pki", "operator", "dave", "--days", "10", "--ca", at("fenced-operator-ca"), "--out", dir)
	code, out, errOut := runPKI(t, "pki", "show", at("dave.crt"))
	assert.Equal(t, exitFailure, code)
	assert.Contains(t, out, "Warning:     expires in 9 days")
	assert.Contains(t, errOut, "1 warning(s)")
}
