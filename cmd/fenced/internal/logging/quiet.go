package logging

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/fenced-project/fenced/internal/lograte"
)

// Quiet wraps the handler of a library's records (client-go's klog, the
// standard library's log) so that an expected degraded state reads as
// one: a record at ERROR is written at WARN (a watch that fails while an
// API server restarts is the detector's doubt to report, not an error of
// fenced's), and a record equal to one written less than every ago (the
// same message and the same keys named in keyAttrs) is dropped; the next
// one written says how many were ("suppressed"). now is the clock (nil:
// time.Now).
func Quiet(h slog.Handler, every time.Duration, now func() time.Time) slog.Handler {
	if now == nil {
		now = time.Now
	}
	return &quietHandler{next: h, limit: lograte.New(every, now)}
}

// keyAttrs are the attributes that tell one library record from another
// of the same message: which cluster, which watch, which peer.
var keyAttrs = map[string]bool{"cluster": true, "type": true, "reflector": true, "peer": true, "logger": true, "library": true}

type quietHandler struct {
	next  slog.Handler
	limit *lograte.Limiter
	// bound is the key part of the attributes bound with WithAttrs.
	bound string
	group string
}

func (q *quietHandler) Enabled(ctx context.Context, level slog.Level) bool {
	if level > slog.LevelWarn {
		level = slog.LevelWarn
	}
	return q.next.Enabled(ctx, level)
}

func (q *quietHandler) Handle(ctx context.Context, r slog.Record) error {
	var key strings.Builder
	key.WriteString(q.bound)
	key.WriteString("|")
	key.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		if keyAttrs[a.Key] {
			fmt.Fprintf(&key, "|%s=%s", a.Key, a.Value.String())
		}
		return true
	})
	ok, suppressed := q.limit.Allow(key.String())
	if !ok {
		return nil
	}
	level := r.Level
	if level > slog.LevelWarn {
		level = slog.LevelWarn
	}
	out := slog.NewRecord(r.Time, level, r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(a)
		return true
	})
	if suppressed > 0 {
		out.AddAttrs(slog.Int("suppressed", suppressed), slog.String("suppressedWithin", q.limit.Every().String()))
	}
	return q.next.Handle(ctx, out)
}

func (q *quietHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	var key strings.Builder
	key.WriteString(q.bound)
	for _, a := range attrs {
		if keyAttrs[a.Key] {
			fmt.Fprintf(&key, "|%s%s=%s", q.group, a.Key, a.Value.String())
		}
	}
	return &quietHandler{next: q.next.WithAttrs(attrs), limit: q.limit, bound: key.String(), group: q.group}
}

func (q *quietHandler) WithGroup(name string) slog.Handler {
	return &quietHandler{next: q.next.WithGroup(name), limit: q.limit, bound: q.bound, group: q.group + name + "."}
}
