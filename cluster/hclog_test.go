package cluster

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/internal/lograte"
)

// topLevelKeys returns the keys of one JSON object in order, repeats kept.
func topLevelKeys(t *testing.T, line string) []string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(line))
	tok, err := dec.Token()
	require.NoError(t, err)
	require.Equal(t, json.Delim('{'), tok, line)
	var keys []string
	for dec.More() {
		k, err := dec.Token()
		require.NoError(t, err, line)
		keys = append(keys, k.(string))
		var v json.RawMessage
		require.NoError(t, dec.Decode(&v), line)
	}
	return keys
}

type stringer struct{} // JSON would show {}

func (stringer) String() string { return "Node at 10.0.0.1:7000 [Follower]" }

// TestHCLogRecords: Raft's lines carry the component once and the hclog
// name once (as module), however often the logger was named, and values
// hclog would format (hclog.Fmt("%+v", ...)) arrive formatted, without
// the verb or a Go struct dump.
func TestHCLogRecords(t *testing.T) {
	var buf bytes.Buffer
	base := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})).With("component", "raft")
	hl := newHCLog(base).Named("raft")
	type server struct{ ID, Address string }
	hl.With("term", 3).Named("snapshots").Info("updating configuration",
		"servers", hclog.Fmt("%+v", []server{{"r1", "10.0.0.1:7000"}}), "mask", hclog.Hex(255),
		"follower", stringer{}, "lastContact", 1500*time.Millisecond)
	hl.Trace("hidden at debug")

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 1, buf.String())
	keys := topLevelKeys(t, lines[0])
	count := map[string]int{}
	for _, k := range keys {
		count[k]++
	}
	for k, n := range count {
		assert.Equal(t, 1, n, "key %q repeated in %s", k, lines[0])
	}
	var rec map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &rec))
	assert.Equal(t, "raft", rec["component"])
	assert.Equal(t, "raft.snapshots", rec["module"])
	assert.Equal(t, "[{r1 10.0.0.1:7000}]", rec["servers"])
	assert.Equal(t, "0xff", rec["mask"])
	assert.InDelta(t, 3, rec["term"], 0)
	assert.Equal(t, "Node at 10.0.0.1:7000 [Follower]", rec["follower"])
	assert.InDelta(t, float64(1500*time.Millisecond), rec["lastContact"], 0, "a duration stays a duration (the handler makes it seconds)")
	assert.NotContains(t, lines[0], "%+v")
	assert.NotContains(t, lines[0], "ID:")
}

// TestHCLogPeerUnreachable: raft's reports that a peer does not answer,
// written at ERROR each heartbeat backoff while a replica is down, come
// out at WARN, once per message and peer a minute, with the count left
// out; the peer is a string whether raft logs a Server or an address.
func TestHCLogPeerUnreachable(t *testing.T) {
	var buf bytes.Buffer
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	h := &slogHCLog{l: slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})),
		limit: lograte.New(time.Minute, func() time.Time { return now })}
	r := h.Named("raft")
	down := raft.Server{Suffrage: raft.Voter, ID: "r3", Address: "127.0.0.3:7000"}
	for i := range 60 { // a minute of heartbeats and appendEntries, one a second
		r.Error("failed to appendEntries to", "peer", down, "error", "connection refused")
		r.Error("failed to heartbeat to", "peer", down.Address, "backoff time", time.Second, "error", "connection refused")
		r.Warn("failed to contact", "server-id", down.ID, "time", time.Duration(i)*time.Second)
		now = now.Add(time.Second)
	}
	r.Error("failed to appendEntries to", "peer", down, "error", "connection refused")
	r.Error("failed to commit logs", "error", "disk full") // not about a peer: as raft wrote it

	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m), l)
		lines = append(lines, m)
	}
	require.Len(t, lines, 5, "%s", buf.String())
	for _, m := range lines[:4] {
		assert.Equal(t, "WARN", m["level"], m)
		if p, ok := m["peer"]; ok {
			assert.IsType(t, "", p, "peer is a string: %v", m)
		}
	}
	assert.Equal(t, "r3 (127.0.0.3:7000)", lines[0]["peer"])
	assert.Equal(t, "127.0.0.3:7000", lines[1]["peer"])
	assert.Equal(t, "failed to appendEntries to", lines[3]["msg"])
	assert.InDelta(t, 59.0, lines[3]["suppressed"], 0, "the minute's left-out records are counted")
	assert.Equal(t, "ERROR", lines[4]["level"])
}
