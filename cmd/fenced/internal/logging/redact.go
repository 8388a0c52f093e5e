package logging

import (
	"context"
	"encoding/base64"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
)

// Redacted replaces a secret in log output.
const Redacted = "[REDACTED]"

// Redactor holds the secrets that must never be logged. It is safe for
// concurrent use; the daemon adds every secret it reads.
type Redactor struct {
	mu      sync.RWMutex
	secrets []string
}

// NewRedactor returns an empty Redactor.
func NewRedactor() *Redactor { return &Redactor{} }

// minSecretLen keeps one- and two-character "secrets" from shredding every
// message; no real credential is that short.
const minSecretLen = 3

// Add registers secrets. Empty and very short strings are ignored.
func (r *Redactor) Add(secrets ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range secrets {
		if len(s) >= minSecretLen {
			r.secrets = append(r.secrets, s)
		}
	}
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

// sensitiveKey reports whether an attribute key names a secret by itself
// (password, token, secret, credential), not a file holding one.
func sensitiveKey(key string) bool {
	k := strings.ToLower(key)
	if strings.HasSuffix(k, "file") || strings.HasSuffix(k, "path") || strings.HasSuffix(k, "dir") {
		return false
	}
	for _, s := range []string{"password", "passwd", "secret", "token", "credential", "authorization"} {
		if strings.Contains(k, s) {
			return true
		}
	}
	return false
}

// RedactingHandler removes secrets from records before the next handler
// sees them: registered secret values anywhere in the message or attribute
// values, and the whole value of attributes named like a secret.
type RedactingHandler struct {
	next slog.Handler
	r    *Redactor
}

var _ slog.Handler = (*RedactingHandler)(nil)

// NewRedactingHandler wraps next.
func NewRedactingHandler(next slog.Handler, r *Redactor) *RedactingHandler {
	return &RedactingHandler{next: next, r: r}
}

// Enabled implements slog.Handler.
func (h *RedactingHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, l)
}

// Handle implements slog.Handler.
func (h *RedactingHandler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, h.r.Redact(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

// WithAttrs implements slog.Handler.
func (h *RedactingHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	clean := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		clean[i] = h.attr(a)
	}
	return &RedactingHandler{next: h.next.WithAttrs(clean), r: h.r}
}

// WithGroup implements slog.Handler.
func (h *RedactingHandler) WithGroup(name string) slog.Handler {
	return &RedactingHandler{next: h.next.WithGroup(name), r: h.r}
}

func (h *RedactingHandler) attr(a slog.Attr) slog.Attr {
	a.Value = a.Value.Resolve()
	if sensitiveKey(a.Key) && a.Value.Kind() != slog.KindGroup {
		if a.Value.String() == "" {
			return a
		}
		return slog.String(a.Key, Redacted)
	}
	switch a.Value.Kind() {
	case slog.KindString:
		return slog.String(a.Key, h.r.Redact(a.Value.String()))
	case slog.KindGroup:
		g := a.Value.Group()
		clean := make([]slog.Attr, len(g))
		for i, x := range g {
			clean[i] = h.attr(x)
		}
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(clean...)}
	case slog.KindAny:
		v := a.Value.Any()
		if err, ok := v.(error); ok {
			return slog.String(a.Key, h.r.Redact(err.Error()))
		}
		// Any other value is printed by the next handler in some way; if
		// that would show a secret, log the redacted print instead.
		s := fmt.Sprintf("%+v", v)
		if r := h.r.Redact(s); r != s {
			return slog.String(a.Key, r)
		}
	}
	return a
}
