package arrayclients

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/akutz/gournal"
	"github.com/dell/gopowerstore"
	sclog "github.com/dell/goscaleio/log"
	"github.com/dell/gounity/gounityutil"
	"github.com/sirupsen/logrus"
)

// The Dell client libraries log in four ways: gopowerstore through a
// logger set per client (and the standard log package before one is set),
// goisilon through gournal (an appender in the context, else a package
// default), gounity and gopowermax through logrus (gounity takes an entry
// from the context, else builds a logger that prints to stdout), and
// goscaleio through a package *slog.Logger. The adapters hand each library
// the array's logger where it takes one; RouteLibraryLogs covers the
// package defaults. Records carry "library" with the library's name.

// RouteLibraryLogs sends the Dell libraries' package-level loggers
// (logrus's standard logger, which gopowermax and gounity use; gounity's
// own logger; goscaleio's logger; gournal's default appender, which
// goisilon falls back to) through l. Route standard output first
// (logging.Route): gounity prints a line there when its logger is built. It changes process state: call it once, in the daemon, and
// call the returned function to undo it.
func RouteLibraryLogs(l *slog.Logger) (restore func()) {
	std := logrus.StandardLogger()
	out, level, formatter, caller := std.Out, std.GetLevel(), std.Formatter, std.ReportCaller
	hooks := std.ReplaceHooks(logrus.LevelHooks{})
	std.SetOutput(io.Discard)
	std.SetLevel(logrusLevel(l))
	std.SetReportCaller(true)
	std.AddHook(&logrusHook{l: l})

	// gounity's own logger (used where a call's context has no entry)
	// prints one line on stdout when first built, then writes text to
	// stderr; route its output too.
	unity := gounityutil.GetLogger()
	uOut, uLevel, uCaller := unity.Out, unity.GetLevel(), unity.ReportCaller
	uHooks := unity.ReplaceHooks(logrus.LevelHooks{})
	unity.SetOutput(io.Discard)
	unity.SetLevel(logrusLevel(l))
	unity.SetReportCaller(true)
	unity.AddHook(&logrusHook{l: l, lib: "gounity"})

	scLog := sclog.Log
	sclog.Log = slog.New(libraryHandler{l.Handler()}).With("library", "goscaleio")
	if l.Enabled(context.Background(), slog.LevelDebug) {
		sclog.SetLogLevel(slog.LevelDebug)
	}

	appender, glevel := gournal.DefaultAppender, gournal.DefaultLevel
	gournal.DefaultAppender = gournalAppender{l: l.With("library", "goisilon")}
	gournal.DefaultLevel = gournalLevel(l)

	return func() {
		std.ReplaceHooks(hooks)
		std.SetOutput(out)
		std.SetLevel(level)
		std.SetFormatter(formatter)
		std.SetReportCaller(caller)
		unity.ReplaceHooks(uHooks)
		unity.SetOutput(uOut)
		unity.SetLevel(uLevel)
		unity.SetReportCaller(uCaller)
		sclog.Log = scLog
		sclog.SetLogLevel(slog.LevelInfo)
		gournal.DefaultAppender, gournal.DefaultLevel = appender, glevel
	}
}

// libraryHandler writes a library's slog records at libraryLevel.
type libraryHandler struct{ next slog.Handler }

func (h libraryHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, min(l, slog.LevelWarn))
}

func (h libraryHandler) Handle(ctx context.Context, r slog.Record) error {
	r.Level = libraryLevel(r.Level, r.Message)
	if !h.next.Enabled(ctx, r.Level) {
		return nil
	}
	return h.next.Handle(ctx, r)
}

func (h libraryHandler) WithAttrs(a []slog.Attr) slog.Handler {
	return libraryHandler{h.next.WithAttrs(a)}
}
func (h libraryHandler) WithGroup(n string) slog.Handler { return libraryHandler{h.next.WithGroup(n)} }

// logrusHook turns a logrus entry into a slog record. The library is lib,
// or when that is empty named from the caller (gopowermax, gounity).
type logrusHook struct {
	l   *slog.Logger
	lib string
}

func (h *logrusHook) Levels() []logrus.Level { return logrus.AllLevels }

func (h *logrusHook) Fire(e *logrus.Entry) error {
	lib := h.lib
	if lib == "" && e.Caller != nil {
		for _, name := range []string{"gopowermax", "gounity", "goscaleio", "gopowerstore", "goisilon"} {
			if strings.Contains(e.Caller.Function, "dell/"+name) {
				lib = name
				break
			}
		}
	}
	if lib == "" {
		lib = "logrus"
	}
	attrs := make([]any, 0, 2+2*len(e.Data))
	if _, named := e.Data["library"]; !named {
		attrs = append(attrs, "library", lib)
	}
	for k, v := range e.Data {
		attrs = append(attrs, k, v)
	}
	ctx := e.Context
	if ctx == nil {
		ctx = context.Background()
	}
	msg := strings.TrimSpace(e.Message)
	h.l.Log(ctx, libraryLevel(slogLevel(e.Level), msg), msg, attrs...)
	return nil
}

