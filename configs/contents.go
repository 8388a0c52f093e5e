package configs

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/fenced-project/fenced/cluster/transport"
)

// MinTokenLength is the shortest API token (http.tokenFile) the API
// accepts.
const MinTokenLength = 16

// ExpiryWarning is how long before a certificate expires validation
// starts to warn about it.
const ExpiryWarning = 30 * 24 * time.Hour

// contents reads every file the configuration names and checks what is in
// it the way the runtime uses it: certificates and keys load as pairs, are
// valid now and carry the names and extended key usages their peers check;
// CA bundles hold certificates; secrets, the API token and CHAP secrets
// parse; kubeconfigs load and name a server (with a kubeconfig checker).
// Files that are missing, or
// credential references without a credentials directory, were reported by
// files and are skipped.
func (c *checker) contents(cfg *Config, credDir string, now time.Time, checkKubeconfig func(path string) (string, error)) {
	if now.IsZero() {
		now = time.Now()
	}
	r := &reader{c: c, credDir: credDir}
	c.raftTLS(cfg, r, now)
	c.httpTLS(cfg, r, now)
	if tok, ok := r.secret("http.tokenFile", cfg.HTTP.TokenFile); ok && len(tok) < MinTokenLength {
		c.add("http.tokenFile", "the token is %d characters long: the API needs at least %d (e.g. openssl rand -hex 32)", len(tok), MinTokenLength)
	}
	for i, cl := range cfg.Clusters {
		c.kubeconfig(fmt.Sprintf("clusters[%d].kubeconfig", i), cl.Kubeconfig, r, checkKubeconfig)
	}
	for i, a := range cfg.Arrays {
		base := fmt.Sprintf("arrays[%d]", i)
		r.secret(base+".passwordFile", a.PasswordFile)
		r.pool(base+".caFile", a.CAFile)
		if p, ok := r.path(base+".powerstore.chapSecretsFile", a.PowerStore.ChapSecretsFile); ok {
			if _, err := readChapSecrets(p, ""); err != nil {
				c.add(base+".powerstore.chapSecretsFile", "%v", err)
			}
		}
	}
}

// reader resolves and reads referenced files for contents, skipping the
// ones files already reported.
type reader struct {
	c       *checker
	credDir string
}

// path resolves ref, or reports false when it is empty, cannot be
// resolved or already has a problem.
func (r *reader) path(field, ref string) (string, bool) {
	if ref == "" || r.c.has(field) {
		return "", false
	}
	if IsCredential(ref) && r.credDir == "" {
		return "", false
	}
	p, err := ResolveFile(ref, r.credDir)
	if err != nil || checkFile(p) != nil {
		return "", false
	}
	return p, true
}

// read returns the content of the file field names.
func (r *reader) read(field, ref string, limit int64) ([]byte, bool) {
	p, ok := r.path(field, ref)
	if !ok {
		return nil, false
	}
	b, err := ReadFileLimited(p, limit)
	if err != nil {
		r.c.add(field, "%v", err)
		return nil, false
	}
	return b, true
}

// secret reads a one-line secret as the runtime does.
func (r *reader) secret(field, ref string) (string, bool) {
	p, ok := r.path(field, ref)
	if !ok {
		return "", false
	}
	s, err := ReadSecretFile(p)
	if err != nil {
		r.c.add(field, "%v", err)
		return "", false
	}
	return s, true
}

// pool reads a PEM CA bundle.
func (r *reader) pool(field, ref string) (*x509.CertPool, bool) {
	b, ok := r.read(field, ref, MaxPEMBytes)
	if !ok {
		return nil, false
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		r.c.add(field, "holds no PEM certificate")
		return nil, false
	}
	return pool, true
}

