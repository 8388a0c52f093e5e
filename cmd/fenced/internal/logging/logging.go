// Package logging builds fenced's slog logger: native journald entries with
// structured fields when stderr is connected to the journal, text or JSON
// otherwise, always behind a redactor that keeps secrets out of the output.
package logging

import (
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/coreos/go-systemd/v22/journal"
)

// Output selects where log records go.
type Output string

// Outputs.
const (
	// Auto writes to the journal when stderr is a journal stream
	// (JOURNAL_STREAM names stderr's device and inode), else to the writer.
	Auto Output = "auto"
	// Journal always writes native journal entries.
	Journal Output = "journal"
	// Stream always writes text or JSON to the writer.
	Stream Output = "stream"
)

// Options configure New.
type Options struct {
	// Format is text or json (for stream output).
	Format string
	// Level is debug, info, warn or error.
	Level string
	// JournalEnabled reports whether journald's socket is there (nil:
	// journal.Enabled); asked when Output is Journal.
	JournalEnabled func() bool
	// Output selects journal or stream output; empty means Auto.
	Output Output
	// Writer receives stream output (normally os.Stderr).
	Writer io.Writer
	// Redactor hides secrets; nil creates one (reachable via the handler
	// only, so pass one to add secrets later).
	Redactor *Redactor
}

// ParseLevel parses debug, info, warn or error.
func ParseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "", "info":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("unknown log level %q: want debug, info, warn or error", s)
}

// New returns the logger described by opts.
func New(opts Options) (*slog.Logger, error) {
	level, err := ParseLevel(opts.Level)
	if err != nil {
		return nil, err
	}
	red := opts.Redactor
	if red == nil {
		red = NewRedactor()
	}
	out := opts.Output
	if out == "" {
		out = Auto
	}
	if out == Auto {
		out = Stream
		if ok, err := journal.StderrIsJournalStream(); err == nil && ok {
			out = Journal
		}
	}
	var h slog.Handler
	switch out {
	case Journal:
		enabled := opts.JournalEnabled
		if enabled == nil {
			enabled = journal.Enabled
		}
		if opts.Output == Journal && !enabled() {
			return nil, fmt.Errorf("log output journal: journald's socket (/run/systemd/journal/socket) is not there: every record would be lost; use --log-output stream (or auto)")
		}
		h = NewJournalHandler(level, journal.Send)
	case Stream:
		if opts.Writer == nil {
			return nil, fmt.Errorf("stream log output needs a writer")
		}
		ho := &slog.HandlerOptions{Level: level}
		switch opts.Format {
		case "", "text":
			h = slog.NewTextHandler(opts.Writer, ho)
		case "json":
			h = slog.NewJSONHandler(opts.Writer, ho)
		default:
			return nil, fmt.Errorf("unknown log format %q: want text or json", opts.Format)
		}
	default:
		return nil, fmt.Errorf("unknown log output %q", out)
	}
	return slog.New(NewRedactingHandler(h, red)), nil
}
