package detector

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/fenced-project/fenced/arrayclients"
)

// sweepingArray is a health source that lists every node at once: w0's
// SDC disconnected and idle, the others connected. It records each sweep.
type sweepingArray struct {
	countingArray
	mu2    sync.Mutex
	sweeps []bool // withIO of each sweep
	asked  [][]string
	err    error
	// noIO: w0's I/O could not be read, even for the leader.
	noIO bool
}

func (s *sweepingArray) Sweep(_ context.Context, ids []arrayclients.Identity, withIO bool) ([]arrayclients.Health, error) {
	s.mu2.Lock()
	defer s.mu2.Unlock()
	s.sweeps = append(s.sweeps, withIO)
	var nodes []string
	for _, id := range ids {
		nodes = append(nodes, id.Node)
	}
	s.asked = append(s.asked, nodes)
	if s.err != nil {
		return nil, s.err
	}
	out := make([]arrayclients.Health, len(ids))
	for i, id := range ids {
		out[i] = arrayclients.Health{Array: id.Array, Node: id.Node, Connectivity: arrayclients.Connected, IO: arrayclients.IOUnknown}
		if id.Node == "w0" {
			out[i].Connectivity, out[i].IO = arrayclients.Disconnected, arrayclients.IOUnknown
			if withIO && !s.noIO {
				out[i].IO = arrayclients.IOIdle
			}
		}
	}
	return out, nil
}

// noSweep answers ErrNoSweep, as the decorated adapter of a family
// without a listing does.
type noSweep struct {
	countingArray
	sweeps int
}

func (n *noSweep) Sweep(context.Context, []arrayclients.Identity, bool) ([]arrayclients.Health, error) {
	n.sweeps++
	return nil, arrayclients.ErrNoSweep
}

func earlyFastPolicy() Policy {
	p := fastPolicy()
	p.Early = EarlyPolicy{Enabled: true, After: 600 * time.Millisecond, ProbeFrom: 500 * time.Millisecond, KubeletProbes: 3, IOWindow: 300 * time.Millisecond}
	return p
}

// One sweep asks each array that lists many nodes once for every node of
// the last evaluation, and records each answer as that node's sample; a
// follower asks for the connection state only, the leader for the I/O of
// the disconnected nodes too. An array that has no listing is not asked
// again; a failed sweep ends the nodes' quiet runs as a failed health
// call does.
func TestSweepRecordsEveryNodesSample(t *testing.T) {
	pflex := &sweepingArray{countingArray: countingArray{calls: map[string]int{}}}
	pstore := &noSweep{countingArray: countingArray{calls: map[string]int{}}}
	lead := &leading{}
	r, err := NewRunner(RunnerConfig{
		Cluster: "c1", Replica: "r1", Policy: earlyFastPolicy(), API: newFakeAPI(2),
		Arrays:     map[string]HealthSource{"pflex": pflex, "pstore": pstore},
		Identities: twoArrays{}, Lead: lead, Logger: slog.New(slog.DiscardHandler),
	})
	require.NoError(t, err)
	ctx := context.Background()
	now := time.Now()
	for _, n := range []string{"w0", "w1"} {
		r.m.ObserveNode(NodeObservation{Node: n, Ready: "True", ObservedAt: now})
	}
	r.verdicts = map[string]State{"w0": Healthy, "w1": Healthy}
	s := &sweeper{r: r, none: map[string]bool{}}

	s.once(ctx)
	r.drain()
	require.Equal(t, []bool{false}, pflex.sweeps, "a follower reads no I/O")
	assert.Equal(t, 1, s.gone, "one node shown disconnected (see sweepDue)")
	assert.Equal(t, [][]string{{"w0", "w1"}}, pflex.asked, "one request for every node")
	assert.Equal(t, 1, pstore.sweeps)
	assert.Zero(t, pflex.count("w0")+pstore.count("w0"), "no health call per node")
	st := r.m.nodes["w0"].arrays["pflex"]
	require.NotNil(t, st)
	assert.Equal(t, arrayclients.Disconnected, st.last.Health.Connectivity)
	assert.True(t, st.quietSince.IsZero(), "I/O unknown: not quiet")
	assert.Equal(t, arrayclients.Connected, r.m.nodes["w1"].arrays["pflex"].last.Health.Connectivity)
	assert.True(t, r.m.nodes["w0"].witnessesOK)
	assert.Equal(t, []string{"pflex", "pstore"}, r.m.nodes["w0"].witnesses, "the witnesses of a node shown gone are read")
	assert.Nil(t, r.m.nodes["w1"].witnesses, "not for a connected node")

	lead.on.Store(true)
	s.once(ctx)
	r.drain()
	assert.Equal(t, []bool{false, true}, pflex.sweeps, "the leader reads the I/O")
	assert.Equal(t, 1, pstore.sweeps, "an array without a listing is not asked again")
	assert.False(t, r.m.nodes["w0"].arrays["pflex"].quietSince.IsZero(), "disconnected and idle: quiet")

	pflex.mu2.Lock()
	pflex.err = errors.New("gateway busy")
	pflex.mu2.Unlock()
	s.once(ctx)
	r.drain()
	st = r.m.nodes["w0"].arrays["pflex"]
	assert.NotEmpty(t, st.last.Err)
	assert.True(t, st.quietSince.IsZero(), "an array that could not be read ends the quiet run")
}

