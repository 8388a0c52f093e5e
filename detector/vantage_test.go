package detector

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var vt0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestVantageBoardFreshness(t *testing.T) {
	b := NewVantageBoard("r1", []string{"r1", "r2", "r3"}, 5*time.Second)
	obs := func(reach bool, at time.Time) VantageObservation {
		return VantageObservation{Cluster: "c1", Node: "n1", Reachable: reach, Since: at, At: at}
	}

	assert.Empty(t, b.Probes("c1", "n1", vt0), "nothing reported: no vantage")

	ch, err := b.Report(VantageReport{Replica: "r2", Observations: []VantageObservation{obs(false, vt0)}}, vt0)
	require.NoError(t, err)
	assert.Len(t, ch, 1, "a first sighting is a change")
	got := b.Probes("c1", "n1", vt0.Add(5*time.Second))
	require.Len(t, got, 1)
	assert.Equal(t, ProbeObservation{Cluster: "c1", Node: "n1", Replica: "r2", Reachable: false, At: vt0}, got[0])

	ch, err = b.Report(VantageReport{Replica: "r2", Observations: []VantageObservation{obs(false, vt0.Add(time.Second))}}, vt0.Add(time.Second))
	require.NoError(t, err)
	assert.Empty(t, ch, "same reachability: no change to commit")

	ch, err = b.Report(VantageReport{Replica: "r2", Observations: []VantageObservation{obs(true, vt0.Add(500*time.Millisecond))}}, vt0.Add(2*time.Second))
	require.NoError(t, err)
	assert.Empty(t, ch, "an older probe arriving late is ignored")
	assert.False(t, b.Probes("c1", "n1", vt0.Add(2*time.Second))[0].Reachable)

	// Stale: the last report arrived more than the bound ago.
	assert.Empty(t, b.Probes("c1", "n1", vt0.Add(6*time.Second+time.Millisecond)), "stale report must not count")
	// The leader's clock going backwards does not make a report fresh either.
	assert.Empty(t, b.Probes("c1", "n1", vt0.Add(-time.Second)))

	st := b.Status(vt0.Add(3 * time.Second))
	require.Len(t, st, 2)
	assert.Equal(t, VantageReplicaStatus{Replica: "r2", LastReportAt: vt0.Add(2 * time.Second), Fresh: true}, st[0])
	assert.Equal(t, VantageReplicaStatus{Replica: "r3"}, st[1])

	b.Forget("c1", "n1")
	assert.Empty(t, b.Probes("c1", "n1", vt0.Add(2*time.Second)))
}

func TestVantageBoardRefusesBadReports(t *testing.T) {
	b := NewVantageBoard("r1", []string{"r2", "r3"}, 5*time.Second)
	ok := VantageObservation{Cluster: "c1", Node: "n1", At: vt0}
	for _, c := range []struct {
		r    VantageReport
		want string
	}{
		{VantageReport{Replica: "r1", Observations: []VantageObservation{ok}}, `replica "r1" is this replica`},
		{VantageReport{Replica: "r9", Observations: []VantageObservation{ok}}, `replica "r9" is not a configured peer`},
		{VantageReport{Observations: []VantageObservation{ok}}, "replica is empty"},
		{VantageReport{Replica: "r2", Observations: []VantageObservation{{Node: "n1", At: vt0}}}, "observations[0].cluster is empty"},
		{VantageReport{Replica: "r2", Observations: []VantageObservation{ok, {Cluster: "c1", At: vt0}}}, "observations[1].node is empty"},
		{VantageReport{Replica: "r2", Observations: []VantageObservation{{Cluster: "c1", Node: "n1"}}}, "observations[0].at is not set"},
	} {
		_, err := b.Report(c.r, vt0)
		require.Error(t, err)
		assert.Contains(t, err.Error(), c.want)
	}
	assert.Empty(t, b.Probes("c1", "n1", vt0))
}

// vantageWorld runs a Machine as the leader r1 of a group, with the other
// replicas' kubelet probes reaching it only through a VantageBoard, as in
// fenced run: each poll the leader probes late nodes itself, each follower
// whose reports get through reports its own probe, and before evaluating the
// leader replaces the machine's vantage with the board's fresh probes.
type vantageWorld struct {
	t       *testing.T
	m       *Machine
	b       *VantageBoard
	p       Policy
	now     time.Time
	others  []string
	self    int // configured replicas
	renew   bool
	lastRen time.Time       // last renewal round of the nodes that renew
	kubelet map[string]bool // replica -> reaches the node's kubelet
	deliver map[string]bool // follower -> its reports reach the leader
	states  []State
	last    Verdict // n1's verdict at the last evaluation
	failed  Verdict // n1's verdict when it became Failed
}