// libraryLevel is the level a Dell library's record is written at: never
// above WARN (a failed call is the adapter's to report, with what it was
// doing, and it does), and at DEBUG when the library reports an object it
// looked up and did not find: fenced looks up every candidate name a
// driver may have given a node's host (gopowermax logs "GetHostByID
// failed: Cannot find Host ..." at ERROR for each one absent), and an
// absent candidate is an answer, not a fault.
func libraryLevel(l slog.Level, msg string) slog.Level {
	lower := strings.ToLower(msg)
	if strings.Contains(lower, "cannot find") || strings.Contains(lower, "not found") || strings.Contains(lower, "does not exist") {
		return min(l, slog.LevelDebug)
	}
	return min(l, slog.LevelWarn)
}

func slogLevel(l logrus.Level) slog.Level {
	switch l {
	case logrus.PanicLevel, logrus.FatalLevel, logrus.ErrorLevel:
		return slog.LevelError
	case logrus.WarnLevel:
		return slog.LevelWarn
	case logrus.InfoLevel:
		return slog.LevelInfo
	}
	return slog.LevelDebug
}

func logrusLevel(l *slog.Logger) logrus.Level {
	for _, lv := range []struct {
		s slog.Level
		l logrus.Level
	}{{slog.LevelDebug, logrus.DebugLevel}, {slog.LevelInfo, logrus.InfoLevel}, {slog.LevelWarn, logrus.WarnLevel}} {
		if l.Enabled(context.Background(), lv.s) {
			return lv.l
		}
	}
	return logrus.ErrorLevel
}

// UnityLogger is the logrus logger gounity is handed (in the context) for
// one array: it writes nothing itself and passes every entry to l.
func UnityLogger(l *slog.Logger) *logrus.Entry {
	lg := logrus.New()
	lg.SetOutput(io.Discard)
	lg.SetLevel(logrusLevel(l))
	lg.AddHook(&logrusHook{l: l, lib: "gounity"})
	// gounity uses a context's entry only when it carries fields.
	return lg.WithField("library", "gounity")
}

// WithUnityLogger puts the array's gounity logger in ctx.
func WithUnityLogger(ctx context.Context, e *logrus.Entry) context.Context {
	if e == nil {
		return ctx
	}
	return context.WithValue(ctx, gounityutil.UnityLog, e)
}

// gournalAppender passes goisilon's records (already formatted by
// gournal) to slog.
type gournalAppender struct{ l *slog.Logger }

func (a gournalAppender) Append(ctx context.Context, lvl gournal.Level, fields map[string]any, msg string) {
	level := slog.LevelDebug
	switch lvl {
	case gournal.PanicLevel, gournal.FatalLevel, gournal.ErrorLevel:
		level = slog.LevelError
	case gournal.WarnLevel:
		level = slog.LevelWarn
	case gournal.InfoLevel:
		level = slog.LevelInfo
	}
	attrs := make([]any, 0, 2*len(fields))
	for k, v := range fields {
		attrs = append(attrs, k, v)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	msg = strings.TrimSpace(msg)
	a.l.Log(ctx, libraryLevel(level, msg), msg, attrs...)
}

func gournalLevel(l *slog.Logger) gournal.Level {
	switch logrusLevel(l) {
	case logrus.DebugLevel:
		return gournal.DebugLevel
	case logrus.InfoLevel:
		return gournal.InfoLevel
	case logrus.WarnLevel:
		return gournal.WarnLevel
	}
	return gournal.ErrorLevel
}

// WithIsilonLogger puts the array's goisilon appender and level in ctx.
func WithIsilonLogger(ctx context.Context, l *slog.Logger) context.Context {
	ctx = context.WithValue(ctx, gournal.AppenderKey(), gournal.Appender(gournalAppender{l: l.With("library", "goisilon")}))
	return context.WithValue(ctx, gournal.LevelKey(), gournalLevel(l))
}

// PowerStoreLogger is gopowerstore's logger for one array (its Info,
// Debug and Error methods write to the array's slog logger).
type PowerStoreLogger struct{ l *slog.Logger }

// NewPowerStoreLogger returns gopowerstore's logger writing to l.
func NewPowerStoreLogger(l *slog.Logger) PowerStoreLogger { return PowerStoreLogger{l: l} }

var _ gopowerstore.Logger = PowerStoreLogger{}

func (p PowerStoreLogger) log(ctx context.Context, level slog.Level, format string, args ...any) {
	if ctx == nil {
		ctx = context.Background()
	}
	if !p.l.Enabled(ctx, min(level, slog.LevelWarn)) {
		return
	}
	msg := strings.TrimSpace(fmt.Sprintf(format, args...))
	p.l.Log(ctx, libraryLevel(level, msg), msg, "library", "gopowerstore")
}

func (p PowerStoreLogger) Info(ctx context.Context, format string, args ...any) {
	p.log(ctx, slog.LevelInfo, format, args...)
}

func (p PowerStoreLogger) Debug(ctx context.Context, format string, args ...any) {
	p.log(ctx, slog.LevelDebug, format, args...)
}

func (p PowerStoreLogger) Error(ctx context.Context, format string, args ...any) {
	p.log(ctx, slog.LevelError, format, args...)
}