// In a running Runner, a node whose SDC the sweeps show disconnected has
// its kubelet probed while its heartbeat is still fresh (before
// ProbeFrom), and is not Failed while it renews.
func TestSweepStartsProbingBeforeProbeFrom(t *testing.T) {
	api := newFakeAPI(2)
	rec := &recorder{inputs: map[string]arrayclients.Node{}}
	pflex := &sweepingArray{countingArray: countingArray{calls: map[string]int{}}}
	r, err := NewRunner(RunnerConfig{
		Cluster: "c1", Replica: "r1", Policy: earlyFastPolicy(), API: api,
		Arrays: map[string]HealthSource{"pflex": pflex}, Identities: twoArrays{},
		Sink: rec, Publisher: rec, Logger: slog.New(slog.DiscardHandler),
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()
	require.Eventually(t, func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return rec.probes > 0
	}, 5*time.Second, 10*time.Millisecond, "its kubelet probed")
	assert.Zero(t, pflex.count("w1"), "a connected node with a fresh heartbeat is not probed")
	assert.Zero(t, rec.count("w0", Failed), "alive: renewing, kubelet up")
}

// A leader's sweep that could not read a disconnected node's I/O (time
// ran out with many nodes gone at once) records no sample for it: it
// neither ends nor extends the quiet run, which the next sample with I/O
// carries on (and a failed sweep still ends, above).
func TestSweepWithoutIOKeepsTheQuietRun(t *testing.T) {
	pflex := &sweepingArray{countingArray: countingArray{calls: map[string]int{}}}
	lead := &leading{}
	lead.on.Store(true)
	r, err := NewRunner(RunnerConfig{
		Cluster: "c1", Replica: "r1", Policy: earlyFastPolicy(), API: newFakeAPI(2),
		Arrays: map[string]HealthSource{"pflex": pflex}, Identities: twoArrays{}, Lead: lead,
		Logger: slog.New(slog.DiscardHandler),
	})
	require.NoError(t, err)
	ctx := context.Background()
	now := time.Now()
	for _, n := range []string{"w0", "w1"} {
		r.m.ObserveNode(NodeObservation{Node: n, Ready: "True", ObservedAt: now})
	}
	r.verdicts = map[string]State{"w0": Healthy, "w1": Healthy}
	s := &sweeper{r: r, none: map[string]bool{}}

	s.once(ctx)
	r.drain()
	st := r.m.nodes["w0"].arrays["pflex"]
	require.NotNil(t, st)
	since, last := st.quietSince, st.last.ObservedAt
	require.False(t, since.IsZero(), "disconnected and idle: quiet")

	pflex.mu2.Lock()
	pflex.noIO = true
	pflex.mu2.Unlock()
	s.once(ctx)
	r.drain()
	st = r.m.nodes["w0"].arrays["pflex"]
	assert.Equal(t, since, st.quietSince, "no I/O read: the quiet run is not ended")
	assert.Equal(t, last, st.last.ObservedAt, "and not extended: no sample was recorded")
	assert.Equal(t, arrayclients.Connected, r.m.nodes["w1"].arrays["pflex"].last.Health.Connectivity, "the other nodes' samples are")

	pflex.mu2.Lock()
	pflex.noIO = false
	pflex.mu2.Unlock()
	s.once(ctx)
	r.drain()
	st = r.m.nodes["w0"].arrays["pflex"]
	assert.Equal(t, since, st.quietSince, "the run goes on with the next sample with I/O")
	assert.True(t, st.last.ObservedAt.After(last))
}

// versionedIDs is a VersionedIdentities: pflex identities for the nodes
// it lists, and a version the test moves; it counts its lookups.
type versionedIDs struct {
	mu      sync.Mutex
	on      map[string]bool
	version uint64
	lookups int
}

func (v *versionedIDs) NodeIdentities(_, node string) ([]arrayclients.Identity, []string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.lookups++
	if !v.on[node] {
		return nil, nil
	}
	return []arrayclients.Identity{{Array: "pflex", Node: node, ObjectID: "sdc-" + node}}, nil
}

func (v *versionedIDs) IdentitiesVersion() uint64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.version
}

