package detector

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
)

var (
	hOK      = arrayclients.Health{Connectivity: arrayclients.Connected, IO: arrayclients.IOActive}
	hLost    = arrayclients.Health{Connectivity: arrayclients.Disconnected, IO: arrayclients.IOIdle}
	hLostIO  = arrayclients.Health{Connectivity: arrayclients.Disconnected, IO: arrayclients.IOActive}
	hUnknown = arrayclients.Health{Connectivity: arrayclients.ConnectivityUnknown, IO: arrayclients.IOIdle}
)

// pathWorld drives a PathMachine the way the Runner does: every node's
// health on every array is sampled each sample interval, the protected
// arrays of the nodes it asks for are looked up, and the merge runs every
// second over a main result in which every heartbeat is fresh (Healthy)
// unless stale says otherwise.
type pathWorld struct {
	t         *testing.T
	pm        *PathMachine
	p         PathLossPolicy
	now       time.Time
	nodes     []string
	health    map[string]map[string]arrayclients.Health // node -> array -> health
	protected map[string][]string
	apiErr    map[string]string // array -> its API fails
	stale     map[string]bool   // node -> heartbeat stale (main verdict Suspect)
	self      Self
	changes   map[string][]Verdict
	last      map[string]Verdict
	storms    []StorageStormState
	everStorm map[string]bool
}

func newPathWorld(t *testing.T, nodes int, p PathLossPolicy) *pathWorld {
	p.Enabled = true
	p = p.WithDefaults(Policy{PollInterval: time.Second, ProbeTimeout: time.Second})
	pm, err := NewPathMachine(p)
	require.NoError(t, err)
	w := &pathWorld{t: t, pm: pm, p: p, now: vt0, health: map[string]map[string]arrayclients.Health{},
		protected: map[string][]string{}, apiErr: map[string]string{}, stale: map[string]bool{},
		self:    Self{APIReachable: true, WatchSynced: true, Quorum: true, Replicas: 1},
		changes: map[string][]Verdict{}, last: map[string]Verdict{}, everStorm: map[string]bool{}}
	for i := range nodes {
		n := fmt.Sprintf("n%02d", i)
		w.nodes = append(w.nodes, n)
		w.health[n] = map[string]arrayclients.Health{"pflex": hOK, "pstore": hOK}
		w.protected[n] = []string{"pflex", "pstore"}
	}
	pm.SetFamily("pflex", arrayclients.PowerFlex)
	pm.SetFamily("pstore", arrayclients.PowerStore)
	return w
}

func (w *pathWorld) run(d time.Duration) {
	end := w.now.Add(d)
	var nextSample time.Time
	for w.now.Before(end) {
		w.now = w.now.Add(time.Second)
		if !w.now.Before(nextSample) {
			nextSample = w.now.Add(w.p.SampleInterval)
			errs := map[string]int{}
			for _, n := range w.nodes {
				for a, h := range w.health[n] {
					o := ArrayObservation{Node: n, Array: a, Health: h, ObservedAt: w.now}
					if e := w.apiErr[a]; e != "" {
						o.Health, o.Err = arrayclients.Health{}, e
						errs[a]++
					}
					w.pm.ObserveSample(o)
				}
			}
			for _, a := range []string{"pflex", "pstore"} {
				w.pm.ObserveSweep(ArraySweep{Array: a, Samples: len(w.nodes), Errors: errs[a], At: w.now})
			}
			for _, n := range w.pm.NeedVolumes() {
				w.pm.ObserveProtected(n, w.protected[n], w.now)
			}
		}
		res := Result{Cluster: "c1", Counts: map[State]int{}}
		for _, n := range w.nodes {
			v := Verdict{Cluster: "c1", Node: n, State: Healthy, EvaluatedAt: w.now}
			if w.stale[n] {
				v.State, v.Reason = Suspect, ReasonHeartbeatStale
			}
			res.Verdicts = append(res.Verdicts, v)
		}
		self := w.self
		self.APICheckedAt = w.now
		out, storms := w.pm.Merge(res, self, w.now)
		require.True(w.t, out.NextCheck.After(w.now))
		w.storms = storms
		for _, s := range storms {
			if s.Active {
				w.everStorm[s.Array] = true
			}
		}
		total := 0
		for _, c := range out.Counts {
			total += c
		}
		require.Equal(w.t, len(w.nodes), total)
		for _, c := range out.Changes {
			w.changes[c.Node] = append(w.changes[c.Node], c)
		}
		for _, v := range out.Verdicts {
			w.last[v.Node] = v
		}
	}
}

