package logging

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestQuietLibraryRecords: a library's ERROR is written at WARN, the same
// record (message and cluster, watch or peer) at most once per period
// with the count left out, and a record of another cluster or watch is
// its own.
func TestQuietLibraryRecords(t *testing.T) {
	var buf bytes.Buffer
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	l := slog.New(Quiet(slog.NewJSONHandler(&buf, nil), time.Minute, func() time.Time { return now }))
	watchFails := func(cluster, typ string) {
		l.With("cluster", cluster).Error("Failed to watch", "err", errors.New("connection refused: "+now.String()), "type", typ)
	}
	for range 30 { // 30 s of a failing watch, one a second, on two clusters
		watchFails("a", "*v1.Lease")
		watchFails("a", "*v1.Node")
		watchFails("b", "*v1.Lease")
		now = now.Add(time.Second)
	}
	now = now.Add(30 * time.Second)
	watchFails("a", "*v1.Lease")
	l.Info("Caches are synced")

	var lines []map[string]any
	for _, s := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(s), &m), s)
		lines = append(lines, m)
	}
	require.Len(t, lines, 5, buf.String())
	for _, m := range lines[:4] {
		assert.Equal(t, "WARN", m["level"])
		assert.NotEmpty(t, m["cluster"])
	}
	assert.Equal(t, "a", lines[3]["cluster"])
	assert.InDelta(t, 29.0, lines[3]["suppressed"], 0)
	assert.Equal(t, "INFO", lines[4]["level"])
	assert.True(t, l.Enabled(t.Context(), slog.LevelError))
}
