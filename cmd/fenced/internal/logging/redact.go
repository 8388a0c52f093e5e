package logging

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/fenced-project/fenced/redact"
)

// Redactor is fenced's one redactor (package redact); the handler here
// applies it to every record.
type Redactor = redact.Redactor

// Redacted replaces a secret in log output.
const Redacted = redact.Redacted

// NewRedactor returns an empty Redactor.
func NewRedactor() *Redactor { return redact.New() }

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
