// Package redact keeps secrets out of text fenced shows: logs, errors,
// /status and /readyz. One Redactor holds every secret the daemon reads;
// the log handler, the array adapters' errors and the HTTP answers all
// pass their text through it.
package redact

import (
	"encoding/base64"
	"regexp"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"
)

// Redacted replaces a secret in log output.
const Redacted = "[REDACTED]"

// Redactor holds the secrets that must never be logged. It is safe for
// concurrent use; the daemon adds every secret it reads.
type Redactor struct {
	mu      sync.RWMutex
	secrets []string
}

// New returns an empty Redactor.
func New() *Redactor { return &Redactor{} }

// minSecretLen keeps one- and two-character "secrets" from shredding every
// message; no real credential is that short.
const minSecretLen = 3

// Add registers secrets, each with the forms it takes once escaped for
// JSON, Go quoting, a URL or HTML (see escapedForms), so that a secret
// echoed inside an array's JSON error body, a quoted log value, a query
// string or an HTML error page is hidden too. Empty and very short
// strings are ignored, and so is a secret registered before.
func (r *Redactor) Add(secrets ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range secrets {
		if len(s) < minSecretLen {
			continue
		}
		for _, f := range escapedForms(s) {
			if len(f) >= minSecretLen && !slices.Contains(r.secrets, f) {
				r.secrets = append(r.secrets, f)
			}
		}
	}
	// Longest first: a shorter secret inside a longer one must not break
	// the longer one's match before it is replaced.
	slices.SortStableFunc(r.secrets, func(a, b string) int { return utf8.RuneCountInString(b) - utf8.RuneCountInString(a) })
}

// AddCredential registers a user name and password pair in every form a
// client sends it: the raw password, and base64 of "user:password" (as in
// "Authorization: Basic") and of the password alone, in standard and URL
// alphabets, padded and not.
func (r *Redactor) AddCredential(user, password string) {
	if password == "" {
		return
	}
	forms := []string{password}
	for _, raw := range []string{user + ":" + password, password} {
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
			forms = append(forms, enc.EncodeToString([]byte(raw)))
		}
	}
	r.Add(forms...)
}

// authValue matches the credentials of an Authorization header (or of a
// scheme written out the same way) wherever they appear: "Basic xxx",
// "Bearer xxx", and the value after "Authorization:" or "authorization=".
var authValue = regexp.MustCompile(`(?i)\b(basic|bearer|negotiate|digest)(\s+|%20)[A-Za-z0-9+/=._~\-]{4,}|(authorization|dell-emc-token|x-auth-token|cookie)("?\s*[:=]\s*\[?"?)(?:(?:basic|bearer|negotiate|digest)\s+)?[^\s",;\[\]]{4,}`)

// authWords are the words every match of authValue begins with, in lower
// case.
var authWords = []string{"basic", "bearer", "negotiate", "digest", "authorization", "dell-emc-token", "x-auth-token", "cookie"}

// mayHoldAuth reports whether authValue can match s, cheaply: a /status
// document of a thousand nodes is hundreds of kilobytes, which the
// case-insensitive pattern scans far slower than a search for its words.
// ASCII text can match only if it holds one of authWords in some case.
// Text with a byte outside ASCII is always matched against the pattern:
// Go's case-insensitive matching also folds some non-ASCII letters onto
// ASCII ones (the Kelvin sign onto k, the long s onto s).
func mayHoldAuth(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return true
		}
	}
	lower := strings.ToLower(s)
	for _, w := range authWords {
		if strings.Contains(lower, w) {
			return true
		}
	}
	return false
}

// Redact replaces every registered secret in s, and the credentials of any
// Authorization header, known or not.
func (r *Redactor) Redact(s string) string {
	r.mu.RLock()
	for _, sec := range r.secrets {
		if strings.Contains(s, sec) {
			s = strings.ReplaceAll(s, sec, Redacted)
		}
	}
	r.mu.RUnlock()
	if !mayHoldAuth(s) {
		return s
	}
	return authValue.ReplaceAllStringFunc(s, func(m string) string {
		sub := authValue.FindStringSubmatch(m)
		if sub[1] != "" {
			if cred := m[len(sub[1])+len(sub[2]):]; strings.ToLower(cred) == cred && strings.Trim(cred, "abcdefghijklmnopqrstuvwxyz") == "" {
				return m // "basic health": a word, not a credential
			}
			return sub[1] + sub[2] + Redacted
		}
		return sub[3] + sub[4] + Redacted
	})
}

// Trim shortens s to at most n bytes (marking the cut) after redacting it:
// for error bodies of arrays shown in /status and /readyz.
func (r *Redactor) Trim(s string, n int) string {
	s = r.Redact(s)
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
