package detector

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
)

func TestMachineDecisions(t *testing.T) {
	type tc struct {
		name   string
		nodes  int
		policy func(*Policy)
		setup  func(w *world)
		check  func(t *testing.T, w *world)
	}
	// deadWithin asserts that the node was declared Failed no later than
	// grace + one poll after the machine last saw its Lease renewed.
	deadWithin := func(t *testing.T, w *world, name string) {
		t.Helper()
		v := w.verdict(name)
		require.Equal(t, Failed, v.State, "verdict %+v", v)
		lat := v.Evidence.FailedAt.Sub(w.lastRenewSeen[name])
		assert.LessOrEqual(t, lat, w.policy.HeartbeatGrace+w.policy.PollInterval, "detection latency")
		assert.Equal(t, []State{Healthy, Failed}, w.states(name))
	}
	tcs := []tc{
		{
			name: "dead node is Failed within grace plus one poll", nodes: 5,
			setup: func(w *world) {
				w.run(30 * time.Second)
				w.kill("node-02")
				w.run(70 * time.Second)
			},
			check: func(t *testing.T, w *world) {
				deadWithin(t, w, "node-02")
				assert.ElementsMatch(t, []string{"kubelet", "array"}, w.verdict("node-02").Evidence.CorroboratedBy)
				assert.Equal(t, []string{"node-02"}, w.ever(Failed))
				assert.Equal(t, 4, w.lastEval.Counts[Healthy])
			},
		},
	}
	for _, c := range []Corroboration{CorroborateKubelet, CorroborateArray, CorroborateEither, CorroborateBoth, CorroborateNone} {
		tcs = append(tcs, tc{
			name: "dead node is Failed within grace plus one poll under corroboration " + string(c), nodes: 5,
			policy: func(p *Policy) { p.Corroboration = c },
			setup: func(w *world) {
				w.run(30 * time.Second)
				w.kill("node-03")
				w.run(70 * time.Second)
			},
			check: func(t *testing.T, w *world) { deadWithin(t, w, "node-03") },
		})
	}
	// Kubelet down, arrays still see I/O: the policy decides.
	for c, want := range map[Corroboration]State{
		CorroborateKubelet: Failed,
		CorroborateArray:   Suspect,
		CorroborateEither:  Failed,
		CorroborateBoth:    Suspect,
		CorroborateNone:    Failed,
	} {
		tcs = append(tcs, tc{
			name: "kubelet down but array I/O active under corroboration " + string(c), nodes: 5,
			policy: func(p *Policy) { p.Corroboration = c },
			setup: func(w *world) {
				w.run(30 * time.Second)
				w.renewing["node-01"] = false
				w.kubelet["node-01"] = func(string) bool { return false }
				w.run(120 * time.Second)
			},
			check: func(t *testing.T, w *world) {
				v := w.verdict("node-01")
				assert.Equal(t, want, v.State)
				assert.Equal(t, []State{Healthy, want}, w.states("node-01"))
				assert.Equal(t, arrayclients.IOActive, v.Evidence.Arrays[0].IO)
				assert.False(t, v.Partitioned)
			},
		})
	}
	tcs = append(tcs, []tc{
		{
			name: "API server unreachable from this replica blocks every node, then all return Healthy", nodes: 6,
			setup: func(w *world) {
				w.run(20 * time.Second)
				w.apiUp = false
				// Longer than the grace: no renewal is seen, kubelets are
				// unreachable too (the management network is cut).
				for _, n := range w.nodes {
					w.kubelet[n] = func(string) bool { return false }
				}
				w.run(2 * time.Minute)
				for _, n := range w.nodes {
					require.Equal(t, Blocked, w.verdict(n).State)
					require.Equal(t, ReasonAPIServerUnreachable, w.verdict(n).Reason)
				}
				require.Equal(t, ReasonAPIServerUnreachable, w.lastEval.Doubt)
				require.Empty(t, w.lastEval.Probe)
				w.apiUp = true
				for _, n := range w.nodes {
					w.kubelet[n] = func(string) bool { return true }
				}
				w.run(3 * time.Minute)
			},
			check: func(t *testing.T, w *world) {
				assert.Empty(t, w.ever(Failed))
				assert.Empty(t, w.ever(Suspect))
				for _, n := range w.nodes {
					assert.Equal(t, []State{Healthy, Blocked, Healthy}, w.states(n), n)
				}
			},
		},
		{
			name: "API server unreachable while a node really dies: Blocked, never Failed during the outage", nodes: 4,
			setup: func(w *world) {
				w.run(20 * time.Second)
				w.kill("node-01")
				w.apiUp = false
				w.run(2 * time.Minute)
			},
			check: func(t *testing.T, w *world) {
				assert.Empty(t, w.ever(Failed))
				assert.Equal(t, Blocked, w.verdict("node-01").State)
			},
		},
		{
			name: "stale watches block every node", nodes: 4,
			setup: func(w *world) {
				w.run(20 * time.Second)
				w.watchUp = false
				w.kill("node-00")
				w.run(2 * time.Minute)
			},
			check: func(t *testing.T, w *world) {
				assert.Empty(t, w.ever(Failed))
				for _, n := range w.nodes {
					assert.Equal(t, ReasonWatchStale, w.verdict(n).Reason)
				}
			},
		},
		{
			name: "a watch that silently misses renewals is caught by the Lease read-back", nodes: 4,
			setup: func(w *world) {
				w.run(20 * time.Second)
				// The watch stops delivering but reports itself synced; the
				// kubelets keep renewing and stay reachable only from the API
				// server's side (probes fail).
				w.watchSilent = true
				for _, n := range w.nodes {
					w.kubelet[n] = func(string) bool { return false }
				}
				w.run(2 * time.Minute)
			},
			check: func(t *testing.T, w *world) {
				assert.Empty(t, w.ever(Failed))
				assert.Equal(t, ReasonWatchStale, w.lastEval.Doubt)
			},
		},
		{
			name: "40% of nodes stale at once with a 33% limit: all Blocked(storm), none Failed", nodes: 10,
			setup: func(w *world) {
				w.run(30 * time.Second)
				for _, n := range []string{"node-01", "node-04", "node-06", "node-08"} {
					w.kill(n)
				}
				w.run(3 * time.Minute)
			},
			check: func(t *testing.T, w *world) {
				assert.Empty(t, w.ever(Failed))
				for _, n := range []string{"node-01", "node-04", "node-06", "node-08"} {
					v := w.verdict(n)
					assert.Equal(t, Blocked, v.State, n)
					assert.Equal(t, ReasonStorm, v.Reason, n)
					assert.True(t, v.Evidence.WouldFail, n)
				}
				assert.True(t, w.lastEval.Storm.Active)
				assert.Equal(t, 4, w.lastEval.Storm.Unhealthy)
				assert.Equal(t, 3, w.lastEval.Storm.Limit)
				assert.Equal(t, 6, w.lastEval.Counts[Healthy])
			},
		},
		{
			name: "storm cooldown: the guard stays active after the count drops, then lets a later failure through", nodes: 10,
			policy: func(p *Policy) { p.StormCooldown = 2 * time.Minute },
			setup: func(w *world) {
				w.run(30 * time.Second)
				dead := []string{"node-01", "node-04", "node-06", "node-08"}
				for _, n := range dead {
					w.kill(n)
				}
				w.run(time.Minute)
				for _, n := range dead[1:] {
					w.revive(n)
				}
				w.run(time.Minute)
				require.True(t, w.lastEval.Storm.Active, "cooldown keeps the guard on")
				require.Equal(t, Blocked, w.verdict("node-01").State)
				w.run(2 * time.Minute)
			},
			check: func(t *testing.T, w *world) {
				assert.False(t, w.lastEval.Storm.Active)
				assert.Equal(t, Failed, w.verdict("node-01").State)
				assert.Equal(t, []string{"node-01"}, w.ever(Failed))
			},
		},
		{
			name: "a flapping dead node yields one verdict", nodes: 5,
			setup: func(w *world) {
				w.run(30 * time.Second)
				for range 5 {
					w.kill("node-02")
					w.run(50 * time.Second)
					w.revive("node-02")
					w.run(25 * time.Second)
				}
			},
			check: func(t *testing.T, w *world) {
				assert.Equal(t, []State{Healthy, Failed}, w.states("node-02"))
			},
		},
		{
			name: "a flapping partitioned node yields one verdict", nodes: 5,
			setup: func(w *world) {
				w.run(30 * time.Second)
				for range 5 {
					w.renewing["node-02"] = false
					w.run(50 * time.Second)
					w.renewing["node-02"] = true
					w.run(25 * time.Second)
				}
			},
			check: func(t *testing.T, w *world) {
				require.Len(t, w.changes["node-02"], 2)
				assert.Equal(t, Suspect, w.changes["node-02"][1].State)
				assert.Equal(t, ReasonPartitioned, w.changes["node-02"][1].Reason)
			},
		},
		{
			name: "a returning node is Healthy only after the settle period", nodes: 5,
			setup: func(w *world) {
				w.run(30 * time.Second)
				w.kill("node-03")
				w.run(90 * time.Second)
				require.Equal(t, Failed, w.verdict("node-03").State)
				w.revive("node-03")
				w.run(w.policy.SettlePeriod)
				require.Equal(t, Failed, w.verdict("node-03").State, "still settling")
				require.False(t, w.verdict("node-03").Evidence.SettlingSince.IsZero())
				w.run(15 * time.Second)
			},
			check: func(t *testing.T, w *world) {
				assert.Equal(t, []State{Healthy, Failed, Healthy}, w.states("node-03"))
				cs := w.changes["node-03"]
				settled := cs[2].Since
				assert.GreaterOrEqual(t, settled.Sub(cs[1].Evidence.FailedAt), w.policy.SettlePeriod)
			},
		},
		{
			name: "partitioned node under hold: Suspect(partitioned), never Failed", nodes: 5,
			setup: func(w *world) {
				w.replicas = []string{"r1", "r2", "r3"}
				w.run(30 * time.Second)
				w.kill("node-01")
				w.kubelet["node-01"] = func(r string) bool { return r == "r3" }
				// Arrays still see the node.
				w.arrays["node-01"]["pstore"] = arrayclients.Health{Connectivity: arrayclients.Connected, IO: arrayclients.IOActive}
				w.run(2 * time.Minute)
			},
			check: func(t *testing.T, w *world) {
				v := w.verdict("node-01")
				assert.Equal(t, Suspect, v.State)
				assert.Equal(t, ReasonPartitioned, v.Reason)
				assert.True(t, v.Partitioned)
				assert.Equal(t, 2, v.Evidence.Kubelet.Unreachable)
				assert.Equal(t, 1, v.Evidence.Kubelet.Reachable)
				assert.True(t, v.Evidence.Kubelet.Majority)
			},
		},
		{
			name: "partitioned node under hold: the arrays alone may corroborate", nodes: 5,
			setup: func(w *world) {
				w.replicas = []string{"r1", "r2", "r3"}
				w.run(30 * time.Second)
				w.kill("node-01")
				w.kubelet["node-01"] = func(r string) bool { return r == "r3" }
				w.run(2 * time.Minute)
			},
			check: func(t *testing.T, w *world) {
				v := w.verdict("node-01")
				assert.Equal(t, Failed, v.State)
				assert.True(t, v.Partitioned)
				assert.Equal(t, []string{"array"}, v.Evidence.CorroboratedBy)
			},
		},
		{
			name: "partitioned node under fence: a majority of replicas is enough", nodes: 5,
			policy: func(p *Policy) { p.Partitioned = PartitionFence; p.Corroboration = CorroborateKubelet },
			setup: func(w *world) {
				w.replicas = []string{"r1", "r2", "r3"}
				w.run(30 * time.Second)
				w.kill("node-01")
				w.kubelet["node-01"] = func(r string) bool { return r == "r3" }
				w.run(2 * time.Minute)
			},
			check: func(t *testing.T, w *world) {
				v := w.verdict("node-01")
				assert.Equal(t, Failed, v.State)
				assert.True(t, v.Partitioned)
			},
		},
		{
			name: "kubelet unreachable from a minority of replicas does not corroborate", nodes: 5,
			policy: func(p *Policy) { p.Corroboration = CorroborateKubelet },
			setup: func(w *world) {
				w.replicas = []string{"r1", "r2", "r3"}
				w.run(30 * time.Second)
				w.renewing["node-01"] = false
				w.kubelet["node-01"] = func(r string) bool { return r != "r1" }
				w.run(2 * time.Minute)
			},
			check: func(t *testing.T, w *world) {
				v := w.verdict("node-01")
				assert.Equal(t, Suspect, v.State)
				assert.False(t, v.Evidence.Kubelet.Majority)
			},
		},
		{
			name: "no quorum, then paused, then ambiguous identity block a would-be failure; clearing them fails it", nodes: 5,
			setup: func(w *world) {
				w.run(30 * time.Second)
				w.quorum = false
				w.kill("node-04")
				w.run(90 * time.Second)
				require.Equal(t, ReasonNoQuorum, w.verdict("node-04").Reason)
				w.quorum, w.paused = true, true
				w.run(10 * time.Second)
				require.Equal(t, ReasonPaused, w.verdict("node-04").Reason)
				w.paused = false
				w.m.ObserveIdentities(IdentityObservation{Node: "node-04", Arrays: []string{"pstore"}, Ambiguous: []string{"pstore"}, ObservedAt: w.now})
				w.run(10 * time.Second)
				require.Equal(t, ReasonIdentityAmbiguous, w.verdict("node-04").Reason)
				require.Equal(t, []string{"pstore"}, w.verdict("node-04").Evidence.AmbiguousArrays)
				w.m.ObserveIdentities(IdentityObservation{Node: "node-04", Arrays: []string{"pstore"}, ObservedAt: w.now})
				w.run(10 * time.Second)
			},
			check: func(t *testing.T, w *world) {
				var got []string
				for _, c := range w.changes["node-04"] {
					got = append(got, string(c.State)+"/"+string(c.Reason))
				}
				assert.Equal(t, []string{"healthy/", "blocked/no-quorum", "blocked/paused", "blocked/identity-ambiguous", "failed/heartbeat-stale"}, got)
			},
		},
		{
			name: "new node without a Lease gets a full grace from first sight", nodes: 3,
			setup: func(w *world) {
				w.run(30 * time.Second)
				w.addNode("fresh", false)
				w.kubelet["fresh"] = func(string) bool { return false }
				w.run(38 * time.Second)
				require.Equal(t, Healthy, w.verdict("fresh").State)
				w.run(10 * time.Second)
			},
			check: func(t *testing.T, w *world) {
				v := w.verdict("fresh")
				assert.Equal(t, Failed, v.State)
				assert.True(t, v.Evidence.LeaseMissing)
			},
		},
		{
			name: "new node whose kubelet creates its Lease in time stays Healthy", nodes: 3,
			setup: func(w *world) {
				w.addNode("fresh", false)
				w.run(20 * time.Second)
				w.renewing["fresh"] = true
				w.run(2 * time.Minute)
			},
			check: func(t *testing.T, w *world) {
				assert.Equal(t, []State{Healthy}, w.states("fresh"))
			},
		},
		{
			name: "a deleted Lease of a live node is recreated and nothing happens", nodes: 3,
			setup: func(w *world) {
				w.run(30 * time.Second)
				w.hasLease["node-01"] = false
				w.m.ObserveLease(LeaseObservation{Node: "node-01", Deleted: true, ObservedAt: w.now})
				w.run(2 * time.Minute)
			},
			check: func(t *testing.T, w *world) {
				assert.Equal(t, []State{Healthy}, w.states("node-01"))
				assert.False(t, w.verdict("node-01").Evidence.LeaseMissing)
			},
		},
		{
			name: "renewTime written by a clock an hour behind cannot fake staleness", nodes: 4,
			setup: func(w *world) {
				w.renewSkew = -time.Hour
				w.run(3 * time.Minute)
			},
			check: func(t *testing.T, w *world) {
				assert.Empty(t, w.ever(Suspect))
				assert.Empty(t, w.ever(Failed))
				assert.Equal(t, 4, w.lastEval.Counts[Healthy])
			},
		},
		{
			name: "a deleted Node is forgotten", nodes: 3,
			setup: func(w *world) {
				w.run(10 * time.Second)
				w.m.ObserveNode(NodeObservation{Node: "node-02", Deleted: true, ObservedAt: w.now})
				w.nodes = w.nodes[:2]
				w.run(10 * time.Second)
			},
			check: func(t *testing.T, w *world) {
				assert.Len(t, w.lastEval.Verdicts, 2)
			},
		},
	}...)

	for _, c := range tcs {
		t.Run(c.name, func(t *testing.T) {
			p := DefaultPolicy()
			if c.policy != nil {
				c.policy(&p)
			}
			w := newWorld(t, p, c.nodes)
			c.setup(w)
			c.check(t, w)
		})
	}
}

