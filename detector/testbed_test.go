package detector_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/detector"
	"github.com/fenced-project/fenced/kube"
	"github.com/fenced-project/fenced/tests/testbed"
)

// verdictLog is the Publisher and ObservationSink of the test-bed tests.
type verdictLog struct {
	mu      sync.Mutex
	changes []detector.Verdict
	inputs  map[string]arrayclients.Node
}

func newVerdictLog() *verdictLog { return &verdictLog{inputs: map[string]arrayclients.Node{}} }

func (l *verdictLog) PublishVerdicts(_ context.Context, cs []detector.Verdict) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.changes = append(l.changes, cs...)
}

func (l *verdictLog) RecordProbe(context.Context, detector.ProbeObservation) error { return nil }

func (l *verdictLog) RecordNodeInputs(_ context.Context, n arrayclients.Node) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.inputs[n.Name] = n
	return nil
}

// latest returns the node's last published verdict.
func (l *verdictLog) latest(node string) detector.Verdict {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := len(l.changes) - 1; i >= 0; i-- {
		if l.changes[i].Node == node {
			return l.changes[i]
		}
	}
	return detector.Verdict{}
}

// mark returns a position in the log for since.
func (l *verdictLog) mark() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.changes)
}

// since returns the changes published after mark with the given state.
func (l *verdictLog) since(mark int, s detector.State) []detector.Verdict {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []detector.Verdict
	for _, c := range l.changes[mark:] {
		if c.State == s {
			out = append(out, c)
		}
	}
	return out
}

// testbedPolicy scales the defaults down to kwok Leases of 8 s (renewed
// every 2 s) so that each scenario takes seconds, not minutes.
func testbedPolicy() detector.Policy {
	p := detector.DefaultPolicy()
	p.HeartbeatGrace = 8 * time.Second
	p.ProbeAfter = 4 * time.Second
	p.PollInterval = time.Second
	p.ProbeTimeout = time.Second
	p.EvidenceMaxAge = 4 * time.Second
	p.IOSampleWindow = 2 * time.Second
	p.SettlePeriod = 6 * time.Second
	p.APICheckInterval = time.Second
	p.APICheckTimeout = time.Second
	p.APICheckMaxAge = 3 * time.Second
	p.WatchLagTolerance = 3 * time.Second
	p.StormCooldown = 30 * time.Second
	return p
}

