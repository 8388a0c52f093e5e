// Package clustertest holds helpers for tests of fenced's Raft group: a
// throwaway certificate authority and free loopback ports.
package clustertest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// CA is a throwaway certificate authority.
type CA struct {
	Cert    *x509.Certificate
	Key     *ecdsa.PrivateKey
	CertPEM []byte
}

// NewCA creates a CA named name.
func NewCA(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("create CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse CA certificate: %w", err)
	}
	return &CA{Cert: cert, Key: key, CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return n
}

// Leaf is a certificate issued by a CA, with its key, in PEM.
type Leaf struct {
	CertPEM, KeyPEM []byte
}

// Issue creates a replica-style certificate for name valid for both server
// and client authentication: subject common name and DNS name name, the
// URI fenced://replica/<name> (how replicas are named; see
// cluster/transport.ReplicaURI) and the IP addresses ips.
func (ca *CA) Issue(name string, ips ...net.IP) (*Leaf, error) {
	return ca.IssueNames(Names{CommonName: name, DNSNames: []string{name}, IPs: ips,
		URIs: []*url.URL{{Scheme: "fenced", Host: "replica", Path: "/" + name}}})
}

// Names are what IssueNames puts into a certificate.
type Names struct {
	CommonName string
	DNSNames   []string
	IPs        []net.IP
	URIs       []*url.URL
}

// IssueNames creates a certificate valid for both server and client
// authentication that carries exactly n.
func (ca *CA) IssueNames(n Names) (*Leaf, error) {
	name := n.CommonName
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key for %s: %w", name, err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: name},
		DNSNames:     n.DNSNames,
		IPAddresses:  n.IPs,
		URIs:         n.URIs,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return nil, fmt.Errorf("issue certificate for %s: %w", name, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode key for %s: %w", name, err)
	}
	return &Leaf{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// TLSCertificate parses the leaf for crypto/tls.
func (l *Leaf) TLSCertificate() (tls.Certificate, error) {
	return tls.X509KeyPair(l.CertPEM, l.KeyPEM)
}

// Files are the paths of a written certificate, key and CA bundle.
type Files struct {
	CertFile, KeyFile, CAFile string
}

// WriteFiles writes a leaf certificate for name (see Issue; valid for
// 127.0.0.1 and ::1) with its key and the CA's certificate into dir.
func (ca *CA) WriteFiles(dir, name string) (Files, error) {
	return ca.WriteFilesFor(dir, name, net.IPv4(127, 0, 0, 1), net.IPv6loopback)
}

// WriteFilesFor is WriteFiles for the IP addresses ips.
func (ca *CA) WriteFilesFor(dir, name string, ips ...net.IP) (Files, error) {
	leaf, err := ca.Issue(name, ips...)
	if err != nil {
		return Files{}, err
	}
	return ca.WriteLeaf(dir, name, leaf)
}

// WriteLeaf writes leaf as name.crt and name.key, and the CA's certificate
// as name-ca.crt, into dir.
func (ca *CA) WriteLeaf(dir, name string, leaf *Leaf) (Files, error) {
	f := Files{
		CertFile: filepath.Join(dir, name+".crt"),
		KeyFile:  filepath.Join(dir, name+".key"),
		CAFile:   filepath.Join(dir, name+"-ca.crt"),
	}
	for path, data := range map[string][]byte{f.CertFile: leaf.CertPEM, f.KeyFile: leaf.KeyPEM, f.CAFile: ca.CertPEM} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return Files{}, fmt.Errorf("write %s: %w", path, err)
		}
	}
	return f, nil
}

// handedOut holds every port FreePort has returned in this process, so it
// never returns one twice.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago and
// that no earlier call in this process returned, so concurrent tests that
// each ask for ports never get the same one. (The kernel may hand a port
// out again once its listener is closed; this helper does not.)
func FreePort() (int, error) {
	handedOut.Lock()
	defer handedOut.Unlock()
	// Listeners on ports already handed out stay open until a fresh port
	// is found, so the kernel picks a different port on the next try.
	var held []net.Listener
	defer func() {
		for _, ln := range held {
			_ = ln.Close()
		}
	}()
	for range 100 {
		ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("find a free port: %w", err)
		}
		held = append(held, ln)
		p := ln.Addr().(*net.TCPAddr).Port
		if !handedOut.ports[p] {
			handedOut.ports[p] = true
			return p, nil
		}
	}
	return 0, fmt.Errorf("find a free port: 100 ports in a row were already handed out")
}

// FreeAddr returns "127.0.0.1:port" for a free port.
func FreeAddr() (string, error) {
	p, err := FreePort()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("127.0.0.1:%d", p), nil
}
