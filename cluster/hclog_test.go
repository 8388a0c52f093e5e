package cluster

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
