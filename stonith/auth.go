package stonith

import (
	"crypto/subtle"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/fenced-project/fenced/cluster/transport"
	"github.com/fenced-project/fenced/configs"
)

// OperatorHeader optionally names the person behind a token; it is
// recorded as claimed ("token/alice"), never trusted for authorization.
const OperatorHeader = "X-Fenced-Operator"

// CallerHeader carries the caller a replica authenticated when it forwards
// a call to the leader ("cert:alice", "token/alice", "replica:mgmt2"). It
// is believed only on a request that presents a replica certificate; from
// anyone else it is ignored, and the receiving replica replaces it.
const CallerHeader = "X-Fenced-Caller"

// maxCallerName bounds a caller name taken from a header.
const maxCallerName = 128

// Role is what a caller may do.
type Role int

// Roles.
const (
	// RoleNone is no authenticated caller.
	RoleNone Role = iota
	// RoleOperator may fence, unfence, pause and resume.
	RoleOperator
	// RoleReplica is another replica of the group: it may report its
	// probes and forward the calls of the callers it authenticated.
	RoleReplica
)

// Caller is an authenticated caller.
type Caller struct {
	// Name is what the ledger and the logs record: "cert:<subject>",
	// "token", "token/<claimed>" or "replica:<id>".
	Name string
	Role Role
	// Replica is the replica ID when Role is RoleReplica.
	Replica string
	// Via is the replica that forwarded the call, when it was forwarded.
	Via string
}

// Identities says which client certificates are operators and which are
// replicas.
type Identities struct {
	// Operators lists the operator names allowed: a certificate's subject
	// common name, or one of its DNS or e-mail names. Empty means any
	// certificate from OperatorCAs.
	Operators []string
	// OperatorCAs, when set, is the CA operator certificates must chain to.
	// With neither Operators nor OperatorCAs no certificate is an operator.
	OperatorCAs *x509.CertPool
	// ReplicaCAs is the CA of the replicas' Raft certificates
	// (replica.tls.caFile). A certificate that chains to it and names a
	// configured peer (transport.NamedPeers) is that replica, and never an
	// operator.
	ReplicaCAs *x509.CertPool
	// Peers returns the configured replicas.
	Peers func() []transport.Peer
}

// ErrNotOperator is returned (wrapped) for a caller with a verified
// certificate that is no operator, or a replica calling an operator route.
var ErrNotOperator = errors.New("not an operator")

// errNoCredentials is returned when the request carries none.
var errNoCredentials = errors.New("present the API token or a client certificate")

// Authenticator decides who calls a mutating endpoint: a client
// certificate verified by the TLS layer and judged by Identities, or the
// bearer token from the token file, compared in constant time. A token is
// accepted over HTTPS, or over plain HTTP from a loopback client only (it
// would otherwise cross the network in clear).
type Authenticator struct {
	token []byte
	ids   Identities
}

// NewAuthenticator reads the token file (see configs.ReadSecretFile). An
// empty path accepts client certificates only. Without WithIdentities no
// client certificate is accepted.
func NewAuthenticator(tokenFile string) (*Authenticator, error) {
	a := &Authenticator{}
	if tokenFile == "" {
		return a, nil
	}
	tok, err := configs.ReadSecretFile(tokenFile)
	if err != nil {
		return nil, fmt.Errorf("api token file: %w", err)
	}
	if len(tok) < configs.MinTokenLength {
		return nil, fmt.Errorf("api token file: the token must be at least %d characters", configs.MinTokenLength)
	}
	a.token = []byte(tok)
	return a, nil
}

// WithIdentities returns a copy of a that judges client certificates by ids.
func (a *Authenticator) WithIdentities(ids Identities) *Authenticator {
	b := *a
	b.ids = ids
	return &b
}

// Authenticate returns the caller's name, or false.
func (a *Authenticator) Authenticate(r *http.Request) (string, bool) {
	c, err := a.Identify(r)
	if err != nil {
		return "", false
	}
	return c.Name, true
}

// Identify returns the caller, or an error saying why there is none:
// ErrNotOperator (wrapped) for a certificate that is neither an operator
// nor a replica, another error for missing or wrong credentials.
func (a *Authenticator) Identify(r *http.Request) (Caller, error) {
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.PeerCertificates) > 0 {
		cert := r.TLS.PeerCertificates[0]
		if id, ok := a.replica(cert, r.TLS.PeerCertificates[1:]); ok {
			fwd := r.Header.Get(CallerHeader)
			if fwd == "" {
				return Caller{Name: "replica:" + id, Role: RoleReplica, Replica: id}, nil
			}
			c, err := parseCaller(fwd)
			if err != nil {
				return Caller{}, fmt.Errorf("call forwarded by replica %s: %w", id, err)
			}
			c.Via = id
			return c, nil
		}
		name := certName(cert)
		if a.operator(cert, r.TLS.PeerCertificates[1:]) {
			return Caller{Name: "cert:" + name, Role: RoleOperator}, nil
		}
		return Caller{}, fmt.Errorf("client certificate %q is neither a listed operator nor a replica of this group: %w", name, ErrNotOperator)
	}
	if len(a.token) == 0 {
		return Caller{}, errNoCredentials
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || subtle.ConstantTimeCompare([]byte(got), a.token) != 1 {
		return Caller{}, errNoCredentials
	}
	if r.TLS == nil && !loopback(r.RemoteAddr) {
		return Caller{}, errors.New("the API token is accepted over HTTPS, or over plain HTTP from loopback only")
	}
	claimed := strings.TrimSpace(r.Header.Get(OperatorHeader))
	if len(claimed) > 64 || strings.ContainsFunc(claimed, notPrintable) {
		claimed = ""
	}
	if claimed != "" {
		return Caller{Name: "token/" + claimed, Role: RoleOperator}, nil
	}
	return Caller{Name: "token", Role: RoleOperator}, nil
}

