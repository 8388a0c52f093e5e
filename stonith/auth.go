package stonith

import (
	"context"
	"crypto/subtle"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"

	"github.com/fenced-project/fenced/cluster/transport"
	"github.com/fenced-project/fenced/configs"
)

// OperatorHeader optionally names the person behind a token; it is
// recorded as claimed ("token/alice"), never trusted for authorization.
const OperatorHeader = "X-Fenced-Operator"

// CallerHeader is the header replicas of earlier versions named a
// forwarded call's caller in. It is never believed: a caller is proven by
// its own API token or client certificate, and a replica by its TLS client
// certificate. A replica's certificate presenting one that is not the
// caller its proof shows is logged at WARN (a replica of an earlier
// version carrying a certificate operator's call, or a forgery). A
// follower still sets it to the caller the token proves on the token calls
// it forwards, for leaders of earlier versions.
const CallerHeader = "X-Fenced-Caller"

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
	// Replica is the replica ID when Role is RoleReplica, taken from the
	// TLS client certificate only.
	Replica string
	// Via is the replica that carried an operator's call (a follower
	// forwarding it to the leader): the replica the TLS client certificate
	// names, when the call also carries the operator's own API token.
	Via string
	// Certificate says the operator was proven by a client certificate
	// (not the token). Such a call cannot be carried by another replica:
	// a follower redirects it to the leader.
	Certificate bool
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
	log   *slog.Logger
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

// WithLogger returns a copy of a that logs to log (the refused or ignored
// caller headers).
func (a *Authenticator) WithLogger(log *slog.Logger) *Authenticator {
	b := *a
	b.log = log
	return &b
}

func (a *Authenticator) logger() *slog.Logger {
	if a.log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return a.log
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
//
// A caller is what it proves, never what a header says. A replica's
// certificate is that replica (RoleReplica). With the API token as well it
// is the operator the token proves, carried by that replica (Via): a
// follower forwarding an operator's call to the leader. A replica's
// certificate alone is never an operator.
func (a *Authenticator) Identify(r *http.Request) (Caller, error) {
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.PeerCertificates) > 0 {
		cert := r.TLS.PeerCertificates[0]
		if id, ok := a.replica(cert, r.TLS.PeerCertificates[1:]); ok {
			if r.Header.Get("Authorization") == "" {
				return Caller{Name: "replica:" + id, Role: RoleReplica, Replica: id}, nil
			}
			c, err := a.tokenCaller(r)
			if err != nil {
				return Caller{}, fmt.Errorf("call carried by replica %s: %w", id, err)
			}
			c.Via = id
			return c, nil
		}
		name := certName(cert)
		if a.operator(cert, r.TLS.PeerCertificates[1:]) {
			return Caller{Name: "cert:" + name, Role: RoleOperator, Certificate: true}, nil
		}
		return Caller{}, fmt.Errorf("client certificate %q is neither a listed operator nor a replica of this group: %w", name, ErrNotOperator)
	}
	return a.tokenCaller(r)
}

// tokenCaller is the operator the request's bearer token proves.
func (a *Authenticator) tokenCaller(r *http.Request) (Caller, error) {
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

// peerReplica is the replica the request's TLS client certificate names.
func (a *Authenticator) peerReplica(r *http.Request) (string, bool) {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.PeerCertificates) == 0 {
		return "", false
	}
	return a.replica(r.TLS.PeerCertificates[0], r.TLS.PeerCertificates[1:])
}

// RequireOperator wraps a handler: the caller must be an operator, in
// person or carried by a replica with the operator's own token. The
// handler finds the caller with CallerOf.
func (a *Authenticator) RequireOperator(h http.Handler) http.Handler {
	return a.require(RoleOperator, h)
}

// RequireReplica wraps a handler: the caller must be a replica of the
// group, as its own TLS client certificate names it.
func (a *Authenticator) RequireReplica(h http.Handler) http.Handler {
	return a.require(RoleReplica, h)
}

// headerRefused is the hint given when a replica's certificate came with
// a caller header.
const headerRefused = "; its " + CallerHeader + " header is not believed: a replica's certificate is never an operator's or another replica's proof " +
	"(an operator's call through a follower carries the operator's own token, or is redirected to the leader)"

func (a *Authenticator) require(role Role, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		declared := r.Header.Get(CallerHeader)
		r.Header.Del(CallerHeader) // never read
		c, err := a.Identify(r)
		hint := ""
		if declared != "" && (err != nil || declared != c.Name) {
			if id, ok := a.peerReplica(r); ok {
				a.logger().Warn("caller header from a replica's certificate ignored: callers are proven by their own token or certificate, never declared",
					"replica", id, "header", truncateName(declared), "path", r.URL.Path, "remote", r.RemoteAddr)
				hint = headerRefused
			}
		}
		if err == nil && c.Role != role {
			what := "an operator"
			if role == RoleReplica {
				what = "a replica of this group"
			}
			err = fmt.Errorf("%s may not call %s: it needs %s%s: %w", c.Name, r.URL.Path, what, hint, ErrNotOperator)
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
		if c.Role == RoleOperator && !c.Certificate {
			// A follower forwards a token call with the token. A leader
			// of an earlier version named the caller of a forwarded call
			// from this header, so it says what the token proves; a
			// leader of this version checks the token and ignores it.
			r.Header.Set(CallerHeader, c.Name)
		}
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, c)))
	})
}

type callerKey struct{}

// CallerOf is the caller a handler behind RequireOperator or
// RequireReplica was called by.
func CallerOf(r *http.Request) (Caller, bool) {
	c, ok := r.Context().Value(callerKey{}).(Caller)
	return c, ok
}

type carrierKey struct{}

// withCarrier records in ctx the replica that carried an operator's call.
func withCarrier(ctx context.Context, replica string) context.Context {
	if replica == "" {
		return ctx
	}
	return context.WithValue(ctx, carrierKey{}, replica)
}

// carrierOf is the replica that carried the operator's call of ctx, or "".
func carrierOf(ctx context.Context) string {
	s, _ := ctx.Value(carrierKey{}).(string)
	return s
}

// carried appends to an operator's reason the replica that carried the
// call, for the ledger: "drain (carried by replica mgmt2)".
func carried(ctx context.Context, reason string) string {
	if via := carrierOf(ctx); via != "" {
		return reason + " (carried by replica " + via + ")"
	}
	return reason
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

// carriedArgs is the log arguments args with, last, the replica that
// carried the request ("carriedBy"), when one did.
func carriedArgs(ctx context.Context, args ...any) []any {
	if via := carrierOf(ctx); via != "" {
		return append(args, "carriedBy", "replica "+via)
	}
	return args
}
