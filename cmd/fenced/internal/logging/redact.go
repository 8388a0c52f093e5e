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
// values, and the whole value of attributes named like a secret. It also
// puts every record, fenced's and the libraries', in fenced's one shape:
// keys in lowerCamelCase ("err" is "error", "retry_in" is "retryIn"),
// durations as seconds (a float) and levels rounded to the four named
// ones (NamedLevel), so text, JSON and journal agree.
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
	out := slog.NewRecord(rec.Time, NamedLevel(rec.Level), h.r.Redact(rec.Message), rec.PC)
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
	return &RedactingHandler{next: h.next.WithGroup(Key(name)), r: h.r}
}

// NamedLevel rounds a level down to debug, info, warn or error, so that
// klog's verbosity levels (V(3) is slog level -3) print as DEBUG rather
// than DEBUG+1.
func NamedLevel(l slog.Level) slog.Level {
	switch {
	case l >= slog.LevelError:
		return slog.LevelError
	case l >= slog.LevelWarn:
		return slog.LevelWarn
	case l >= slog.LevelInfo:
		return slog.LevelInfo
	case l >= slog.LevelDebug:
		return slog.LevelDebug
	}
	return l
}

// Key puts an attribute key in fenced's style, lowerCamelCase: words
// joined by "_", "-", "." or spaces are run together with each later
// word capitalised ("retry_in" -> "retryIn", "FENCE_ID" -> "fenceID"), a
// leading capital is lowered ("Array" -> "array"), and "err" is "error".
// A key already in the style is returned as is.
func Key(k string) string {
	if k == "err" {
		return "error"
	}
	if !strings.ContainsAny(k, "_-. ") {
		if k != "" && k[0] >= 'A' && k[0] <= 'Z' && !allUpper(k) {
			return strings.ToLower(k[:1]) + k[1:]
		}
		if allUpper(k) {
			return strings.ToLower(k)
		}
		return k
	}
	var b strings.Builder
	first := true
	for _, w := range strings.FieldsFunc(k, func(r rune) bool { return r == '_' || r == '-' || r == '.' || r == ' ' }) {
		switch {
		case first:
			if allUpper(w) {
				w = strings.ToLower(w)
			} else if w[0] >= 'A' && w[0] <= 'Z' {
				w = strings.ToLower(w[:1]) + w[1:]
			}
			first = false
		case w == "ID" || strings.ToLower(w) == "id":
			w = "ID"
		case allUpper(w):
			w = w[:1] + strings.ToLower(w[1:])
		default:
			w = strings.ToUpper(w[:1]) + w[1:]
		}
		b.WriteString(w)
	}
	if b.Len() == 0 {
		return k
	}
	return b.String()
}

// allUpper reports whether s has letters and none of them is lower case.
func allUpper(s string) bool {
	letter := false
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z':
			return false
		case r >= 'A' && r <= 'Z':
			letter = true
		}
	}
	return letter
}

func (h *RedactingHandler) attr(a slog.Attr) slog.Attr {
	a.Key = Key(a.Key)
	a.Value = a.Value.Resolve()
	if sensitiveKey(a.Key) && a.Value.Kind() != slog.KindGroup {
		if a.Value.String() == "" {
			return a
		}
		return slog.String(a.Key, Redacted)
	}
	switch a.Value.Kind() {
	case slog.KindDuration:
		return slog.Float64(a.Key, a.Value.Duration().Seconds())
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
