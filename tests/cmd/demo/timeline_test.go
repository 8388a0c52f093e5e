package main

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTimelinePrintsInTimeOrderAfterHold(t *testing.T) {
	var out bytes.Buffer
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tl := newTimeline(&out, t0, 10*time.Second)
	now := t0.Add(20 * time.Second)
	tl.add("b", event{At: t0.Add(9 * time.Second), Source: srcLedger, Text: "fenced"}, now)
	tl.add("a", event{At: t0.Add(-2 * time.Second), Source: srcAPI, Text: "heartbeat"}, now)
	assert.False(t, tl.add("a", event{At: t0, Source: srcAPI, Text: "again"}, now), "a key is added once")

	tl.flush(now.Add(time.Minute), false)
	assert.Empty(t, out.String(), "nothing prints before release")
	tl.release()
	tl.flush(now.Add(time.Second), false)
	assert.Empty(t, out.String(), "events are held back")
	tl.flush(now.Add(2*time.Second), false)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 2)
	assert.Contains(t, lines[0], "-2.000s  api       heartbeat")
	assert.Contains(t, lines[1], "+9.000s  ledger    fenced")

	// A young event holds back the later ones.
	out.Reset()
	later := now.Add(10 * time.Second)
	tl.add("c", event{At: t0.Add(10 * time.Second), Source: srcArray, Text: "young"}, later)
	tl.add("d", event{At: t0.Add(11 * time.Second), Source: srcAPI, Text: "old"}, now)
	tl.flush(later.Add(100*time.Millisecond), false)
	assert.Empty(t, out.String())
	tl.flush(later, true)
	assert.Equal(t, 2, strings.Count(out.String(), "\n"))
}

func TestTimelineSummary(t *testing.T) {
	var out bytes.Buffer
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tl := newTimeline(&out, t0, 10*time.Second)
	tl.mark(mKill, t0)
	tl.mark(mHeartbeat, t0.Add(-2*time.Second))
	tl.mark(mFailed, t0.Add(9*time.Second))
	tl.mark(mFailed, t0.Add(99*time.Second)) // the first mark wins
	tl.mark(mReplacement, t0.Add(10*time.Second))
	tl.summary()
	s := out.String()
	assert.Contains(t, s, "last heartbeat       -> verdict Failed         11.000s")
	assert.Contains(t, s, "powered off          -> replacement Running    10.000s")
	assert.Contains(t, s, "n/a", "missing milestones")
}

func TestResolvedPerArray(t *testing.T) {
	text := `# HELP fenced_array_requests_total x
fenced_array_requests_total{array="pflex-1",op="resolve",result="ok"} 4
fenced_array_requests_total{array="pflex-1",op="resolve",result="error"} 7
fenced_array_requests_total{array="unity-1",op="plan",result="ok"} 3
fenced_array_requests_total{array="unity-1",op="resolve",result="ok"} 2.5
`
	assert.Equal(t, map[string]float64{"pflex-1": 4, "unity-1": 2.5}, resolvedPerArray(text))
}

func TestParseFlags(t *testing.T) {
	o, err := parseFlags(nil, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, options{nodes: 4, timeout: 5 * time.Minute}, o)
	_, err = parseFlags([]string{"--nodes", "3"}, io.Discard)
	require.ErrorContains(t, err, "--nodes: 3")
	_, err = parseFlags([]string{"--timeout", "-1s"}, io.Discard)
	require.ErrorContains(t, err, "--timeout")
	_, err = parseFlags([]string{"extra"}, io.Discard)
	require.ErrorContains(t, err, "unexpected arguments")
}

func TestVerdictRE(t *testing.T) {
	m := verdictRE.FindStringSubmatch("verdict failed (heartbeat-stale) since 2026-11-21T22:20:01.069Z, corroborated by kubelet, array")
	require.NotNil(t, m)
	assert.Equal(t, []string{"heartbeat-stale", "2026-11-21T22:20:01.069Z", "kubelet, array"}, m[1:])
}