// learn gives node an identity and moves the version.
func (v *versionedIDs) learn(node string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.on[node] = true
	v.version++
}

func (v *versionedIDs) count() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.lookups
}

// At rest the sweep keeps its identity list: no identity lookup per node
// and poll. It reads the identities again when their version moves (a
// node learned), when the node set changes (a node added or removed, even
// at the same count), and always for a source without a version. (The
// nodes are all connected: one shown gone has its witnesses read.)
func TestSweepKeepsItsIdentityList(t *testing.T) {
	pflex := &sweepingArray{countingArray: countingArray{calls: map[string]int{}}}
	ids := &versionedIDs{on: map[string]bool{"n0": true, "n1": true}}
	r, err := NewRunner(RunnerConfig{
		Cluster: "c1", Replica: "r1", Policy: earlyFastPolicy(), API: newFakeAPI(3),
		Arrays: map[string]HealthSource{"pflex": pflex}, Identities: ids, Logger: slog.New(slog.DiscardHandler),
	})
	require.NoError(t, err)
	ctx := context.Background()
	r.verdicts = map[string]State{"n0": Healthy, "n1": Healthy, "n2": Healthy}
	s := &sweeper{r: r, none: map[string]bool{}}

	s.once(ctx)
	require.Equal(t, 3, ids.count(), "the first sweep reads every node's identities")
	s.once(ctx)
	s.once(ctx)
	assert.Equal(t, 3, ids.count(), "at rest: no lookup")
	assert.Equal(t, [][]string{{"n0", "n1"}, {"n0", "n1"}, {"n0", "n1"}}, pflex.asked)

	ids.learn("n2")
	s.once(ctx)
	assert.Equal(t, 6, ids.count(), "a new version: read again")
	assert.Equal(t, []string{"n0", "n1", "n2"}, pflex.asked[3], "n2's identity learned")
	s.once(ctx)
	assert.Equal(t, 6, ids.count())

	r.mu.Lock()
	r.verdicts = map[string]State{"n0": Healthy, "n1": Healthy, "n3": Healthy}
	r.mu.Unlock()
	ids.learn("n3")
	ids.mu.Lock()
	ids.version-- // the same version: only the node set changed
	ids.mu.Unlock()
	s.once(ctx)
	assert.Equal(t, 9, ids.count(), "another node set of the same size: read again")
	assert.Equal(t, []string{"n0", "n1", "n3"}, pflex.asked[5], "n2 gone, n3 added")

	r.mu.Lock()
	r.verdicts = map[string]State{"n0": Healthy}
	r.mu.Unlock()
	s.once(ctx)
	assert.Equal(t, []string{"n0"}, pflex.asked[6], "nodes removed")
	s.once(ctx)
	assert.Equal(t, 10, ids.count(), "one lookup, then none")

	plain := &sweeper{r: r, none: map[string]bool{}}
	r.cfg.Identities = twoArrays{}
	plain.once(ctx)
	plain.once(ctx)
	assert.Equal(t, []string{"n0"}, pflex.asked[len(pflex.asked)-1], "without a version the list is built every poll, as before")
}

