package logging

import (
	"context"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/coreos/go-systemd/v22/journal"
)

// SendFunc sends one journal entry; journal.Send in production.
type SendFunc func(message string, priority journal.Priority, vars map[string]string) error

// JournalHandler writes native journald entries. Attributes become fields
// named in upper snake case: cluster -> CLUSTER, fenceID -> FENCE_ID, and
// attributes of group g become G_NAME.
type JournalHandler struct {
	level  slog.Leveler
	send   SendFunc
	attrs  map[string]string
	prefix string
}

var _ slog.Handler = (*JournalHandler)(nil)

// SyslogIdentifier is the SYSLOG_IDENTIFIER of every entry.
const SyslogIdentifier = "fenced"

// NewJournalHandler returns a handler logging at level and above via send.
func NewJournalHandler(level slog.Leveler, send SendFunc) *JournalHandler {
	return &JournalHandler{level: level, send: send, attrs: map[string]string{}}
}

// Enabled implements slog.Handler.
func (h *JournalHandler) Enabled(_ context.Context, l slog.Level) bool {
	return l >= h.level.Level()
}

// Handle implements slog.Handler.
func (h *JournalHandler) Handle(_ context.Context, rec slog.Record) error {
	vars := make(map[string]string, len(h.attrs)+rec.NumAttrs()+4)
	for k, v := range h.attrs {
		vars[k] = v
	}
	rec.Attrs(func(a slog.Attr) bool {
		addField(vars, h.prefix, a)
		return true
	})
	vars["SYSLOG_IDENTIFIER"] = SyslogIdentifier
	if rec.PC != 0 {
		f, _ := runtime.CallersFrames([]uintptr{rec.PC}).Next()
		vars["CODE_FILE"] = f.File
		vars["CODE_LINE"] = strconv.Itoa(f.Line)
		vars["CODE_FUNC"] = f.Function
	}
	return h.send(rec.Message, Priority(rec.Level), vars)
}

// WithAttrs implements slog.Handler.
func (h *JournalHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	n := h.clone()
	for _, a := range attrs {
		addField(n.attrs, n.prefix, a)
	}
	return n
}

// WithGroup implements slog.Handler.
func (h *JournalHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	n := h.clone()
	n.prefix = h.prefix + FieldName(name) + "_"
	return n
}

func (h *JournalHandler) clone() *JournalHandler {
	attrs := make(map[string]string, len(h.attrs))
	for k, v := range h.attrs {
		attrs[k] = v
	}
	return &JournalHandler{level: h.level, send: h.send, attrs: attrs, prefix: h.prefix}
}

// Priority maps a slog level to a syslog priority.
func Priority(l slog.Level) journal.Priority {
	switch {
	case l >= slog.LevelError:
		return journal.PriErr
	case l >= slog.LevelWarn:
		return journal.PriWarning
	case l >= slog.LevelInfo:
		return journal.PriInfo
	default:
		return journal.PriDebug
	}
}

// reserved reports fields journald or this handler sets itself.
func reserved(name string) bool {
	switch name {
	case "MESSAGE", "PRIORITY", "SYSLOG_IDENTIFIER", "CODE_FILE", "CODE_LINE", "CODE_FUNC":
		return true
	}
	return false
}

func addField(vars map[string]string, prefix string, a slog.Attr) {
	if a.Equal(slog.Attr{}) {
		return
	}
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		p := prefix
		if a.Key != "" {
			p += FieldName(a.Key) + "_"
		}
		for _, g := range v.Group() {
			addField(vars, p, g)
		}
		return
	}
	name := prefix + FieldName(a.Key)
	if reserved(name) {
		name = "ATTR_" + name
	}
	var s string
	switch v.Kind() {
	case slog.KindTime:
		s = v.Time().Format(time.RFC3339Nano)
	default:
		s = v.String()
	}
	vars[name] = s
}

// FieldName turns an attribute key into a journal field name: upper snake
// case, only A-Z, 0-9 and _, starting with a letter.
func FieldName(key string) string {
	var b strings.Builder
	rs := []rune(key)
	for i, r := range rs {
		switch {
		case r >= 'a' && r <= 'z':
			b.WriteRune(unicode.ToUpper(r))
		case r >= 'A' && r <= 'Z':
			if i > 0 && ((rs[i-1] >= 'a' && rs[i-1] <= 'z') || (rs[i-1] >= '0' && rs[i-1] <= '9')) {
				b.WriteByte('_')
			} else if i > 0 && i+1 < len(rs) && rs[i-1] >= 'A' && rs[i-1] <= 'Z' && rs[i+1] >= 'a' && rs[i+1] <= 'z' {
				b.WriteByte('_') // "HTTPServer" -> HTTP_SERVER
			}
			b.WriteRune(r)
		case r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	s := b.String()
	if s == "" || s[0] < 'A' || s[0] > 'Z' {
		s = "F_" + strings.TrimLeft(s, "_")
	}
	return s
}