func (w *pathWorld) states(n string) []State {
	var s []State
	for _, c := range w.changes[n] {
		s = append(s, c.State)
	}
	return s
}

func (w *pathWorld) failed() []string {
	var out []string
	for n, cs := range w.changes {
		for _, c := range cs {
			if c.State == Failed {
				out = append(out, n)
				break
			}
		}
	}
	return out
}

func (w *pathWorld) storm(array string) StorageStormState {
	for _, s := range w.storms {
		if s.Array == array {
			return s
		}
	}
	return StorageStormState{}
}

func TestPathLossDecisions(t *testing.T) {
	grace := 30 * time.Second
	pol := PathLossPolicy{Grace: grace, MaxDisconnected: Limit{Value: 1}}
	cases := []struct {
		name  string
		nodes int
		pol   func(*PathLossPolicy)
		run   func(w *pathWorld)
		check func(t *testing.T, w *pathWorld)
	}{
		{
			name: "PowerFlex SDC disconnected, no I/O, past the grace: Failed storage-path-lost once", nodes: 6,
			run: func(w *pathWorld) {
				w.run(10 * time.Second)
				w.health["n02"]["pflex"] = hLost
				w.run(grace - 5*time.Second)
				require.Equal(w.t, Suspect, w.last["n02"].State, "degraded during the grace")
				require.Equal(w.t, ReasonStoragePathDegraded, w.last["n02"].Reason)
				w.run(20 * time.Second)
			},
			check: func(t *testing.T, w *pathWorld) {
				v := w.last["n02"]
				assert.Equal(t, Failed, v.State)
				assert.Equal(t, ReasonStoragePathLost, v.Reason)
				assert.Equal(t, []string{"storage-path"}, v.Evidence.CorroboratedBy)
				require.NotNil(t, v.Evidence.StoragePath)
				assert.Equal(t, []string{"pflex"}, v.Evidence.StoragePath.LostOn)
				assert.GreaterOrEqual(t, v.Evidence.StoragePath.FailedAt.Sub(v.Evidence.StoragePath.LostSince["pflex"]), grace)
				assert.Equal(t, []State{Healthy, Suspect, Failed}, w.states("n02"), "one verdict, not a stream")
				assert.Equal(t, []string{"n02"}, w.failed())
				assert.False(t, w.everStorm["pflex"])
			},
		},
		{
			name: "PowerStore initiators without sessions past the grace: Failed", nodes: 6,
			run: func(w *pathWorld) {
				w.run(5 * time.Second)
				w.health["n04"]["pstore"] = hLost
				w.run(grace + 10*time.Second)
			},
			check: func(t *testing.T, w *pathWorld) {
				assert.Equal(t, []string{"n04"}, w.failed())
				assert.Equal(t, []string{"pstore"}, w.last["n04"].Evidence.StoragePath.LostOn)
			},
		},
		{
			name: "disconnected for less than the grace, then back: never Failed", nodes: 6,
			run: func(w *pathWorld) {
				w.run(5 * time.Second)
				w.health["n01"]["pflex"] = hLost
				w.run(grace - 10*time.Second)
				w.health["n01"]["pflex"] = hOK
				w.run(2 * grace)
			},
			check: func(t *testing.T, w *pathWorld) {
				assert.Empty(t, w.failed())
				assert.Equal(t, Healthy, w.last["n01"].State)
			},
		},
		{
			name: "flapping path restarts the grace each time: never Failed", nodes: 6,
			run: func(w *pathWorld) {
				for range 5 {
					w.health["n01"]["pflex"] = hLost
					w.run(grace - 8*time.Second)
					w.health["n01"]["pflex"] = hOK
					w.run(6 * time.Second)
				}
			},
			check: func(t *testing.T, w *pathWorld) { assert.Empty(t, w.failed()) },
		},
		{
			name: "disconnected but I/O flowing: no fence", nodes: 6,
			run: func(w *pathWorld) {
				w.health["n03"]["pflex"] = hLostIO
				w.run(3 * grace)
			},
			check: func(t *testing.T, w *pathWorld) {
				assert.Empty(t, w.failed())
				assert.Equal(t, []State{Healthy}, w.states("n03"))
			},
		},
		{
			name: "PowerScale-like unknown connectivity is never a positive signal", nodes: 6,
			run: func(w *pathWorld) {
				w.health["n03"]["pflex"] = hUnknown
				w.run(3 * grace)
			},
			check: func(t *testing.T, w *pathWorld) { assert.Empty(t, w.failed()) },
		},
		{
			name: "no protected pod with a volume on the lost array: no fence", nodes: 6,
			run: func(w *pathWorld) {
				w.protected["n05"] = []string{"pstore"}
				w.health["n05"]["pflex"] = hLost
				w.run(3 * grace)
			},
			check: func(t *testing.T, w *pathWorld) {
				assert.Empty(t, w.failed())
				assert.Equal(t, Healthy, w.last["n05"].State)
			},
		},
		{
			name: "the array reports every node disconnected: storage storm, none Failed; when it clears nothing was done", nodes: 6,
			run: func(w *pathWorld) {
				w.run(5 * time.Second)
				for _, n := range w.nodes {
					w.health[n]["pflex"] = hLost
				}
				w.run(3 * grace)
				s := w.storm("pflex")
				require.True(w.t, s.Active)
				require.Equal(w.t, "disconnected", s.Reason)
				require.Equal(w.t, 6, s.Disconnected)
				require.Equal(w.t, 1, s.Limit)
				for _, n := range w.nodes {
					require.Equal(w.t, Blocked, w.last[n].State, n)
					require.Equal(w.t, ReasonStorageStorm, w.last[n].Reason, n)
					require.True(w.t, w.last[n].Evidence.WouldFail)
				}
				for _, n := range w.nodes {
					w.health[n]["pflex"] = hOK
				}
				w.run(3 * grace)
			},
			check: func(t *testing.T, w *pathWorld) {
				assert.Empty(t, w.failed())
				assert.False(t, w.storm("pflex").Active)
				for _, n := range w.nodes {
					assert.Equal(t, Healthy, w.last[n].State, n)
				}
			},
		},
		{
			name: "after a storm clears, a node still lost needs a full grace again", nodes: 6,
			run: func(w *pathWorld) {
				for _, n := range w.nodes {
					w.health[n]["pflex"] = hLost
				}
				w.run(2 * grace)
				for _, n := range w.nodes[1:] {
					w.health[n]["pflex"] = hOK
				}
				w.run(grace - 5*time.Second)
				require.Empty(w.t, w.failed(), "fenced before a full grace after the storm")
				w.run(15 * time.Second) // the new run starts at the next sample
			},
			check: func(t *testing.T, w *pathWorld) { assert.Equal(t, []string{"n00"}, w.failed()) },
		},
		{
			name: "the array's API returns errors: storage storm (api-error), none Failed", nodes: 6,
			run: func(w *pathWorld) {
				w.health["n02"]["pflex"] = hLost
				w.run(10 * time.Second)
				w.apiErr["pflex"] = "array unreachable: 500 Internal Server Error"
				w.run(3 * grace)
				s := w.storm("pflex")
				require.True(w.t, s.Active)
				require.Equal(w.t, "api-error", s.Reason)
				w.apiErr["pflex"] = ""
				w.health["n02"]["pflex"] = hOK
				w.run(grace)
			},
			check: func(t *testing.T, w *pathWorld) {
				assert.Empty(t, w.failed())
				assert.False(t, w.storm("pflex").Active)
			},
		},
		{
			name: "percentage limit: 2 of 10 nodes disconnected with 20% is not a storm", nodes: 10,
			pol: func(p *PathLossPolicy) { p.MaxDisconnected = Limit{Value: 20, Percent: true} },
			run: func(w *pathWorld) {
				w.health["n01"]["pflex"] = hLost
				w.health["n02"]["pflex"] = hLost
				w.run(grace + 10*time.Second)
			},
			check: func(t *testing.T, w *pathWorld) {
				assert.ElementsMatch(t, []string{"n01", "n02"}, w.failed())
				assert.False(t, w.everStorm["pflex"])
			},
		},
		{
			name: "stale heartbeat: the main verdict stands", nodes: 6,
			run: func(w *pathWorld) {
				w.stale["n02"] = true
				w.health["n02"]["pflex"] = hLost
				w.run(2 * grace)
			},
			check: func(t *testing.T, w *pathWorld) {
				assert.Empty(t, w.failed())
				assert.Equal(t, ReasonHeartbeatStale, w.last["n02"].Reason)
			},
		},
		{
			name: "no quorum or paused: Blocked, not Failed", nodes: 6,
			run: func(w *pathWorld) {
				w.self.Quorum = false
				w.health["n02"]["pflex"] = hLost
				w.run(2 * grace)
				require.Equal(w.t, ReasonNoQuorum, w.last["n02"].Reason)
				w.self.Quorum, w.self.Paused = true, true
				w.run(5 * time.Second)
				require.Equal(w.t, ReasonPaused, w.last["n02"].Reason)
			},
			check: func(t *testing.T, w *pathWorld) { assert.Empty(t, w.failed()) },
		},
		{
			name: "Failed is sticky until the path is back", nodes: 6,
			run: func(w *pathWorld) {
				w.run(5 * time.Second)
				w.health["n02"]["pflex"] = hLost
				w.run(grace + 5*time.Second)
				w.protected["n02"] = nil // its pods were force-deleted
				w.run(grace)
				require.Equal(w.t, Failed, w.last["n02"].State)
				w.health["n02"]["pflex"] = hOK
				w.run(5 * time.Second)
			},
			check: func(t *testing.T, w *pathWorld) {
				assert.Equal(t, []State{Healthy, Suspect, Failed, Healthy}, w.states("n02"))
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := pol
			if c.pol != nil {
				c.pol(&p)
			}
			w := newPathWorld(t, c.nodes, p)
			c.run(w)
			c.check(t, w)
		})
	}
}

