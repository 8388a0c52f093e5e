package detector

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
)

// countingArray is a health source that counts the calls per node.
type countingArray struct {
	mu    sync.Mutex
	calls map[string]int
}

func (c *countingArray) Health(_ context.Context, id arrayclients.Identity) (arrayclients.Health, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[id.Node]++
	return arrayclients.Health{Connectivity: arrayclients.Disconnected, IO: arrayclients.IOIdle}, nil
}

func (c *countingArray) count(node string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[node]
}

// twoArrays gives every node an identity on pflex and pstore.
type twoArrays struct{}

func (twoArrays) NodeIdentities(_, node string) ([]arrayclients.Identity, []string) {
	return []arrayclients.Identity{{Array: "pflex", Node: node}, {Array: "pstore", Node: node}}, nil
}

// footprints places w0's volumes on pflex and w1's somewhere fenced
// cannot cut.
type footprints struct{}

func (footprints) WitnessArrays(_, node string) ([]string, bool) {
	if node == "w1" {
		return []string{"pflex"}, false
	}
	return []string{"pflex"}, true
}

// A node probed only for an early verdict has only its witness arrays
// asked (those holding its footprint; none when the footprint cannot be
// witnessed whole); a node probed because it is late has every array
// where it has an identity asked, as the corroboration at the grace needs.
func TestEarlyProbesAskOnlyTheWitnessArrays(t *testing.T) {
	pflex := &countingArray{calls: map[string]int{}}
	pstore := &countingArray{calls: map[string]int{}}
	r, err := NewRunner(RunnerConfig{
		Cluster: "c1", Replica: "r1", Policy: fastPolicy(), API: newFakeAPI(2),
		Arrays:     map[string]HealthSource{"pflex": pflex, "pstore": pstore},
		Identities: twoArrays{}, Footprints: footprints{}, Logger: slog.New(slog.DiscardHandler),
	})
	require.NoError(t, err)
	ctx := context.Background()

	r.probeArrays(ctx, "w0", true, true)
	assert.Equal(t, 1, pflex.count("w0"), "the witness")
	assert.Equal(t, 0, pstore.count("w0"), "not a witness: its answer cannot change an early verdict")
	r.probeArrays(ctx, "w1", true, true)
	assert.Equal(t, 0, pflex.count("w1")+pstore.count("w1"), "no early verdict possible: no array asked")

	r.probeArrays(ctx, "w0", false, true)
	assert.Equal(t, 2, pflex.count("w0"))
	assert.Equal(t, 1, pstore.count("w0"), "late: every identity array")
	r.probeArrays(ctx, "w1", false, true)
	assert.Equal(t, 1, pflex.count("w1"))
	assert.Equal(t, 1, pstore.count("w1"))
}

// The machine names the nodes probed only for an early verdict: from
// probeFrom until the heartbeat is probeAfter old, not after.
func TestWitnessesOnlyUntilTheNodeIsLate(t *testing.T) {
	p := earlyPolicy()
	w := newWorld(t, p, 3)
	w.run(30 * time.Second)
	for w.lastRenewSeen["node-01"] != w.now {
		w.run(time.Second)
	}
	renewed := w.now
	w.renewing["node-01"] = false // kubelet and arrays still answer: no verdict
	var early, late int
	for w.now.Sub(renewed) < p.HeartbeatGrace {
		w.run(time.Second)
		age := w.verdict("node-01").EvaluatedAt.Sub(renewed) // at the last evaluation
		probed := slices.Contains(w.lastEval.Probe, "node-01")
		only := slices.Contains(w.lastEval.WitnessesOnly, "node-01")
		switch {
		case age < p.Early.ProbeFrom:
			assert.False(t, probed, "at %v", age)
		case age < p.ProbeAfter:
			if probed {
				early++
				assert.True(t, only, "at %v", age)
			}
		default:
			if probed {
				late++
				assert.False(t, only, "at %v", age)
			}
		}
	}
	assert.Positive(t, early, "probed for an early verdict")
	assert.Positive(t, late, "probed as late")
}

// leading is a Lead that answers what it holds.
type leading struct{ on atomic.Bool }

func (l *leading) Leading() bool { return l.on.Load() }

// Only the leader asks the arrays: a follower probes the kubelet and reads
// the Lease back (its kubelet probes are the leader's vantage), but its
// array samples would feed only its own status.
func TestOnlyTheLeaderAsksTheArrays(t *testing.T) {
	pflex := &countingArray{calls: map[string]int{}}
	pstore := &countingArray{calls: map[string]int{}}
	lead := &leading{}
	r, err := NewRunner(RunnerConfig{
		Cluster: "c1", Replica: "r1", Policy: fastPolicy(), API: newFakeAPI(2),
		Arrays:     map[string]HealthSource{"pflex": pflex, "pstore": pstore},
		Identities: twoArrays{}, Lead: lead, Logger: slog.New(slog.DiscardHandler),
	})
	require.NoError(t, err)
	ctx := context.Background()
	r.probeNode(ctx, "w0", false)
	assert.Zero(t, pflex.count("w0")+pstore.count("w0"), "a follower asks no array")
	lead.on.Store(true)
	r.probeNode(ctx, "w0", false)
	assert.Equal(t, 1, pflex.count("w0"))
	assert.Equal(t, 1, pstore.count("w0"))
}