func TestMachineOddInputsDoNotPanic(t *testing.T) {
	m, err := NewMachine("c", DefaultPolicy())
	require.NoError(t, err)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	require.NotPanics(t, func() {
		m.ObserveLease(LeaseObservation{})
		m.ObserveLease(LeaseObservation{Node: "ghost", Deleted: true})
		m.ObserveLease(LeaseObservation{Node: "no-node-yet", ObservedAt: now})
		m.ObserveNode(NodeObservation{})
		m.ObserveNode(NodeObservation{Node: "n", ObservedAt: now})
		m.ObserveProbe(ProbeObservation{Node: "n"})
		m.ObserveProbe(ProbeObservation{Node: "unknown", Replica: "r"})
		m.ObserveArray(ArrayObservation{Node: "n"})
		m.ObserveArray(ArrayObservation{Node: "n", Array: "a"})
		m.ObserveIdentities(IdentityObservation{Node: "n", Arrays: []string{"a", "a"}})
		m.ObserveIdentities(IdentityObservation{Node: "unknown"})
		m.ObserveLease(LeaseObservation{Node: "n", ReadBack: true, Deleted: true, ObservedAt: now})
		for i := range 100 {
			at := now.Add(time.Duration(i) * time.Second)
			m.Evaluate(Self{APIReachable: true, APICheckedAt: at, WatchSynced: true, Quorum: true}, at)
		}
		m.Evaluate(Self{}, time.Time{})
	})
	res := m.Evaluate(Self{APIReachable: true, APICheckedAt: now.Add(101 * time.Second), WatchSynced: true, Quorum: true, Replicas: -3}, now.Add(101*time.Second))
	require.Len(t, res.Verdicts, 1, "only nodes with a Node object get verdicts")
	assert.Equal(t, "n", res.Verdicts[0].Node)
	assert.Equal(t, 1, res.Verdicts[0].Evidence.Kubelet.Replicas)
}

