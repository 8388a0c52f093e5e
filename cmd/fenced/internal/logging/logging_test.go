package logging

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/coreos/go-systemd/v22/journal"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const planted = "PLANTED-pw-7f3a9c"

type entry struct {
	msg  string
	prio journal.Priority
	vars map[string]string
}

type fakeJournal struct {
	mu      sync.Mutex
	entries []entry
}

func (f *fakeJournal) send(msg string, prio journal.Priority, vars map[string]string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.entries = append(f.entries, entry{msg, prio, vars})
	return nil
}

func TestJournalFields(t *testing.T) {
	fj := &fakeJournal{}
	log := slog.New(NewJournalHandler(slog.LevelDebug, fj.send))
	log.With("cluster", "prod").Warn("fence failed", "node", "worker-1", "array", "pstore-1", "fenceID", "f-42",
		slog.Group("raft", "term", 7), "message", "shadow")
	log.Debug("probe")
	log.Error("boom")

	require.Len(t, fj.entries, 3)
	e := fj.entries[0]
	assert.Equal(t, "fence failed", e.msg)
	assert.Equal(t, journal.PriWarning, e.prio)
	assert.Equal(t, "prod", e.vars["CLUSTER"])
	assert.Equal(t, "worker-1", e.vars["NODE"])
	assert.Equal(t, "pstore-1", e.vars["ARRAY"])
	assert.Equal(t, "f-42", e.vars["FENCE_ID"])
	assert.Equal(t, "7", e.vars["RAFT_TERM"])
	assert.Equal(t, "shadow", e.vars["ATTR_MESSAGE"])
	assert.Equal(t, "fenced", e.vars["SYSLOG_IDENTIFIER"])
	assert.Equal(t, journal.PriDebug, fj.entries[1].prio)
	assert.Equal(t, journal.PriErr, fj.entries[2].prio)

	filtered := &fakeJournal{}
	slog.New(NewJournalHandler(slog.LevelInfo, filtered.send)).Debug("hidden")
	assert.Empty(t, filtered.entries)
}

func TestFieldName(t *testing.T) {
	for in, want := range map[string]string{
		"cluster": "CLUSTER", "fenceID": "FENCE_ID", "FENCE_ID": "FENCE_ID", "httpServer": "HTTP_SERVER",
		"HTTPServer": "HTTP_SERVER", "node-name": "NODE_NAME", "_x": "F_X", "9lives": "F_9LIVES", "": "F_", "ärger": "F_RGER",
	} {
		assert.Equal(t, want, FieldName(in), in)
	}
}

type leaky struct{ Password string }

// TestRedaction plants a password and logs it every way a careless caller
// could; it must never reach the output, in text, JSON or the journal.
func TestRedaction(t *testing.T) {
	red := NewRedactor()
	red.Add(planted, "", "ab")
	var buf bytes.Buffer
	fj := &fakeJournal{}
	loggers := []*slog.Logger{}
	for _, format := range []string{"text", "json"} {
		l, err := New(Options{Format: format, Level: "debug", Output: Stream, Writer: &buf, Redactor: red})
		require.NoError(t, err)
		loggers = append(loggers, l)
	}
	loggers = append(loggers, slog.New(NewRedactingHandler(NewJournalHandler(slog.LevelDebug, fj.send), red)))
	for _, l := range loggers {
		l.Info("login with " + planted)
		l.Info("x", "pw", planted, "password", "other-value", "passwordFile", "/etc/fenced/pw")
		l.Info("x", "err", fmt.Errorf("auth as admin:%s failed", planted))
		l.Info("x", "struct", leaky{Password: planted}, "ptr", &leaky{Password: planted})
		l.Info("x", slog.Group("array", "secret", "s3", "note", "pw="+planted))
		l.With("auth", planted).WithGroup("g").Info("x", "token", "tok-123")
		l.Info("x", "errs", errors.Join(errors.New(planted)))
	}
	out := buf.String()
	for _, e := range fj.entries {
		out += e.msg + fmt.Sprint(e.vars)
	}
	assert.NotContains(t, out, planted)
	assert.NotContains(t, out, "other-value")
	assert.NotContains(t, out, "tok-123")
	assert.Contains(t, out, "/etc/fenced/pw", "file paths are not secrets")
	assert.Contains(t, out, Redacted)
}

