package detector

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
)

// world simulates a cluster, its API server and the arrays around a Machine,
// one simulated second at a time. It is the fault injector of the table
// tests; the machine under test is the real one.
type world struct {
	t        *testing.T
	m        *Machine
	policy   Policy
	start    time.Time
	now      time.Time
	nodes    []string
	replicas []string

	// Per node truth.
	renewing    map[string]bool      // the kubelet renews its Lease
	hasLease    map[string]bool      // the Lease object exists
	serverRenew map[string]time.Time // Lease spec.renewTime on the server
	kubelet     map[string]func(replica string) bool
	arrays      map[string]map[string]arrayclients.Health // node -> array -> health
	ambiguous   map[string][]string

	// Renewals are written with this offset from the true time (a skewed
	// clock on the API server or kubelet).
	renewSkew  time.Duration
	renewEvery time.Duration

	apiUp, watchUp, quorum, paused bool
	// watchSilent: the watch delivers nothing but reports itself synced.
	watchSilent bool

	// sweep: every poll, before the evaluation, every node's arrays are
	// sampled, as the Runner's sweeper does on arrays that list many
	// nodes at once; silent names the nodes whose arrays answer nothing
	// (no sample, from a sweep or a probe).
	sweep  bool
	silent map[string]bool

	changes  map[string][]Verdict
	lastEval Result
	// lastRenewSeen is when the machine was last handed a renewal per node.
	lastRenewSeen map[string]time.Time
	nextPoll      time.Time
}

func newWorld(t *testing.T, p Policy, nodes int) *world {
	t.Helper()
	m, err := NewMachine("c1", p)
	require.NoError(t, err)
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	w := &world{
		t: t, m: m, policy: p, start: start, now: start,
		replicas:    []string{"r1"},
		renewing:    map[string]bool{},
		hasLease:    map[string]bool{},
		serverRenew: map[string]time.Time{},
		kubelet:     map[string]func(string) bool{},
		arrays:      map[string]map[string]arrayclients.Health{},
		ambiguous:   map[string][]string{},
		silent:      map[string]bool{},
		renewEvery:  10 * time.Second,
		apiUp:       true, watchUp: true, quorum: true,
		changes:       map[string][]Verdict{},
		lastRenewSeen: map[string]time.Time{},
	}
	for i := range nodes {
		w.addNode(fmt.Sprintf("node-%02d", i), true)
	}
	return w
}

func (w *world) addNode(name string, withLease bool) {
	w.nodes = append(w.nodes, name)
	w.renewing[name] = withLease
	w.hasLease[name] = withLease
	// Stagger renewals over the renew interval, as real kubelets do.
	w.serverRenew[name] = w.now.Add(-time.Duration(len(w.nodes)%10) * time.Second)
	w.kubelet[name] = func(string) bool { return true }
	w.arrays[name] = map[string]arrayclients.Health{
		"pstore": {Connectivity: arrayclients.Connected, IO: arrayclients.IOActive},
	}
	w.m.ObserveNode(NodeObservation{Node: name, Ready: "True", ObservedAt: w.now})
	w.m.ObserveIdentities(IdentityObservation{Node: name, Arrays: []string{"pstore"}, ObservedAt: w.now})
	if withLease && w.watchUp {
		w.deliverLease(name)
	}
}

func (w *world) deliverLease(name string) {
	w.m.ObserveLease(LeaseObservation{Node: name, RenewTime: w.serverRenew[name].Add(w.renewSkew), Holder: name, ObservedAt: w.now})
	w.lastRenewSeen[name] = w.now
}

// kill makes a node dead: no renewals, kubelet unreachable, arrays quiet.
func (w *world) kill(name string) {
	w.renewing[name] = false
	w.kubelet[name] = func(string) bool { return false }
	for a := range w.arrays[name] {
		w.arrays[name][a] = arrayclients.Health{Connectivity: arrayclients.Disconnected, IO: arrayclients.IOIdle}
	}
}

// revive brings a killed node back.
func (w *world) revive(name string) {
	w.renewing[name] = true
	w.kubelet[name] = func(string) bool { return true }
	for a := range w.arrays[name] {
		w.arrays[name][a] = arrayclients.Health{Connectivity: arrayclients.Connected, IO: arrayclients.IOActive}
	}
}

func (w *world) self() Self {
	return Self{
		APIReachable: w.apiUp, APICheckedAt: w.now,
		WatchSynced: w.watchUp && w.apiUp,
		Quorum:      w.quorum, Paused: w.paused,
		Replicas: len(w.replicas),
	}
}

// run advances the world by d, one second at a time, evaluating the machine
// every poll interval and answering its probe requests.
func (w *world) run(d time.Duration) {
	end := w.now.Add(d)
	for w.now.Before(end) {
		w.now = w.now.Add(time.Second)
		for _, name := range w.nodes {
			if w.renewing[name] && w.apiUp && w.now.Sub(w.serverRenew[name]) >= w.renewEvery {
				w.serverRenew[name] = w.now
				w.hasLease[name] = true
				if w.watchUp && !w.watchSilent {
					w.deliverLease(name)
				}
			}
		}
		if w.nextPoll.After(w.now) {
			continue
		}
		w.nextPoll = w.now.Add(w.policy.PollInterval)
		if w.sweep {
			for _, name := range w.nodes {
				w.sampleArrays(name)
			}
		}
		res := w.m.Evaluate(w.self(), w.now)
		require.False(w.t, res.NextCheck.After(w.now.Add(w.policy.HeartbeatGrace)), "next check too far")
		require.True(w.t, res.NextCheck.After(w.now), "next check not in the future")
		w.lastEval = res
		for _, c := range res.Changes {
			w.changes[c.Node] = append(w.changes[c.Node], c)
		}
		for _, name := range res.Probe {
			w.probe(name)
		}
	}
}

func (w *world) probe(name string) {
	for _, r := range w.replicas {
		w.m.ObserveProbe(ProbeObservation{Cluster: "c1", Node: name, Replica: r, Reachable: w.kubelet[name](r), At: w.now})
	}
	if w.apiUp {
		if w.hasLease[name] {
			w.m.ObserveLease(LeaseObservation{Node: name, RenewTime: w.serverRenew[name].Add(w.renewSkew), Holder: name, ReadBack: true, ObservedAt: w.now})
		} else {
			w.m.ObserveLease(LeaseObservation{Node: name, Deleted: true, ReadBack: true, ObservedAt: w.now})
		}
	}
	w.sampleArrays(name)
}

func (w *world) sampleArrays(name string) {
	if w.silent[name] {
		return
	}
	for a, h := range w.arrays[name] {
		w.m.ObserveArray(ArrayObservation{Node: name, Array: a, Health: h, ObservedAt: w.now})
	}
}

// verdict returns the node's verdict at the last evaluation.
func (w *world) verdict(name string) Verdict {
	for _, v := range w.lastEval.Verdicts {
		if v.Node == name {
			return v
		}
	}
	w.t.Fatalf("no verdict for %s", name)
	return Verdict{}
}

// states lists the states a node's published changes went through.
func (w *world) states(name string) []State {
	var s []State
	for _, c := range w.changes[name] {
		s = append(s, c.State)
	}
	return s
}

// ever reports whether any node ever got the state.
func (w *world) ever(s State) []string {
	var out []string
	for name, cs := range w.changes {
		for _, c := range cs {
			if c.State == s {
				out = append(out, name)
				break
			}
		}
	}
	return out
}
