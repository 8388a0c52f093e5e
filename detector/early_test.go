package detector

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
)

func earlyPolicy() Policy {
	p := DefaultPolicy()
	p.Early.Enabled = true
	return p
}

// failedAfter returns how long after the last renewal the machine saw the
// node was declared Failed, failing the test if it was not.
func failedAfter(t *testing.T, w *world, name string) time.Duration {
	t.Helper()
	v := w.verdict(name)
	require.Equal(t, Failed, v.State, "verdict %+v", v)
	return v.Evidence.FailedAt.Sub(w.lastRenewSeen[name])
}

// A dead node whose every witness agrees — Lease renewal missed, kubelet
// unreachable from every replica for three polls, every array reporting it
// disconnected with no I/O for the early window — is Failed before the
// grace, the verdict says so, and the Lease read-back still confirmed it.
func TestEarlyVerdictWhenEveryWitnessAgrees(t *testing.T) {
	w := newWorld(t, earlyPolicy(), 5)
	w.replicas = []string{"r1", "r2", "r3"}
	w.run(30 * time.Second)
	w.kill("node-02")
	w.run(60 * time.Second)
	lat := failedAfter(t, w, "node-02")
	t.Logf("early verdict %v after the last renewal seen", lat)
	assert.Less(t, lat, w.policy.HeartbeatGrace, "early verdict")
	assert.GreaterOrEqual(t, lat, w.policy.Early.After, "not before a renewal was missed")
	v := w.verdict("node-02")
	assert.True(t, v.Evidence.Early)
	assert.False(t, v.Evidence.LeaseConfirmedAt.IsZero(), "the Lease read-back confirmed the missed renewal")
	assert.Equal(t, []State{Healthy, Failed}, w.states("node-02"))
	assert.Equal(t, []string{"node-02"}, w.ever(Failed))
}

// Any witness that is unknown, stale or disagrees sends the node back to
// the full grace: it is Failed no sooner than the grace, without the early
// flag; and a node that is only slow to renew is never Failed.
func TestEarlyVerdictFallsBackToTheGrace(t *testing.T) {
	for _, c := range []struct {
		name  string
		setup func(w *world)
	}{
		{"one replica still reaches the kubelet", func(w *world) {
			w.kubelet["node-02"] = func(r string) bool { return r == "r3" }
		}},
		{"an array without session state (connectivity unknown)", func(w *world) {
			w.arrays["node-02"]["pstore"] = arrayclients.Health{Connectivity: arrayclients.ConnectivityUnknown, IO: arrayclients.IOIdle}
		}},
		{"an array whose I/O signal is unknown (stale samples)", func(w *world) {
			w.arrays["node-02"]["pstore"] = arrayclients.Health{Connectivity: arrayclients.Disconnected, IO: arrayclients.IOUnknown}
		}},
		{"a second array still sees I/O", func(w *world) {
			w.arrays["node-02"]["pmax"] = arrayclients.Health{Connectivity: arrayclients.Connected, IO: arrayclients.IOActive}
			w.m.ObserveIdentities(IdentityObservation{Node: "node-02", Arrays: []string{"pmax", "pstore"}, ObservedAt: w.now})
		}},
		{"a footprint volume that cannot be placed or cut", func(w *world) {
			w.m.ObserveIdentities(IdentityObservation{Node: "node-02", Arrays: []string{"pstore"},
				FootprintRead: true, Footprint: []string{"pstore"}, FootprintComplete: false, ObservedAt: w.now})
		}},
		{"no identity on any array", func(w *world) {
			w.m.ObserveIdentities(IdentityObservation{Node: "node-02", ObservedAt: w.now})
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t, earlyPolicy(), 5)
			w.replicas = []string{"r1", "r2", "r3"}
			w.run(30 * time.Second)
			w.kill("node-02")
			c.setup(w)
			w.run(90 * time.Second)
			v := w.verdict("node-02")
			assert.False(t, v.Evidence.Early, "verdict %+v", v)
			if v.State == Failed {
				assert.GreaterOrEqual(t, failedAfter(t, w, "node-02"), w.policy.HeartbeatGrace)
			}
		})
	}
	t.Run("slow renewals, kubelet and arrays alive", func(t *testing.T) {
		w := newWorld(t, earlyPolicy(), 5)
		w.renewEvery = 25 * time.Second // late, never stale
		w.run(3 * time.Minute)
		assert.Empty(t, w.ever(Failed))
	})
}

