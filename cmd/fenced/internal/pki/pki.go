// Package pki makes the certificates a fenced group needs: a certificate
// authority, replica certificates (server and client authentication, naming
// the replica by its ID and its host names and addresses) and operator
// certificates (client authentication, naming a person). It also describes
// certificates for `fenced pki show`.
//
// Keys are ECDSA P-256. Everything is PEM; keys are written in PKCS #8.
package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/fenced-project/fenced/cluster/transport"
)

// Default lifetimes.
const (
	// DefaultCAValidity is how long a CA made by NewCA is valid: ten years.
	DefaultCAValidity = 10 * 365 * 24 * time.Hour
	// DefaultReplicaValidity is how long a replica certificate is valid.
	DefaultReplicaValidity = 365 * 24 * time.Hour
	// DefaultOperatorValidity is how long an operator certificate is
	// valid: short, because without `http.tls.operators` a certificate
	// stays good until it expires.
	DefaultOperatorValidity = 90 * 24 * time.Hour
)

// backdate is how far before "now" a certificate's validity starts, so a
// host whose clock is a little behind accepts it at once.
const backdate = 5 * time.Minute

// CA is a certificate authority with its private key.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

// Pair is a certificate and its private key, in PEM.
type Pair struct {
	CertPEM []byte
	KeyPEM  []byte
}

// NewCA makes a self-signed CA named name, valid from now for validity.
func NewCA(name string, now time.Time, validity time.Duration) (Pair, error) {
	if err := checkName("CA name", name); err != nil {
		return Pair{}, err
	}
	if validity <= 0 {
		return Pair{}, fmt.Errorf("CA validity %s: must be positive", validity)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, fmt.Errorf("generate key of CA %s: %w", name, err)
	}
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(validity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	return sign(tmpl, tmpl, key, key, "CA "+name)
}

// ReplicaRequest is what a replica certificate names.
type ReplicaRequest struct {
	// ID is the replica's replica.id; it becomes the URI SAN
	// fenced://replica/<id>, the only name peers recognise the replica by,
	// and the subject common name and a DNS name (which releases before
	// the URI recognised it by, so a reissued certificate serves both
	// during an upgrade).
	ID string
	// Hosts are the replica's host names and IP addresses: the hosts of
	// its raftAdvertiseAddress and http.advertiseURL, and any other name
	// operators and peers reach it by.
	Hosts []string
}

// IssueReplica issues a replica certificate from ca: server and client
// authentication, the URI SAN fenced://replica/<id>, subject CN and a DNS
// name equal to the replica ID, the hosts as DNS or IP SANs.
func (ca *CA) IssueReplica(req ReplicaRequest, now time.Time, validity time.Duration) (Pair, error) {
	if err := checkName("replica ID", req.ID); err != nil {
		return Pair{}, err
	}
	dns := []string{req.ID}
	var ips []net.IP
	for _, h := range req.Hosts {
		h = strings.Trim(strings.TrimSpace(h), "[]")
		if h == "" {
			continue
		}
		if ip := net.ParseIP(h); ip != nil {
			ips = appendIP(ips, ip)
			continue
		}
		if err := checkDNSName(h); err != nil {
			return Pair{}, fmt.Errorf("replica %s: host %q: %w", req.ID, h, err)
		}
		dns = appendName(dns, strings.ToLower(h))
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: req.ID},
		DNSNames:    dns,
		IPAddresses: ips,
		URIs:        []*url.URL{transport.ReplicaURI(req.ID)},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	return ca.issue(tmpl, now, validity, "replica "+req.ID)
}

// IssueOperator issues an operator's certificate from ca: client
// authentication only, subject CN name (what `http.tls.operators` lists and
// the ledger records), and the e-mail address when one is given.
func (ca *CA) IssueOperator(name, email string, now time.Time, validity time.Duration) (Pair, error) {
	if err := checkName("operator name", name); err != nil {
		return Pair{}, err
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: name},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if email != "" {
		if !strings.Contains(email, "@") || strings.ContainsAny(email, " \t\r\n") {
			return Pair{}, fmt.Errorf("operator %s: e-mail %q: not an address", name, email)
		}
		tmpl.EmailAddresses = []string{email}
	}
	return ca.issue(tmpl, now, validity, "operator "+name)
}

func (ca *CA) issue(tmpl *x509.Certificate, now time.Time, validity time.Duration, what string) (Pair, error) {
	if validity <= 0 {
		return Pair{}, fmt.Errorf("%s: validity %s: must be positive", what, validity)
	}
	tmpl.NotBefore = now.Add(-backdate)
	tmpl.NotAfter = now.Add(validity)
	if tmpl.NotAfter.After(ca.Cert.NotAfter) {
		return Pair{}, fmt.Errorf("%s: would be valid until %s, after its CA %q expires (%s): shorten the validity or renew the CA",
			what, tmpl.NotAfter.UTC().Format(time.DateOnly), ca.Cert.Subject.CommonName, ca.Cert.NotAfter.UTC().Format(time.DateOnly))
	}
	if now.Before(ca.Cert.NotBefore) || now.After(ca.Cert.NotAfter) {
		return Pair{}, fmt.Errorf("%s: CA %q is not valid now (valid %s to %s)", what, ca.Cert.Subject.CommonName,
			ca.Cert.NotBefore.UTC().Format(time.RFC3339), ca.Cert.NotAfter.UTC().Format(time.RFC3339))
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, fmt.Errorf("generate key of %s: %w", what, err)
	}
	return sign(tmpl, ca.Cert, key, ca.Key, what)
}

// sign creates the certificate tmpl for key's public half, signed by parent
// with signer, and returns it and key in PEM.
func sign(tmpl, parent *x509.Certificate, key *ecdsa.PrivateKey, signer crypto.Signer, what string) (Pair, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return Pair{}, fmt.Errorf("serial number of %s: %w", what, err)
	}
	tmpl.SerialNumber = serial
	spki, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return Pair{}, fmt.Errorf("public key of %s: %w", what, err)
	}
	id := sha256.Sum256(spki)
	tmpl.SubjectKeyId = id[:20]
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		return Pair{}, fmt.Errorf("sign certificate of %s: %w", what, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return Pair{}, fmt.Errorf("encode key of %s: %w", what, err)
	}
	return Pair{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// LoadCA parses a CA certificate and its key (PEM) and checks that they
// belong together and that the certificate may sign certificates.
func LoadCA(certPEM, keyPEM []byte) (*CA, error) {
	certs, err := ParseCertificates(certPEM)
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	cert := certs[0]
	if !cert.IsCA || cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, fmt.Errorf("CA certificate %q: not a CA (basic constraints or key usage do not allow signing certificates)", cert.Subject.CommonName)
	}
	key, err := parseKey(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("CA key: %w", err)
	}
	if !publicKeysEqual(cert.PublicKey, key.Public()) {
		return nil, fmt.Errorf("CA key does not belong to CA certificate %q", cert.Subject.CommonName)
	}
	return &CA{Cert: cert, Key: key}, nil
}