// RequireOperator wraps a handler: the caller must be an operator (in
// person, or forwarded by a replica). The request then carries the caller
// in CallerHeader, so that forwarding it to the leader keeps the person.
func (a *Authenticator) RequireOperator(h http.Handler) http.Handler {
	return a.require(RoleOperator, h)
}

// RequireReplica wraps a handler: the caller must be a replica of the
// group (in person, or forwarded by another replica).
func (a *Authenticator) RequireReplica(h http.Handler) http.Handler {
	return a.require(RoleReplica, h)
}

func (a *Authenticator) require(role Role, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := a.Identify(r)
		if err == nil && c.Role != role {
			what := "an operator"
			if role == RoleReplica {
				what = "a replica of this group"
			}
			err = fmt.Errorf("%s may not call %s: it needs %s: %w", c.Name, r.URL.Path, what, ErrNotOperator)
		}
		if err != nil {
			code := http.StatusUnauthorized
			if errors.Is(err, ErrNotOperator) {
				code = http.StatusForbidden
			} else {
				w.Header().Set("WWW-Authenticate", `Bearer realm="fenced"`)
			}
			writeJSON(w, code, errorBody{Error: "unauthorized: " + err.Error()})
			return
		}
		r.Header.Set(CallerHeader, c.Name)
		h.ServeHTTP(w, r)
	})
}

// CallerOf is the caller a handler behind RequireOperator or
// RequireReplica was called by (as the header it set says).
func CallerOf(r *http.Request) (Caller, bool) {
	c, err := parseCaller(r.Header.Get(CallerHeader))
	return c, err == nil
}

func parseCaller(s string) (Caller, error) {
	if s == "" || len(s) > maxCallerName || strings.ContainsFunc(s, notPrintable) {
		return Caller{}, fmt.Errorf("%s %q: not a caller name", CallerHeader, truncateName(s))
	}
	if id, ok := strings.CutPrefix(s, "replica:"); ok && id != "" {
		return Caller{Name: s, Role: RoleReplica, Replica: id}, nil
	}
	if strings.HasPrefix(s, "cert:") || s == "token" || strings.HasPrefix(s, "token/") {
		return Caller{Name: s, Role: RoleOperator}, nil
	}
	return Caller{}, fmt.Errorf("%s %q: not a caller name", CallerHeader, truncateName(s))
}

func truncateName(s string) string {
	if len(s) > 32 {
		return s[:32] + "…"
	}
	return s
}

func notPrintable(r rune) bool { return r < 0x20 || r == 0x7f }

// replica returns the replica ID cert names, when it chains to the
// replicas' CA and names a configured peer.
func (a *Authenticator) replica(cert *x509.Certificate, intermediates []*x509.Certificate) (string, bool) {
	if a.ids.ReplicaCAs == nil || a.ids.Peers == nil || !chains(cert, intermediates, a.ids.ReplicaCAs) {
		return "", false
	}
	ids := transport.NamedPeers(cert, a.ids.Peers())
	if len(ids) == 0 {
		return "", false
	}
	return ids[0], true
}

// operator reports whether cert is an operator's.
func (a *Authenticator) operator(cert *x509.Certificate, intermediates []*x509.Certificate) bool {
	if a.ids.OperatorCAs == nil && len(a.ids.Operators) == 0 {
		return false
	}
	if a.ids.OperatorCAs != nil && !chains(cert, intermediates, a.ids.OperatorCAs) {
		return false
	}
	if len(a.ids.Operators) == 0 {
		return true
	}
	names := append([]string{cert.Subject.CommonName}, cert.DNSNames...)
	names = append(names, cert.EmailAddresses...)
	for _, allowed := range a.ids.Operators {
		for _, n := range names {
			if n != "" && n == allowed {
				return true
			}
		}
	}
	return false
}

func chains(cert *x509.Certificate, intermediates []*x509.Certificate, roots *x509.CertPool) bool {
	inter := x509.NewCertPool()
	for _, c := range intermediates {
		inter.AddCert(c)
	}
	_, err := cert.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	return err == nil
}

func certName(cert *x509.Certificate) string {
	if cert.Subject.CommonName != "" {
		return cert.Subject.CommonName
	}
	return cert.Subject.String()
}

func loopback(remote string) bool {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