// pair loads a certificate and its key as tls.LoadX509KeyPair does and
// returns the leaf certificate and the chain's intermediates.
func (r *reader) pair(certField, certRef, keyField, keyRef string) (*x509.Certificate, *x509.CertPool, bool) {
	certPEM, ok1 := r.read(certField, certRef, MaxPEMBytes)
	keyPEM, ok2 := r.read(keyField, keyRef, MaxPEMBytes)
	if !ok1 || !ok2 {
		return nil, nil, false
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		r.c.add(certField, "certificate and %s do not load as a pair: %v", keyField, err)
		return nil, nil, false
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		r.c.add(certField, "cannot parse the certificate: %v", err)
		return nil, nil, false
	}
	inter := x509.NewCertPool()
	for _, der := range pair.Certificate[1:] {
		if ic, err := x509.ParseCertificate(der); err == nil {
			inter.AddCert(ic)
		}
	}
	return leaf, inter, true
}

// validity reports a certificate that is not valid at now, and warns when
// it expires within ExpiryWarning. It reports whether it is valid.
func (c *checker) validity(field string, cert *x509.Certificate, now time.Time) bool {
	switch {
	case now.After(cert.NotAfter):
		c.add(field, "the certificate expired on %s", cert.NotAfter.UTC().Format(time.RFC3339))
		return false
	case now.Before(cert.NotBefore):
		c.add(field, "the certificate is not valid before %s", cert.NotBefore.UTC().Format(time.RFC3339))
		return false
	case cert.NotAfter.Sub(now) < ExpiryWarning:
		c.warn(field, "the certificate expires on %s, in %d days: renew it", cert.NotAfter.UTC().Format(time.RFC3339),
			int(cert.NotAfter.Sub(now).Hours()/24))
	}
	return true
}

// hasUsage reports whether cert may be used for u: no extended key usage
// at all allows every use, as Go's verifier does.
func hasUsage(cert *x509.Certificate, u x509.ExtKeyUsage) bool {
	return len(cert.ExtKeyUsage) == 0 || slices.Contains(cert.ExtKeyUsage, u) || slices.Contains(cert.ExtKeyUsage, x509.ExtKeyUsageAny)
}

// raftTLS checks the Raft certificate: every replica's certificate is the
// server and the client of mutual TLS, chains to replica.tls.caFile, names
// the host peers dial (raftAdvertiseAddress) and names this replica
// (cluster/transport's NamedPeers, which both ends of a connection check).
func (c *checker) raftTLS(cfg *Config, r *reader, now time.Time) {
	t := cfg.Replica.TLS
	const certField = "replica.tls.certFile"
	pool, poolOK := r.pool("replica.tls.caFile", t.CAFile)
	leaf, inter, ok := r.pair(certField, t.CertFile, "replica.tls.keyFile", t.KeyFile)
	if !ok {
		return
	}
	valid := c.validity(certField, leaf, now)
	var missing []string
	for _, u := range []struct {
		u    x509.ExtKeyUsage
		name string
	}{{x509.ExtKeyUsageServerAuth, "serverAuth"}, {x509.ExtKeyUsageClientAuth, "clientAuth"}} {
		if !hasUsage(leaf, u.u) {
			missing = append(missing, u.name)
		}
	}
	if len(missing) > 0 {
		c.add(certField, "the certificate lacks the %s extended key usage: a replica's certificate is the server and the client of every Raft connection and needs serverAuth and clientAuth", strings.Join(missing, " and "))
	}
	if valid && poolOK {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
			c.add(certField, "the certificate does not chain to replica.tls.caFile, which peers verify it with: %v", err)
		}
	}
	if host := addrHost(cfg.Replica.RaftAdvertiseAddress); host != "" {
		if err := leaf.VerifyHostname(host); err != nil {
			c.add(certField, "the certificate does not name %q, the host of replica.raftAdvertiseAddress that peers dial and check: add it as a DNS or IP subject alternative name", host)
		}
	}
	peers := []transport.Peer{{ID: cfg.Replica.ID, Addr: cfg.Replica.RaftAdvertiseAddress}}
	for _, p := range cfg.Peers {
		peers = append(peers, transport.Peer{ID: p.ID, Addr: p.RaftAddress})
	}
	if !slices.Contains(transport.NamedPeers(leaf, peers), cfg.Replica.ID) {
		c.add(certField, "the certificate does not name replica %q by the URI SAN %s: peers refuse it (a common name, DNS name or address is no replica identity); issue it with `fenced pki replica --config`, or reissue it with `fenced pki replica --from-cert`",
			cfg.Replica.ID, transport.ReplicaURI(cfg.Replica.ID))
	}
}

