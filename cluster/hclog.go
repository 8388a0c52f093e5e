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
	"github.com/hashicorp/raft"

	"github.com/fenced-project/fenced/internal/lograte"
)

// slogHCLog lets hashicorp/raft log through log/slog. The hclog name
// (raft, transport, snapshots) is the record's "module" attribute, added
// once per record: the slog logger given to the node carries the
// component. Arguments that hclog formats itself (hclog.Fmt, Hex, Octal,
// Binary, Quote) are formatted here, so no record carries a format verb.
type slogHCLog struct {
	l     *slog.Logger
	name  string
	args  []any
	limit *lograte.Limiter
}

var _ hclog.Logger = (*slogHCLog)(nil)

func newHCLog(l *slog.Logger) hclog.Logger {
	return &slogHCLog{l: l, limit: lograte.New(peerLogEvery, nil)}
}

// peerLogEvery is how often raft's report that a peer cannot be reached
// is written at most, per message and peer.
const peerLogEvery = time.Minute

// peerUnreachable are raft's messages (hashicorp/raft replication.go,
// raft.go) that a peer did not answer: written at ERROR by raft every
// heartbeat backoff while a replica is down, which is planned maintenance
// as often as a fault. They are written at WARN, at most once per
// peerLogEvery for each message and peer, with the count of those left
// out; /status and fenced_raft_peer_reachable say the same at any time.
var peerUnreachable = map[string]bool{
	"failed to appendEntries to":              true,
	"failed to heartbeat to":                  true,
	"failed to start pipeline replication to": true,
	"failed to pipeline appendEntries":        true,
	"failed to contact":                       true,
	"failed to make requestVote RPC":          true,
	"failed to send snapshot to":              true,
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
	lvl := toSlogLevel(level)
	out := make([]any, 0, len(args)+4)
	if h.name != "" {
		out = append(out, "module", h.name)
	}
	out = append(out, hclogArgs(args)...)
	if peerUnreachable[msg] && h.limit != nil {
		lvl = min(lvl, slog.LevelWarn)
		ok, left := h.limit.Allow(h.name + "|" + msg + "|" + peerOf(out))
		if !ok {
			return
		}
		if left > 0 {
			out = append(out, "suppressed", left, "suppressedWithin", h.limit.Every().String())
		}
	}
	l.Log(context.Background(), lvl, msg, out...)
}

// peerOf is the peer a raft record is about ("peer", "server-id" or
// "target"), or "".
func peerOf(kv []any) string {
	for i := 0; i+1 < len(kv); i += 2 {
		switch kv[i] {
		case "peer", "server-id", "target", "id":
			return fmt.Sprint(kv[i+1])
		}
	}
	return ""
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
	case raft.Server:
		// raft logs a peer as a Server in some records and as its
		// address in others: always a string, so a log store maps the
		// key to one type.
		return fmt.Sprintf("%s (%s)", x.ID, x.Address)
	case raft.ServerAddress:
		return string(x)
	case raft.ServerID:
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
	return &slogHCLog{l: h.l.With(hclogArgs(args)...), name: h.name, args: append(append([]any{}, h.args...), args...), limit: h.limit}
}

func (h *slogHCLog) Name() string { return h.name }

func (h *slogHCLog) Named(name string) hclog.Logger {
	if h.name != "" {
		name = h.name + "." + name
	}
	return h.ResetNamed(name)
}

func (h *slogHCLog) ResetNamed(name string) hclog.Logger {
	return &slogHCLog{l: h.l, name: name, args: h.args, limit: h.limit}
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