func TestPathLossPolicy(t *testing.T) {
	_, err := NewPathMachine(DefaultPathLossPolicy())
	require.Error(t, err, "the default is off: no path machine")
	p := DefaultPathLossPolicy()
	p.Enabled = true
	p = p.WithDefaults(DefaultPolicy())
	assert.Equal(t, 20*time.Second, p.SampleInterval)
	assert.Equal(t, 42*time.Second, p.SampleMaxAge)
	require.NoError(t, p.Validate())
	p.Grace = 0
	require.ErrorContains(t, p.Validate(), "storagePathLoss grace")
	p = DefaultPathLossPolicy().WithDefaults(DefaultPolicy())
	p.Enabled, p.MaxDisconnected = true, Limit{Value: 101, Percent: true}
	assert.ErrorContains(t, p.Validate(), "storagePathLoss maxDisconnected")
}

// The grace counts a run of samples the array was seen to report: a node
// whose samples stop for longer than the sample age (it left the sweep)
// and resume still lost starts a new run, and is Failed a whole grace after
// the samples resumed, not a grace after the run before the gap began.
func TestPathLossRunDoesNotSpanAGapInSamples(t *testing.T) {
	grace := 30 * time.Second
	w := newPathWorld(t, 6, PathLossPolicy{Grace: grace, MaxDisconnected: Limit{Value: 1}})
	w.run(10 * time.Second)
	w.health["n02"]["pflex"] = hLost
	w.run(10 * time.Second)
	require.Equal(t, Suspect, w.last["n02"].State, "degraded")
	delete(w.health["n02"], "pflex") // no more samples of n02 on pflex
	w.run(w.p.SampleMaxAge + 5*time.Second)
	w.health["n02"]["pflex"] = hLost
	resumed := w.now
	w.run(grace - 5*time.Second)
	assert.NotEqual(t, Failed, w.last["n02"].State, "Failed %v after the samples resumed: the run spanned the gap", w.now.Sub(resumed))
	w.run(20 * time.Second)
	v := w.last["n02"]
	require.Equal(t, Failed, v.State)
	assert.GreaterOrEqual(t, v.Evidence.StoragePath.LostSince["pflex"].Sub(resumed), time.Duration(0), "the run began after the gap")
}