// ParseCertificates parses every CERTIFICATE block of a PEM file, and fails
// when there is none or one does not parse.
func ParseCertificates(data []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	rest := data
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d: %w", len(certs)+1, err)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, errors.New("no PEM CERTIFICATE block")
	}
	return certs, nil
}

func parseKey(data []byte) (crypto.Signer, error) {
	rest := data
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			return nil, errors.New("no PEM private key block")
		}
		var k any
		var err error
		switch b.Type {
		case "PRIVATE KEY":
			k, err = x509.ParsePKCS8PrivateKey(b.Bytes)
		case "EC PRIVATE KEY":
			k, err = x509.ParseECPrivateKey(b.Bytes)
		case "RSA PRIVATE KEY":
			k, err = x509.ParsePKCS1PrivateKey(b.Bytes)
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", b.Type, err)
		}
		s, ok := k.(crypto.Signer)
		if !ok {
			return nil, fmt.Errorf("%s: %T cannot sign", b.Type, k)
		}
		return s, nil
	}
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	e, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && e.Equal(b)
}

// ReplicaFromCert reads what a replica certificate issued earlier names, to
// reissue it: the replica ID (from its URI SAN fenced://replica/<id>, else
// its subject common name, as certificates made before the URI carried
// it) and its other DNS names and IP addresses as hosts.
func ReplicaFromCert(cert *x509.Certificate) (ReplicaRequest, error) {
	req := ReplicaRequest{ID: cert.Subject.CommonName}
	if ids := transport.NamedIDs(cert); len(ids) == 1 {
		req.ID = ids[0]
	} else if len(ids) > 1 {
		return ReplicaRequest{}, fmt.Errorf("the certificate names %d replicas (%s): reissue each with its own ID", len(ids), strings.Join(ids, ", "))
	}
	if req.ID == "" {
		return ReplicaRequest{}, errors.New("the certificate names no replica: neither a URI SAN fenced://replica/<id> nor a subject common name")
	}
	for _, d := range cert.DNSNames {
		if !strings.EqualFold(d, req.ID) {
			req.Hosts = append(req.Hosts, d)
		}
	}
	for _, ip := range cert.IPAddresses {
		req.Hosts = append(req.Hosts, ip.String())
	}
	return req, nil
}

// checkName refuses names that cannot be a certificate's common name.
func checkName(what, s string) error {
	if s == "" {
		return fmt.Errorf("%s is empty", what)
	}
	if len(s) > 64 {
		return fmt.Errorf("%s %q: longer than 64 characters", what, s[:64]+"…")
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("%s %q: contains a control character", what, s)
		}
	}
	return nil
}

// checkDNSName accepts host names made of RFC 1123 labels.
func checkDNSName(h string) error {
	if len(h) > 253 {
		return errors.New("longer than 253 characters")
	}
	for _, l := range strings.Split(strings.TrimSuffix(h, "."), ".") {
		if l == "" || len(l) > 63 {
			return errors.New("not a host name: empty label or one longer than 63 characters")
		}
		for i, r := range l {
			ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' && i > 0 && i < len(l)-1
			if !ok {
				return fmt.Errorf("not a host name: %q in label %q", r, l)
			}
		}
	}
	return nil
}

func appendName(names []string, n string) []string {
	for _, have := range names {
		if strings.EqualFold(have, n) {
			return names
		}
	}
	return append(names, n)
}

func appendIP(ips []net.IP, ip net.IP) []net.IP {
	for _, have := range ips {
		if have.Equal(ip) {
			return ips
		}
	}
	return append(ips, ip)
}