// The leader sweeps at every tick (half a poll interval), so that a node's
// early I/O window starts soon after its array shows it gone, unless the
// last sweep showed more than extraSweepMaxGone nodes gone (their windows
// run; the extra statistics reads would load the array their fences
// need); a follower, whose sweep only starts its kubelet probes, at every
// other tick.
func TestSweepCadence(t *testing.T) {
	poll := DefaultPolicy().PollInterval
	count := func(leading func(i int) bool, gone int) (n int) {
		var last time.Time
		start := time.Unix(1_000_000, 0)
		for i := 1; i <= 8; i++ { // four poll intervals of ticks
			now := start.Add(time.Duration(i) * poll / 2)
			if sweepDue(leading(i), last, now, poll, gone) {
				last = now
				n++
			}
		}
		return n
	}
	always := func(int) bool { return true }
	never := func(int) bool { return false }
	assert.Equal(t, 8, count(always, 0), "the leader: every half poll interval")
	assert.Equal(t, 8, count(always, extraSweepMaxGone), "with a few nodes gone")
	assert.Equal(t, 4, count(always, extraSweepMaxGone+1), "with many gone: every poll interval")
	assert.Equal(t, 4, count(never, 0), "a follower: every poll interval")
	assert.Equal(t, 6, count(func(i int) bool { return i >= 5 }, 0), "a new leader at its next tick")
}

// A leader's probe does not ask an array whose sweep has just given the
// node a complete sample (connection and I/O): it would read the same
// again. It still asks the arrays without a listing, asks for a node the
// sweep showed connected (whose I/O the sweep does not read), and asks
// again once a sweep without I/O (a follower's) or a failed one replaced
// the samples, or the sample is older than sweptFresh.
func TestProbeSkipsAnArrayTheSweepJustRead(t *testing.T) {
	pflex := &sweepingArray{countingArray: countingArray{calls: map[string]int{}}}
	pstore := &noSweep{countingArray: countingArray{calls: map[string]int{}}}
	lead := &leading{}
	lead.on.Store(true)
	clk := testingclock.NewFakeClock(time.Now())
	p := earlyFastPolicy()
	r, err := NewRunner(RunnerConfig{
		Cluster: "c1", Replica: "r1", Policy: p, API: newFakeAPI(2), Clock: clk,
		Arrays:     map[string]HealthSource{"pflex": pflex, "pstore": pstore},
		Identities: twoArrays{}, Lead: lead, Logger: slog.New(slog.DiscardHandler),
	})
	require.NoError(t, err)
	ctx := context.Background()
	for _, n := range []string{"w0", "w1"} {
		r.m.ObserveNode(NodeObservation{Node: n, Ready: "True", ObservedAt: clk.Now()})
	}
	r.verdicts = map[string]State{"w0": Healthy, "w1": Healthy}
	s := &sweeper{r: r, none: map[string]bool{}}

	s.once(ctx)
	r.drain()
	r.probeArrays(ctx, "w0", false, true)
	r.probeArrays(ctx, "w1", false, true)
	assert.Zero(t, pflex.count("w0"), "w0's SDC was just swept with its I/O: not asked again")
	assert.Equal(t, 1, pstore.count("w0"), "an array without a listing is asked")
	assert.Equal(t, 1, pflex.count("w1"), "a node the sweep showed connected is asked")

	clk.Step(sweptFresh(p))
	r.probeArrays(ctx, "w0", false, true)
	assert.Equal(t, 1, pflex.count("w0"), "a sample sweptFresh old is asked for again")

	s.once(ctx)
	r.drain()
	lead.on.Store(false)
	s.once(ctx)
	r.drain()
	r.probeArrays(ctx, "w0", false, true)
	assert.Equal(t, 2, pflex.count("w0"), "a sweep without I/O replaced the samples")

	lead.on.Store(true)
	s.once(ctx)
	pflex.mu2.Lock()
	pflex.err = errors.New("gateway busy")
	pflex.mu2.Unlock()
	s.once(ctx)
	r.drain()
	r.probeArrays(ctx, "w0", false, true)
	assert.Equal(t, 3, pflex.count("w0"), "a failed sweep replaced the samples")
}