func newVantageWorld(t *testing.T, replicas int, p Policy) *vantageWorld {
	m, err := NewMachine("c1", p)
	require.NoError(t, err)
	w := &vantageWorld{t: t, m: m, p: p, now: vt0, self: replicas, renew: true,
		kubelet: map[string]bool{"r1": true}, deliver: map[string]bool{}}
	for i := 2; i <= replicas; i++ {
		r := fmt.Sprintf("r%d", i)
		w.others = append(w.others, r)
		w.kubelet[r], w.deliver[r] = true, true
	}
	w.b = NewVantageBoard("r1", w.others, VantageMaxAge(p))
	// Three nodes so that the storm limit (33 %) allows one failure.
	for _, n := range []string{"n0", "n1", "n2"} {
		m.ObserveNode(NodeObservation{Node: n, Ready: "True", ObservedAt: w.now})
		m.ObserveLease(LeaseObservation{Node: n, RenewTime: w.now, Holder: n, ObservedAt: w.now})
	}
	w.lastRen = w.now
	return w
}

func (w *vantageWorld) run(d time.Duration) {
	end := w.now.Add(d)
	next := w.now
	for w.now.Before(end) {
		w.now = w.now.Add(250 * time.Millisecond)
		if w.now.Sub(w.lastRen) >= 10*time.Second {
			for _, n := range []string{"n0", "n1", "n2"} {
				if n != "n1" || w.renew {
					w.m.ObserveLease(LeaseObservation{Node: n, RenewTime: w.now, Holder: n, ObservedAt: w.now})
				}
			}
			w.lastRen = w.now
		}
		if w.now.Before(next) {
			continue
		}
		next = w.now.Add(w.p.PollInterval)
		w.m.ReplaceVantage("n1", "r1", w.b.Probes("c1", "n1", w.now))
		res := w.m.Evaluate(Self{APIReachable: true, APICheckedAt: w.now, WatchSynced: true, Quorum: true, Replicas: w.self}, w.now)
		for _, c := range res.Changes {
			if c.Node == "n1" {
				w.states = append(w.states, c.State)
				if c.State == Failed {
					w.failed = c
				}
			}
		}
		for _, v := range res.Verdicts {
			if v.Node == "n1" {
				w.last = v
			}
		}
		for _, name := range res.Probe {
			if name != "n1" {
				continue
			}
			w.m.ObserveProbe(ProbeObservation{Cluster: "c1", Node: name, Replica: "r1", Reachable: w.kubelet["r1"], At: w.now})
			w.m.ObserveLease(LeaseObservation{Node: name, RenewTime: w.renewTimeOf(), Holder: name, ReadBack: true, ObservedAt: w.now})
			for _, r := range w.others {
				if !w.deliver[r] {
					continue
				}
				_, err := w.b.Report(VantageReport{Replica: r, Observations: []VantageObservation{{
					Cluster: "c1", Node: name, Reachable: w.kubelet[r], Since: w.now, At: w.now}}}, w.now)
				require.NoError(w.t, err)
			}
		}
	}
}

// renewTimeOf is what a read-back of n1's Lease shows: the last renewal
// the machine was handed.
func (w *vantageWorld) renewTimeOf() time.Time {
	return w.m.nodes["n1"].renewTime
}

func (w *vantageWorld) ever(s State) bool {
	for _, x := range w.states {
		if x == s {
			return true
		}
	}
	return false
}