func TestNewRejectsBadOptions(t *testing.T) {
	_, err := New(Options{Level: "loud", Output: Stream, Writer: &bytes.Buffer{}})
	require.Error(t, err)
	_, err = New(Options{Format: "xml", Output: Stream, Writer: &bytes.Buffer{}})
	require.Error(t, err)
	_, err = New(Options{Output: Stream})
	require.Error(t, err)
	l, err := New(Options{Format: "json", Level: "warn", Output: Stream, Writer: &bytes.Buffer{}})
	require.NoError(t, err)
	assert.False(t, l.Enabled(context.Background(), slog.LevelInfo))
}

func TestKey(t *testing.T) {
	for in, want := range map[string]string{
		"node": "node", "fenceID": "fenceID", "err": "error", "error": "error", "retry_in": "retryIn",
		"was_member": "wasMember", "FENCE_ID": "fenceID", "fence_id": "fenceID", "node-name": "nodeName",
		"Array": "array", "URI": "uri", "reflector.name": "reflectorName", "apiVersion": "apiVersion", "_": "_",
	} {
		assert.Equal(t, want, Key(in), in)
	}
}

// TestOneShape: whatever key style or duration a caller (or a library)
// logs with, every output shows lowerCamelCase keys and seconds.
func TestOneShape(t *testing.T) {
	var buf bytes.Buffer
	l, err := New(Options{Format: "json", Level: "debug", Output: Stream, Writer: &buf})
	require.NoError(t, err)
	l.With("retry_in", 1500*time.Millisecond).Info("x", "err", errors.New("boom"), "fence_id", "f-1",
		slog.Group("raft_peer", "last_contact", 250*time.Millisecond))
	var rec map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &rec), buf.String())
	assert.InDelta(t, 1.5, rec["retryIn"], 1e-9)
	assert.Equal(t, "boom", rec["error"])
	assert.Equal(t, "f-1", rec["fenceID"])
	assert.InDelta(t, 0.25, rec["raftPeer"].(map[string]any)["lastContact"], 1e-9)

	fj := &fakeJournal{}
	slog.New(NewRedactingHandler(NewJournalHandler(slog.LevelDebug, fj.send), NewRedactor())).
		Info("x", "fence", "not-this", "fence_id", "f-2", "duration", 2*time.Second)
	require.Len(t, fj.entries, 1)
	assert.Equal(t, "f-2", fj.entries[0].vars["FENCE_ID"])
	assert.Equal(t, "2", fj.entries[0].vars["DURATION"])
}

func TestNamedLevel(t *testing.T) {
	for in, want := range map[slog.Level]slog.Level{
		slog.LevelDebug - 4: slog.LevelDebug - 4, slog.LevelDebug: slog.LevelDebug, -3: slog.LevelDebug, -1: slog.LevelDebug,
		slog.LevelInfo: slog.LevelInfo, 2: slog.LevelInfo, slog.LevelWarn: slog.LevelWarn, 7: slog.LevelWarn, 12: slog.LevelError,
	} {
		assert.Equal(t, want, NamedLevel(in), "%d", in)
	}
}

// TestJournalOutputWithoutJournald: asking for journal output where
// journald's socket is missing is an error, not a silent loss of every
// record; auto falls back to the stream.
func TestJournalOutputWithoutJournald(t *testing.T) {
	none := func() bool { return false }
	_, err := New(Options{Output: Journal, JournalEnabled: none})
	require.ErrorContains(t, err, "journald's socket")
	var buf bytes.Buffer
	l, err := New(Options{Output: Auto, JournalEnabled: none, Writer: &buf})
	require.NoError(t, err)
	l.Info("hello")
	assert.Contains(t, buf.String(), "hello")
}