// The arrays that must agree are those holding the node's storage
// footprint: an array where the node has an identity but no volume, and
// whose signal is unknown (PowerScale has no session state), does not hold
// the verdict back; the same array holding a footprint volume does; a node
// without volumes needs every array where it has an identity.
func TestEarlyVerdictWitnessesAreTheFootprintArrays(t *testing.T) {
	for _, c := range []struct {
		name      string
		footprint []string
		early     bool
	}{
		{"footprint on the array that sees the node gone", []string{"pstore"}, true},
		{"footprint also on the array without session state", []string{"pscale", "pstore"}, false},
		{"no volumes: every identity array", nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t, earlyPolicy(), 5)
			w.replicas = []string{"r1", "r2", "r3"}
			w.arrays["node-02"]["pscale"] = arrayclients.Health{Connectivity: arrayclients.ConnectivityUnknown, IO: arrayclients.IOUnknown}
			w.m.ObserveIdentities(IdentityObservation{Node: "node-02", Arrays: []string{"pscale", "pstore"},
				FootprintRead: true, Footprint: c.footprint, FootprintComplete: true, ObservedAt: w.now})
			w.run(30 * time.Second)
			w.kill("node-02")
			w.arrays["node-02"]["pscale"] = arrayclients.Health{Connectivity: arrayclients.ConnectivityUnknown, IO: arrayclients.IOUnknown}
			w.run(90 * time.Second)
			v := w.verdict("node-02")
			require.Equal(t, Failed, v.State, "verdict %+v", v)
			assert.Equal(t, c.early, v.Evidence.Early, "verdict %+v", v)
			if c.early {
				assert.Less(t, failedAfter(t, w, "node-02"), w.policy.HeartbeatGrace)
			} else {
				assert.GreaterOrEqual(t, failedAfter(t, w, "node-02"), w.policy.HeartbeatGrace)
			}
		})
	}
}

// The guards hold an early verdict as they hold one at the grace: with the
// storm guard active nothing is Failed early; paused, neither.
func TestEarlyVerdictRespectsTheGuards(t *testing.T) {
	t.Run("paused", func(t *testing.T) {
		w := newWorld(t, earlyPolicy(), 5)
		w.run(30 * time.Second)
		w.paused = true
		w.kill("node-01")
		w.run(30 * time.Second)
		assert.Empty(t, w.ever(Failed))
		assert.NotEqual(t, Failed, w.verdict("node-01").State)
	})
	t.Run("storm", func(t *testing.T) {
		p := earlyPolicy()
		p.MaxUnhealthy = Limit{Value: 1}
		w := newWorld(t, p, 6)
		w.run(30 * time.Second)
		w.kill("node-01")
		w.kill("node-02")
		w.kill("node-03")
		w.run(35 * time.Second)
		assert.Empty(t, w.ever(Failed))
	})
}

func TestEarlyPolicyValidation(t *testing.T) {
	for _, c := range []struct {
		mutate func(*EarlyPolicy)
		want   string
	}{
		{func(e *EarlyPolicy) { e.After = 40 * time.Second }, "early.after"},
		{func(e *EarlyPolicy) { e.After = 0 }, "early.after"},
		{func(e *EarlyPolicy) { e.ProbeFrom = 0 }, "early.probeFrom"},
		{func(e *EarlyPolicy) { e.ProbeFrom = e.After + time.Second }, "early.probeFrom"},
		{func(e *EarlyPolicy) { e.KubeletProbes = 0 }, "early.kubeletProbes"},
		{func(e *EarlyPolicy) { e.IOWindow = 0 }, "early.ioWindow"},
	} {
		p := earlyPolicy()
		c.mutate(&p.Early)
		require.ErrorContains(t, p.Validate(), c.want)
		p.Early.Enabled = false
		assert.NoError(t, p.Validate(), "checked only when enabled")
	}
}