// httpTLS checks the HTTP endpoint's certificate: it serves TLS, names the
// host clients reach it at, and, when there are peers, verifies with the
// CAs peers forward calls with (the system roots, replica.tls.caFile and
// http.tls.clientCAFile).
func (c *checker) httpTLS(cfg *Config, r *reader, now time.Time) {
	t := cfg.HTTP.TLS
	const certField = "http.tls.certFile"
	_, clientOK := r.pool("http.tls.clientCAFile", t.ClientCAFile)
	r.pool("http.tls.operatorCAFile", t.OperatorCAFile)
	leaf, inter, ok := r.pair(certField, t.CertFile, "http.tls.keyFile", t.KeyFile)
	if !ok {
		return
	}
	valid := c.validity(certField, leaf, now)
	if !hasUsage(leaf, x509.ExtKeyUsageServerAuth) {
		c.add(certField, "the certificate lacks the serverAuth extended key usage an HTTPS endpoint needs")
	}
	host, field := "", ""
	if u, err := url.Parse(cfg.HTTP.AdvertiseURL); err == nil && cfg.HTTP.AdvertiseURL != "" {
		host, field = strings.ToLower(u.Hostname()), "http.advertiseURL"
	} else if !unspecifiedHost(cfg.HTTP.Listen) {
		host, field = addrHost(cfg.HTTP.Listen), "http.listen"
	}
	if host != "" {
		if err := leaf.VerifyHostname(host); err != nil {
			c.add(certField, "the certificate does not name %q, the host of %s that clients and peers check: add it as a DNS or IP subject alternative name", host, field)
		}
	}
	if len(cfg.Peers) == 0 || !valid || c.has("replica.tls.caFile") || (t.ClientCAFile != "" && !clientOK) {
		return
	}
	roots, err := x509.SystemCertPool()
	if err != nil || roots == nil {
		roots = x509.NewCertPool()
	}
	if b, ok := r.read("replica.tls.caFile", cfg.Replica.TLS.CAFile, MaxPEMBytes); ok {
		roots.AppendCertsFromPEM(b)
	}
	if b, ok := r.read("http.tls.clientCAFile", t.ClientCAFile, MaxPEMBytes); ok {
		roots.AppendCertsFromPEM(b)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		c.add(certField, "peers cannot verify the certificate with the CAs they forward calls with (system roots, replica.tls.caFile, http.tls.clientCAFile): %v", err)
	}
}

// kubeconfig reads a kubeconfig (size-limited) and, with a checker from
// Options.CheckKubeconfig, loads it the way the runtime does.
func (c *checker) kubeconfig(field, ref string, r *reader, check func(path string) (string, error)) {
	p, ok := r.path(field, ref)
	if !ok {
		return
	}
	if _, err := ReadFileLimited(p, MaxAuxBytes); err != nil {
		c.add(field, "%v", err)
		return
	}
	if check == nil {
		return
	}
	if _, err := check(p); err != nil {
		c.add(field, "%v", err)
	}
}

// has reports whether a problem was already reported for field.
func (c *checker) has(field string) bool {
	return slices.ContainsFunc(c.probs, func(p Problem) bool { return p.Path == field })
}

// warn records a warning: something that works today but needs attention.
func (c *checker) warn(path, format string, args ...any) {
	c.warns = append(c.warns, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
}

// addrHost is the lower-cased host of a host:port; empty for an address
// on all interfaces.
func addrHost(addr string) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || unspecifiedHost(addr) {
		return ""
	}
	return strings.ToLower(host)
}
