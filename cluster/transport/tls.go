// Package transport is the mutual-TLS stream layer under fenced's Raft
// transport. Every connection, in and out, is TLS 1.2 or later with a
// certificate from the configured CA on both ends: a replica that cannot
// present one is refused during the handshake, before any Raft message is
// read.
package transport

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"

	"github.com/fenced-project/fenced/internal/boundedfile"
)

// Credentials are a replica's certificate and the CA its peers' certificates
// must chain to.
type Credentials struct {
	cert tls.Certificate
	pool *x509.CertPool
	// serverName, when set, is the name a peer's certificate must hold
	// instead of the host of the address dialed.
	serverName string
}

// LoadCredentials reads a PEM certificate and key and a PEM CA bundle.
// serverName is optional (see Credentials).
func LoadCredentials(certFile, keyFile, caFile, serverName string) (*Credentials, error) {
	certPEM, err := readPEM(certFile)
	if err != nil {
		return nil, fmt.Errorf("certificate: %w", err)
	}
	keyPEM, err := readPEM(keyFile)
	if err != nil {
		return nil, fmt.Errorf("key: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("load certificate %s and key %s: %w", certFile, keyFile, err)
	}
	caPEM, err := readPEM(caFile)
	if err != nil {
		return nil, fmt.Errorf("CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("CA file %s holds no PEM certificate", caFile)
	}
	return NewCredentials(cert, pool, serverName), nil
}

// MaxPEMBytes bounds a certificate, key or CA file this package reads.
const MaxPEMBytes = 4 << 20

// readPEM reads a PEM file of at most MaxPEMBytes; a larger one (or
// /dev/zero) is refused with an error naming the file and the bound.
func readPEM(path string) ([]byte, error) { return boundedfile.Read(path, MaxPEMBytes) }

// NewCredentials builds credentials from parsed values.
func NewCredentials(cert tls.Certificate, pool *x509.CertPool, serverName string) *Credentials {
	return &Credentials{cert: cert, pool: pool, serverName: serverName}
}

// ServerConfig is the TLS configuration for accepted connections: a client
// certificate from the CA is required.
func (c *Credentials) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{c.cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    c.pool,
	}
}

// ClientConfig is the TLS configuration for dialing host: this replica's
// certificate is presented and the peer's must chain to the CA and name host
// (or the configured server name).
func (c *Credentials) ClientConfig(host string) *tls.Config {
	name := host
	if c.serverName != "" {
		name = c.serverName
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{c.cert},
		RootCAs:      c.pool,
		ServerName:   name,
	}
}
