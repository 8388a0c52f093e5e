package logging

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// LibraryEvery is how often a library's record is repeated at most (see
// Quiet): a watch failing every second while an API server restarts, or
// a client printing the same line at each login, is one line a minute.
const LibraryEvery = time.Minute

// LibraryLogger is l for a library's records: named by "library", at WARN
// at most, each distinct record at most once per LibraryEvery (Quiet).
func LibraryLogger(l *slog.Logger, library string) *slog.Logger {
	return slog.New(Quiet(l.Handler(), LibraryEvery, nil)).With("library", library)
}

// Route sends the process-wide loggers through l, so that a replica's
// output is one stream in one format behind one redactor: client-go's
// klog (klog.SetSlogLogger), the standard library's log package (which
// gopowerstore writes to), and whatever a library prints on standard
// output (gounity and goscaleio do, with fmt.Print), line by line as info
// records with source "stdout". Each record names its origin in
// "library" (klog, stdlog), through LibraryLogger. The array libraries' own loggers are routed
// by arrayclients.RouteLibraryLogs.
//
// Route changes process state; call it once, in the daemon, and call the
// returned function to undo it (tests do).
func Route(l *slog.Logger) (restore func()) {
	klog.SetSlogLogger(LibraryLogger(l, "klog"))

	stdOut, stdFlags, stdPrefix := log.Writer(), log.Flags(), log.Prefix()
	log.SetOutput(LineWriter(LibraryLogger(l, "stdlog"), slog.LevelInfo))
	log.SetFlags(0)
	log.SetPrefix("")

	stopStdout := captureStdout(l.With("source", "stdout"))
	return func() {
		stopStdout()
		log.SetOutput(stdOut)
		log.SetFlags(stdFlags)
		log.SetPrefix(stdPrefix)
		klog.ClearLogger()
	}
}

// LineWriter returns a writer that logs each line written to it as one
// record at level, the line as its message.
func LineWriter(l *slog.Logger, level slog.Level) io.Writer {
	return &lineWriter{l: l, level: level}
}

type lineWriter struct {
	l     *slog.Logger
	level slog.Level
	mu    sync.Mutex
	buf   []byte
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.emit(string(w.buf[:i]))
		w.buf = w.buf[i+1:]
	}
	// log.Logger writes whole lines; anything else is flushed when long.
	if len(w.buf) > maxLine {
		w.emit(string(w.buf))
		w.buf = w.buf[:0]
	}
	return len(p), nil
}

// maxLine bounds a line held back waiting for its newline.
const maxLine = 64 << 10

func (w *lineWriter) emit(line string) {
	line = strings.TrimRight(line, "\r ")
	if strings.TrimSpace(line) == "" {
		return
	}
	w.l.Log(context.Background(), w.level, line)
}

// captureStdout replaces os.Stdout with a pipe whose lines are logged.
// The returned function restores os.Stdout once the pipe is drained.
func captureStdout(l *slog.Logger) (stop func()) {
	r, w, err := os.Pipe()
	if err != nil {
		l.Warn("cannot capture standard output; library prints there stay unstructured", "error", err)
		return func() {}
	}
	orig := os.Stdout
	os.Stdout = w
	done := make(chan struct{})
	go func() {
		defer close(done)
		br := bufio.NewReaderSize(r, maxLine)
		for {
			// ReadSlice hands back at most maxLine bytes: an endless line
			// is logged in pieces rather than held.
			chunk, err := br.ReadSlice('\n')
			if line := strings.TrimRight(string(chunk), "\r\n "); strings.TrimSpace(line) != "" {
				l.Info(line)
			}
			if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
				break
			}
		}
		_ = r.Close()
	}()
	return func() {
		os.Stdout = orig
		_ = w.Close()
		<-done
	}
}