// startRunner runs a detector against the test bed until the test ends.
func startRunner(t testing.TB, cp *testbed.ControlPlane, p detector.Policy) (*detector.Runner, *verdictLog) {
	t.Helper()
	cl, err := kube.NewCluster("bed", kube.Config{Kubeconfig: cp.KubeconfigPath}, nil)
	require.NoError(t, err)
	log := newVerdictLog()
	r, err := detector.NewRunner(detector.RunnerConfig{
		Cluster: "bed", Replica: "r1", Policy: p, API: cl,
		Sink: log, Publisher: log,
		Logger: slog.New(slog.DiscardHandler),
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	return r, log
}

func allHealthy(r *detector.Runner, n int) func() bool {
	return func() bool {
		st := r.Status()
		return st.Doubt == "" && st.Counts[detector.Healthy] == n
	}
}

func TestTestbedVerdicts(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a real control plane: skipped under -short")
	}
	cp := testbed.Start(t, testbed.Options{NodeLeaseDurationSeconds: 8})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	const n = 4
	nodes, err := cp.AddNodes(ctx, testbed.NodeSpecs("w", n)...)
	require.NoError(t, err)
	names := make([]string, n)
	for i, nd := range nodes {
		names[i] = nd.Name()
	}
	require.NoError(t, cp.WaitNodesReady(ctx, names...))
	p := testbedPolicy()
	wait := 3 * time.Minute
	tick := 200 * time.Millisecond

	t.Run("kill a node: Failed; its identity inputs were learned while healthy", func(t *testing.T) {
		r, log := startRunner(t, cp, p)
		require.Eventually(t, allHealthy(r, n), wait, tick)
		require.Eventually(t, func() bool {
			log.mu.Lock()
			defer log.mu.Unlock()
			return len(log.inputs) == n
		}, wait, tick)
		log.mu.Lock()
		in := log.inputs[names[0]]
		log.mu.Unlock()
		assert.Equal(t, nodes[0].Spec.CSINodeIDs(), in.CSINodeIDs)
		assert.Equal(t, []string{nodes[0].IP()}, in.Addresses)

		mark := log.mark()
		require.NoError(t, nodes[0].Kill(ctx))
		require.Eventually(t, func() bool { return log.latest(names[0]).State == detector.Failed }, wait, tick)
		v := log.latest(names[0])
		assert.Equal(t, []string{"kubelet"}, v.Evidence.CorroboratedBy)
		assert.False(t, v.Partitioned)
		assert.False(t, v.Evidence.LeaseMissing)
		assert.Equal(t, 0, v.Evidence.Kubelet.Reachable)
		assert.Len(t, log.since(mark, detector.Failed), 1, "one Failed verdict, only for the killed node")

		require.NoError(t, nodes[0].Return(ctx))
		require.Eventually(t, func() bool { return log.latest(names[0]).State == detector.Healthy }, wait, tick)
		back := log.latest(names[0])
		assert.GreaterOrEqual(t, back.Since.Sub(v.Evidence.FailedAt), p.SettlePeriod, "healthy only after the settle period")
	})

	t.Run("hang a node (kubelet port open): the partitioned path, never Failed", func(t *testing.T) {
		r, log := startRunner(t, cp, p)
		require.Eventually(t, allHealthy(r, n), wait, tick)
		mark := log.mark()
		require.NoError(t, nodes[1].Hang(ctx))
		require.Eventually(t, func() bool {
			v := log.latest(names[1])
			return v.State == detector.Suspect && v.Reason == detector.ReasonPartitioned
		}, wait, tick)
		v := log.latest(names[1])
		assert.True(t, v.Partitioned)
		assert.Equal(t, 1, v.Evidence.Kubelet.Reachable)
		// Hung for two more graces: never Failed.
		assert.Never(t, func() bool { return len(log.since(mark, detector.Failed)) > 0 }, 2*p.HeartbeatGrace, tick)
		st := r.Status()
		require.Len(t, st.Nodes, 1)
		assert.Equal(t, detector.Suspect, st.Nodes[0].State)
		assert.Empty(t, log.since(mark, detector.Failed))

		require.NoError(t, nodes[1].Return(ctx))
		require.Eventually(t, allHealthy(r, n), wait, tick)
	})

	t.Run("stop the API server: Blocked, then Healthy after restart, never Failed", func(t *testing.T) {
		// Pure heartbeat STONITH: the strictest test, since nothing but the
		// heartbeat stands between an outage and a Failed verdict.
		pn := p
		pn.Corroboration = detector.CorroborateNone
		r, log := startRunner(t, cp, pn)
		require.Eventually(t, allHealthy(r, n), wait, tick)
		mark := log.mark()
		require.NoError(t, cp.StopAPIServer())
		require.Eventually(t, func() bool {
			st := r.Status()
			return st.Doubt == detector.ReasonAPIServerUnreachable && st.Counts[detector.Blocked] == n
		}, wait, tick)
		for _, name := range names {
			assert.Equal(t, detector.ReasonAPIServerUnreachable, log.latest(name).Reason)
		}
		// Down for longer than the grace: every Lease is older than it when
		// the API server returns.
		assert.Never(t, func() bool { return r.Status().Counts[detector.Blocked] != n }, p.HeartbeatGrace+2*time.Second, tick)
		require.NoError(t, cp.StartAPIServer(ctx))
		// client-go's reflector retries the broken watches with an
		// exponential backoff (up to 30 s, jittered): the detector stays
		// Blocked (watch-stale) until the Lease watch has resumed.
		require.Eventually(t, allHealthy(r, n), wait, tick)
		// Stay up for a grace and a settle period more: still all Healthy.
		assert.Never(t, func() bool { return r.Status().Counts[detector.Healthy] != n }, p.HeartbeatGrace+p.SettlePeriod, tick)
		assert.Empty(t, log.since(mark, detector.Failed))
		assert.Empty(t, log.since(mark, detector.Suspect))
		if t.Failed() {
			st := r.Status()
			t.Logf("status: doubt=%q counts=%v self=%+v", st.Doubt, st.Counts, st.Self)
			log.mu.Lock()
			for _, c := range log.changes[mark:] {
				t.Logf("change %s %s/%s at %s", c.Node, c.State, c.Reason, c.Since.Format(time.StampMilli))
			}
			log.mu.Unlock()
		}
	})
}
