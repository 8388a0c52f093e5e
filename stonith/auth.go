package stonith

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
)

// OperatorHeader optionally names the person behind a token; it is
// recorded as claimed ("token/alice"), never trusted for authorization.
const OperatorHeader = "X-Fenced-Operator"

// Authenticator decides who calls a mutating endpoint: a client
// certificate verified by the TLS layer (against the configured client CA)
// or the bearer token from the token file, compared in constant time. A
// token is accepted over HTTPS, or over plain HTTP from a loopback client
// only (it would otherwise cross the network in clear).
type Authenticator struct {
	token []byte
}

// NewAuthenticator reads the token file (surrounding white space removed).
// An empty path accepts client certificates only.
func NewAuthenticator(tokenFile string) (*Authenticator, error) {
	a := &Authenticator{}
	if tokenFile == "" {
		return a, nil
	}
	b, err := os.ReadFile(tokenFile)
	if err != nil {
		return nil, fmt.Errorf("read api token file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if len(tok) < 16 {
		return nil, errors.New("api token file: the token must be at least 16 characters")
	}
	a.token = []byte(tok)
	return a, nil
}

// Authenticate returns the caller's name, or false.
func (a *Authenticator) Authenticate(r *http.Request) (string, bool) {
	claimed := strings.TrimSpace(r.Header.Get(OperatorHeader))
	if len(claimed) > 64 || strings.ContainsAny(claimed, "\x00\r\n") {
		claimed = ""
	}
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.PeerCertificates) > 0 {
		cert := r.TLS.PeerCertificates[0]
		name := cert.Subject.CommonName
		if name == "" {
			name = cert.Subject.String()
		}
		return "cert:" + name, true
	}
	if len(a.token) == 0 {
		return "", false
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || subtle.ConstantTimeCompare([]byte(got), a.token) != 1 {
		return "", false
	}
	if r.TLS == nil && !loopback(r.RemoteAddr) {
		return "", false
	}
	if claimed != "" {
		return "token/" + claimed, true
	}
	return "token", true
}

func loopback(remote string) bool {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