// TestVantageDecision: under corroboration "kubelet" in a group of three
// (or five), a stale heartbeat is corroborated only by a majority of the
// CONFIGURED replicas that reach the leader with fresh reports of an
// unreachable kubelet. A follower whose reports are missing or older than
// the bound is no vantage, never "unreachable".
func TestVantageDecision(t *testing.T) {
	pol := func() Policy {
		p := DefaultPolicy()
		p.Corroboration = CorroborateKubelet
		p.HeartbeatGrace, p.ProbeAfter, p.PollInterval = 20*time.Second, 10*time.Second, time.Second
		// A generous evidence age: only the board's freshness bound (4s
		// here) may exclude a follower's probe.
		p.EvidenceMaxAge = time.Minute
		return p
	}
	kill := func(w *vantageWorld) {
		w.renew = false
		for r := range w.kubelet {
			w.kubelet[r] = false
		}
	}
	cases := []struct {
		name     string
		replicas int
		setup    func(w *vantageWorld)
		failed   bool
		check    func(t *testing.T, w *vantageWorld)
	}{
		{
			name: "killed node, both followers report fresh: Failed", replicas: 3,
			setup:  func(w *vantageWorld) { w.run(15 * time.Second); kill(w); w.run(40 * time.Second) },
			failed: true,
			check: func(t *testing.T, w *vantageWorld) {
				k := w.failed.Evidence.Kubelet
				assert.Equal(t, 3, k.Replicas)
				assert.Equal(t, 3, k.Unreachable)
				assert.Equal(t, []string{"kubelet"}, w.failed.Evidence.CorroboratedBy)
			},
		},
		{
			name: "killed node, one follower partitioned from the leader: 2 of 3 is a majority", replicas: 3,
			setup: func(w *vantageWorld) {
				w.deliver["r3"] = false
				w.run(15 * time.Second)
				kill(w)
				w.run(40 * time.Second)
			},
			failed: true,
			check: func(t *testing.T, w *vantageWorld) {
				assert.Equal(t, 2, w.failed.Evidence.Kubelet.Unreachable)
			},
		},
		{
			name: "killed node, no follower report (missing vantage): never Failed", replicas: 3,
			setup: func(w *vantageWorld) {
				w.deliver["r2"], w.deliver["r3"] = false, false
				w.run(15 * time.Second)
				kill(w)
				w.run(60 * time.Second)
			},
			check: func(t *testing.T, w *vantageWorld) {
				k := w.last.Evidence.Kubelet
				assert.Equal(t, 1, k.Unreachable)
				assert.False(t, k.Majority)
				assert.Equal(t, Suspect, w.last.State)
				assert.Equal(t, ReasonHeartbeatStale, w.last.Reason)
			},
		},
		{
			name: "killed node, followers' reports stop before the grace ends (stale vantage): never Failed", replicas: 3,
			setup: func(w *vantageWorld) {
				w.run(15 * time.Second)
				kill(w)
				// Last renewal at 10 s, late at 20 s, stale at 30 s: the
				// followers report "unreachable" from 20 s, then their reports
				// stop reaching the leader at 22 s.
				w.run(7 * time.Second)
				require.Len(t, w.b.Probes("c1", "n1", w.now), 2, "followers reported while the node was late")
				w.deliver["r2"], w.deliver["r3"] = false, false
				w.run(60 * time.Second)
			},
			check: func(t *testing.T, w *vantageWorld) {
				assert.Equal(t, 1, w.last.Evidence.Kubelet.Unreachable, "stale reports must not count as unreachable")
				assert.Equal(t, Suspect, w.last.State)
			},
		},
		{
			name: "hung node (kubelet answers everywhere): partitioned, never Failed", replicas: 3,
			setup: func(w *vantageWorld) { w.run(15 * time.Second); w.renew = false; w.run(60 * time.Second) },
			check: func(t *testing.T, w *vantageWorld) {
				assert.Equal(t, Suspect, w.last.State)
				assert.Equal(t, ReasonPartitioned, w.last.Reason)
				assert.True(t, w.last.Partitioned)
				assert.Equal(t, 3, w.last.Evidence.Kubelet.Reachable)
			},
		},
		{
			name: "hung node seen by one follower only, the other two cannot reach it: hold keeps it Suspect", replicas: 3,
			setup: func(w *vantageWorld) {
				w.run(15 * time.Second)
				w.renew = false
				w.kubelet["r1"], w.kubelet["r3"] = false, false
				w.run(60 * time.Second)
			},
			check: func(t *testing.T, w *vantageWorld) {
				assert.Equal(t, ReasonPartitioned, w.last.Reason)
				assert.True(t, w.last.Evidence.Kubelet.Majority)
			},
		},
		{
			name: "five replicas, leader and one follower fresh, three missing: 2 of 5 is no majority", replicas: 5,
			setup: func(w *vantageWorld) {
				w.deliver["r3"], w.deliver["r4"], w.deliver["r5"] = false, false, false
				w.run(15 * time.Second)
				kill(w)
				w.run(60 * time.Second)
			},
			check: func(t *testing.T, w *vantageWorld) {
				k := w.last.Evidence.Kubelet
				assert.Equal(t, 5, k.Replicas)
				assert.Equal(t, 2, k.Unreachable)
				assert.False(t, k.Majority)
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := newVantageWorld(t, c.replicas, pol())
			c.setup(w)
			assert.Equal(t, c.failed, w.ever(Failed), "states of n1: %v, last %+v", w.states, w.last)
			if c.check != nil {
				c.check(t, w)
			}
		})
	}
}
