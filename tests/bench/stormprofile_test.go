package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/tests/e2e"
)

func TestParsePprofTop(t *testing.T) {
	out := `File: fenced
Type: cpu
Time: 2026-11-28 17:00:00 UTC
Duration: 60.10s, Total samples = 1.50mins (150.00%)
Showing nodes accounting for 40s, 44% of 90s total
Dropped 900 nodes (cum <= 0.45s)
Showing top 3 nodes out of 400
      flat  flat%   sum%        cum   cum%
     12.5s 13.89% 13.89%      12.5s 13.89%  runtime.futex
      0.45s  0.50% 14.39%     30.00s 33.33%  crypto/tls.(*Conn).Read
      0.01s 0.011% 14.40%      0.01s 0.011%  k8s.io/apiserver/pkg/server.(*x).y
`
	total, top, err := parsePprofTop(out, 2)
	require.NoError(t, err)
	assert.InDelta(t, 90.0, total, 1e-9)
	require.Len(t, top, 2)
	assert.Equal(t, TopFunc{Function: "runtime.futex", Flat: 12.5, Cum: 12.5}, top[0])
	assert.Equal(t, "crypto/tls.(*Conn).Read", top[1].Function)
	assert.InDelta(t, 30.0, top[1].Cum, 1e-9)

	_, _, err = parsePprofTop("Duration: 1s, Total samples = many (1%)\n", 2)
	assert.ErrorContains(t, err, "many")
}

func TestRenderStormProfiles(t *testing.T) {
	assert.Empty(t, renderStormProfiles(nil))
	md := renderStormProfiles([]ProcessProfile{{Process: "fenced-a", WindowSeconds: 60, CPUSeconds: 12.34,
		Top: []TopFunc{{Function: "a|b", Flat: 1}}}, {Process: "kube-apiserver", Error: "profile kube-apiserver: 403"}})
	assert.Contains(t, md, "| fenced-a | 60 | 12.3 | a\\|b 1.00 |")
	assert.Contains(t, md, "| kube-apiserver | 0 | 0.0 | (profile kube-apiserver: 403) |")
}

// TestStormProfilerOnTheTestBed profiles the replicas and the
// kube-apiserver of a small harness for one short segment each and reads
// the profiles back.
func TestStormProfilerOnTheTestBed(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the end-to-end harness")
	}
	h := e2e.Start(t, e2e.Options{Nodes: 2, Pprof: true})
	h.WaitLeader(2 * time.Minute)
	// A leader is elected once two replicas answer; the third may still
	// be opening its HTTP listener. Profile when every replica serves.
	for _, id := range h.IDs {
		require.Eventually(t, func() bool {
			_, err := h.Replicas[id].Status(t.Context())
			return err == nil
		}, 2*time.Minute, 100*time.Millisecond, "replica %s never served /status", id)
	}
	sp, err := newStormProfiler(h, t.TempDir())
	require.NoError(t, err)
	sp.segLen = time.Second
	sp.Start(context.Background())
	// One segment each, then stop: Stop waits for the segment under way.
	require.Eventually(t, func() bool {
		sp.mu.Lock()
		defer sp.mu.Unlock()
		return len(sp.files)+len(sp.errs) == len(sp.targets)
	}, time.Minute, 100*time.Millisecond)
	ps, cpu := sp.Stop()
	require.Len(t, ps, len(h.IDs)+2)
	for _, p := range ps {
		assert.Empty(t, p.Error, p.Process)
		assert.NotEmpty(t, p.Files, p.Process)
		assert.Positive(t, p.WindowSeconds, p.Process)
	}
	assert.Equal(t, "kube-apiserver", ps[len(ps)-2].Process)
	assert.Equal(t, benchProcess, ps[len(ps)-1].Process, "this process: the array simulators")
	var commands []string
	for _, c := range cpu {
		commands = append(commands, c.Command)
	}
	assert.Contains(t, commands, "fenced", "the replicas' CPU time is read from /proc")
}