// The early verdict is taken as soon as its evidence is complete, not at
// the next poll after: here the first probe of the dead node takes 80 ms
// and the later ones 10 ms, so the I/O window (which runs from the first
// probe's answer) closes 70 ms after the poll that made the fourth probe.
// The verdict comes at that moment, with every rule of witnessesAgree
// holding, a poll interval before it would otherwise have come. The node
// is probed from probeFrom, before the age (after) at which it may be
// declared failed, so its windows are under way by then and the verdict
// comes probeFrom + ioWindow (plus the first probe's 80 ms) after the
// renewal.
func TestEarlyVerdictTakenWhenTheEvidenceIsComplete(t *testing.T) {
	p := earlyPolicy()
	w := newWorld(t, p, 5)
	m := w.m
	t0 := w.now
	const dead = "node-02"
	renew := func(at time.Time) {
		for _, n := range w.nodes {
			if n != dead {
				m.ObserveLease(LeaseObservation{Node: n, RenewTime: at, Holder: n, ObservedAt: at})
			}
		}
	}
	renew(t0)
	m.ObserveLease(LeaseObservation{Node: dead, RenewTime: t0, Holder: dead, ObservedAt: t0})

	type answer struct {
		at   time.Time
		node string
	}
	var answers []answer
	probes := 0
	self := func(now time.Time) Self {
		return Self{APIReachable: true, APICheckedAt: now, WatchSynced: true, Quorum: true, Replicas: 1}
	}
	var quietSince, failedAt time.Time
	now, nextRenew := t0, t0.Add(10*time.Second)
	for now.Before(t0.Add(30*time.Second)) && failedAt.IsZero() {
		res := m.Evaluate(self(now), now)
		for _, v := range res.Verdicts {
			if v.Node == dead && v.State == Failed {
				failedAt = now
				assert.True(t, v.Evidence.Early, "an early verdict")
			}
		}
		for _, name := range res.Probe {
			lat := 10 * time.Millisecond
			if name == dead && probes == 0 {
				lat = 80 * time.Millisecond
			}
			if name == dead {
				probes++
			}
			answers = append(answers, answer{at: now.Add(lat), node: name})
		}
		next := res.NextCheck
		// Deliver what happens before the next evaluation, in order.
		for {
			at, i := next, -1
			for j, a := range answers {
				if !a.at.After(at) {
					at, i = a.at, j
				}
			}
			if nextRenew.Before(at) {
				renew(nextRenew)
				nextRenew = nextRenew.Add(10 * time.Second)
				continue
			}
			if i < 0 {
				break
			}
			a := answers[i]
			answers = append(answers[:i], answers[i+1:]...)
			if a.node != dead {
				continue
			}
			m.ObserveProbe(ProbeObservation{Cluster: "c1", Node: dead, Replica: "r1", Reachable: false, At: a.at})
			m.ObserveLease(LeaseObservation{Node: dead, RenewTime: t0, Holder: dead, ReadBack: true, ObservedAt: a.at})
			m.ObserveArray(ArrayObservation{Node: dead, Array: "pstore", ObservedAt: a.at,
				Health: arrayclients.Health{Connectivity: arrayclients.Disconnected, IO: arrayclients.IOIdle}})
			if quietSince.IsZero() {
				quietSince = a.at
			}
		}
		now = next
	}
	require.False(t, failedAt.IsZero(), "no verdict within 30 s")
	t.Logf("first answer %v after the renewal, verdict %v after it", quietSince.Sub(t0), failedAt.Sub(t0))
	assert.Equal(t, p.Early.ProbeFrom+80*time.Millisecond, quietSince.Sub(t0), "probed from probeFrom")
	assert.False(t, failedAt.Before(quietSince.Add(p.Early.IOWindow)), "verdict before the I/O window closed")
	assert.False(t, failedAt.Before(t0.Add(p.Early.After)), "verdict before a renewal was missed")
	assert.True(t, failedAt.Before(t0.Add(p.Early.ProbeFrom+p.Early.IOWindow+p.PollInterval)),
		"verdict at %v, a poll after the evidence was complete at %v", failedAt.Sub(t0), quietSince.Add(p.Early.IOWindow).Sub(t0))
}

// A run of early evidence ends where the observations stop: the kubelet
// probes and the array samples of a node that missed a renewal, went
// unanswered, and then renewed again, must not count towards a later
// episode. Here node-02 is cut off from everything long enough to be
// probed (kubelet unreachable, arrays quiet) but not to be declared
// Failed, comes back, and a minute later dies. Its second verdict needs a
// whole I/O window of its own, observed after its second missed renewal.
func TestEarlyEvidenceRunsDoNotSpanAGapInObservations(t *testing.T) {
	w := newWorld(t, earlyPolicy(), 5)
	w.replicas = []string{"r1", "r2", "r3"}
	const node = "node-02"
	atRenewal := func() {
		for w.lastRenewSeen[node] != w.now {
			w.run(time.Second)
		}
	}
	w.run(30 * time.Second)
	atRenewal()
	w.kill(node)
	w.run(w.policy.Early.After + 3*time.Second) // probed twice, not Failed yet
	e := w.verdict(node).Evidence
	require.NotEqual(t, Failed, w.verdict(node).State)
	require.NotZero(t, e.Kubelet.Unreachable, "the kubelet was probed unreachable: %+v", e.Kubelet)
	require.False(t, e.Arrays[0].QuietSince.IsZero(), "the array was sampled quiet: %+v", e.Arrays)
	w.revive(node)
	w.run(60 * time.Second)
	require.Equal(t, Healthy, w.verdict(node).State)

	atRenewal()
	w.kill(node)
	w.run(60 * time.Second)
	lat := failedAfter(t, w, node)
	t.Logf("second episode: early verdict %v after the last renewal seen", lat)
	assert.True(t, w.verdict(node).Evidence.Early)
	assert.GreaterOrEqual(t, lat, w.policy.Early.ProbeFrom+w.policy.Early.IOWindow,
		"the I/O window was observed in this episode, after its first probe")
}
