package cluster

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
)

// slogHCLog lets hashicorp/raft log through log/slog. The hclog name
// (raft, transport, snapshots) is the record's "module" attribute, added
// once per record: the slog logger given to the node carries the
// component. Arguments that hclog formats itself (hclog.Fmt, Hex, Octal,
// Binary, Quote) are formatted here, so no record carries a format verb.
type slogHCLog struct {
	l    *slog.Logger
	name string
	args []any
}

var _ hclog.Logger = (*slogHCLog)(nil)

func newHCLog(l *slog.Logger) hclog.Logger {
	return &slogHCLog{l: l}
}

func toSlogLevel(level hclog.Level) slog.Level {
	switch level {
	case hclog.Trace:
		return slog.LevelDebug - 4
	case hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	}
	return slog.LevelInfo
}

func (h *slogHCLog) Log(level hclog.Level, msg string, args ...any) {
	if level == hclog.Off {
		return
	}
	l := h.l
	if !l.Enabled(context.Background(), toSlogLevel(level)) {
		return
	}
	out := make([]any, 0, len(args)+2)
	if h.name != "" {
		out = append(out, "module", h.name)
	}
	out = append(out, hclogArgs(args)...)
	l.Log(context.Background(), toSlogLevel(level), msg, out...)
}

// hclogArgs turns hclog's value types into plain values.
func hclogArgs(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		out[i] = hclogValue(a)
	}
	return out
}

func hclogValue(v any) any {
	switch x := v.(type) {
	case hclog.Format:
		if len(x) == 0 {
			return ""
		}
		f, ok := x[0].(string)
		if !ok {
			return fmt.Sprint(x...)
		}
		if strings.Contains(f, "%+v") || strings.Contains(f, "%#v") {
			// Go-syntax dumps of structs are not for operators; the
			// plain form carries the same fields.
			f = strings.NewReplacer("%+v", "%v", "%#v", "%v").Replace(f)
		}
		return fmt.Sprintf(f, x[1:]...)
	case hclog.Hex:
		return fmt.Sprintf("0x%x", int(x))
	case hclog.Octal:
		return fmt.Sprintf("0%o", int(x))
	case hclog.Binary:
		return fmt.Sprintf("0b%b", int(x))
	case hclog.Quote:
		return string(x)
	case time.Duration, time.Time, error:
		return v
	case fmt.Stringer:
		// raft logs itself ("follower", r) and other values with only
		// unexported fields: their String is what hclog would print, where
		// JSON would show {}.
		return x.String()
	}
	return v
}

func (h *slogHCLog) Trace(msg string, args ...any) { h.Log(hclog.Trace, msg, args...) }
func (h *slogHCLog) Debug(msg string, args ...any) { h.Log(hclog.Debug, msg, args...) }
func (h *slogHCLog) Info(msg string, args ...any)  { h.Log(hclog.Info, msg, args...) }
func (h *slogHCLog) Warn(msg string, args ...any)  { h.Log(hclog.Warn, msg, args...) }
func (h *slogHCLog) Error(msg string, args ...any) { h.Log(hclog.Error, msg, args...) }

func (h *slogHCLog) enabled(level hclog.Level) bool {
	return h.l.Enabled(context.Background(), toSlogLevel(level))
}

func (h *slogHCLog) IsTrace() bool { return h.enabled(hclog.Trace) }
func (h *slogHCLog) IsDebug() bool { return h.enabled(hclog.Debug) }
func (h *slogHCLog) IsInfo() bool  { return h.enabled(hclog.Info) }
func (h *slogHCLog) IsWarn() bool  { return h.enabled(hclog.Warn) }
func (h *slogHCLog) IsError() bool { return h.enabled(hclog.Error) }

func (h *slogHCLog) ImpliedArgs() []any { return h.args }

func (h *slogHCLog) With(args ...any) hclog.Logger {
	return &slogHCLog{l: h.l.With(hclogArgs(args)...), name: h.name, args: append(append([]any{}, h.args...), args...)}
}

func (h *slogHCLog) Name() string { return h.name }

func (h *slogHCLog) Named(name string) hclog.Logger {
	if h.name != "" {
		name = h.name + "." + name
	}
	return h.ResetNamed(name)
}

func (h *slogHCLog) ResetNamed(name string) hclog.Logger {
	return &slogHCLog{l: h.l, name: name, args: h.args}
}

// SetLevel is ignored: the slog handler decides.
func (h *slogHCLog) SetLevel(hclog.Level) {}

func (h *slogHCLog) GetLevel() hclog.Level {
	for _, lv := range []hclog.Level{hclog.Trace, hclog.Debug, hclog.Info, hclog.Warn} {
		if h.enabled(lv) {
			return lv
		}
	}
	return hclog.Error
}

func (h *slogHCLog) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(h.StandardWriter(opts), "", 0)
}

func (h *slogHCLog) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return writerFunc(func(p []byte) (int, error) {
		h.Info(strings.TrimSpace(string(p)))
		return len(p), nil
	})
}

type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