func TestMachineIsDeterministic(t *testing.T) {
	run := func() []Verdict {
		w := newWorld(t, DefaultPolicy(), 8)
		w.run(20 * time.Second)
		w.kill("node-03")
		w.kill("node-05")
		w.run(2 * time.Minute)
		var all []Verdict
		for _, n := range w.nodes {
			all = append(all, w.changes[n]...)
		}
		return all
	}
	first, second := run(), run()
	assert.Equal(t, first, second)
}

// Nodes whose Leases last long enough that they renew no sooner than the
// heartbeat age at which fenced counts them late are reported, with the
// setting to change; nodes renewing on time for the policy are not.
func TestLeaseTimingReportsNodesRenewingTooSeldom(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	self := Self{APIReachable: true, APICheckedAt: now, WatchSynced: true, Quorum: true}
	evaluate := func(p Policy, durations map[string]time.Duration) *LeaseTiming {
		t.Helper()
		m, err := NewMachine("c", p)
		require.NoError(t, err)
		for name, d := range durations {
			m.ObserveNode(NodeObservation{Node: name, Ready: "True", ObservedAt: now})
			m.ObserveLease(LeaseObservation{Node: name, RenewTime: now, Duration: d, ObservedAt: now})
		}
		return m.Evaluate(self, now).LeaseTiming
	}
	early := DefaultPolicy()
	early.Early = EarlyPolicy{Enabled: true, After: 12 * time.Second, ProbeFrom: 11 * time.Second, KubeletProbes: 3, IOWindow: 6 * time.Second}

	assert.Nil(t, evaluate(early, map[string]time.Duration{"a": 40 * time.Second, "b": 40 * time.Second, "c": 0}),
		"the kubelet's default Lease (renewed every 10 s) fits the default timing")

	lt := evaluate(early, map[string]time.Duration{"a": 40 * time.Second, "b": 100 * time.Second, "c": 60 * time.Second})
	require.NotNil(t, lt)
	assert.Equal(t, LeaseTiming{Nodes: 2, RenewEvery: 25 * time.Second, Example: "b", LateFrom: 11 * time.Second,
		Setting: "earlyVerdict.probeFrom"}, *lt)
	assert.Contains(t, lt.String(), "2 nodes renew their Leases every 25s (node b")
	assert.Contains(t, lt.String(), "scale heartbeatGrace, earlyVerdict.after and earlyVerdict.probeFrom")

	lt = evaluate(DefaultPolicy(), map[string]time.Duration{"a": 100 * time.Second})
	require.NotNil(t, lt, "without early verdicts, half the 40 s grace is still shorter than a 25 s renewal")
	assert.Equal(t, "half of heartbeatGrace", lt.Setting)
	assert.Equal(t, 20*time.Second, lt.LateFrom)

	scaled := DefaultPolicy()
	scaled.HeartbeatGrace, scaled.ProbeAfter = 100*time.Second, 50*time.Second
	scaled.Early = EarlyPolicy{Enabled: true, After: 30 * time.Second, ProbeFrom: 27500 * time.Millisecond, KubeletProbes: 3, IOWindow: 6 * time.Second}
	assert.Nil(t, evaluate(scaled, map[string]time.Duration{"a": 100 * time.Second}), "the timing scaled with the Lease fits it")
}
