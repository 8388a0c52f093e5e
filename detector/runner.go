package detector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/fenced-project/fenced/kube"
)

// RunnerConfig wires a Runner. API, Cluster, Replica and Policy are
// required; the rest are optional.
type RunnerConfig struct {
	// Cluster is the configured cluster name.
	Cluster string
	// Replica is this replica's name (its vantage point).
	Replica string
	// Replicas is the number of replicas in the group (default 1).
	Replicas int
	Policy   Policy
	API      ClusterAPI
	// Arrays maps an array name to its health source (an
	// arrayclients.Adapter).
	Arrays map[string]HealthSource
	// Identities gives the identities learned for a node; without it the
	// array corroboration can never hold.
	Identities IdentitySource
	// Footprints names the arrays holding a node's storage footprint: the
	// early verdict's array witnesses. Without it they are the arrays
	// where the node has an identity.
	Footprints FootprintSource
	// Vantage gives the other replicas' fresh kubelet probes; a replica it
	// leaves out does not count (see VantageBoard).
	Vantage VantageSource
	// Sink records this replica's probes and healthy nodes' identity inputs.
	Sink ObservationSink
	// Guard reports quorum and pause; without it the group counts as having
	// a quorum and fencing as not paused.
	Guard Guard
	// Lead reports whether this replica leads the group. Only the leader
	// asks the arrays about a probed node: its verdicts are the ones the
	// pipeline acts on, and a follower's array samples would feed only its
	// own status, at two more requests per probe on every array. Without
	// it (a single replica) the runner always asks. (Every replica sweeps
	// the arrays that list all nodes in one request, see sweeper; only the
	// leader reads I/O in a sweep.)
	Lead      Lead
	Publisher Publisher
	Metrics   *Metrics
	Logger    *slog.Logger
	Clock     clock.WithTicker
	// ProbeConcurrency bounds the nodes probed at once (default 16).
	ProbeConcurrency int
	// PathLoss turns on the storage path loss path (nil: off).
	PathLoss *PathLossConfig
}

// Runner is the I/O shell around a Machine for one cluster: it feeds the
// informers' events, probe results and API server checks into the machine,
// evaluates it when due, publishes verdict changes, and learns healthy
// nodes' identity inputs.
type Runner struct {
	cfg RunnerConfig
	m   *Machine
	clk clock.WithTicker
	log *slog.Logger

	mu       sync.Mutex
	pending  []func(*Machine)
	api      apiCheck
	status   Status
	verdicts map[string]State

	wake chan struct{}
	kick chan struct{}

	inflight map[string]bool // guarded by mu
	probeSet []string        // loop goroutine only
	probes   sync.WaitGroup
	sem      chan struct{}
	// swept is the leader's sweeps' complete samples, which spare the
	// probes a health call (see sweptSamples).
	swept   sweptSamples
	learner *learner
	paths   *pathRunner // nil unless storage path loss is on
	doubt   Reason
	storm   bool
	// leaseEvery is the renewal interval of the last Lease timing warning
	// logged (zero: none).
	leaseEvery time.Duration
}

type apiCheck struct {
	ok  bool
	at  time.Time
	err string
	// restoredAt is when a check succeeded again after a failed one.
	restoredAt time.Time
}

// NewRunner checks the configuration and builds the machine.
func NewRunner(cfg RunnerConfig) (*Runner, error) {
	if cfg.API == nil {
		return nil, errors.New("detector runner: API is nil")
	}
	if cfg.Cluster == "" || cfg.Replica == "" {
		return nil, fmt.Errorf("detector runner: cluster %q and replica %q must be set", cfg.Cluster, cfg.Replica)
	}
	m, err := NewMachine(cfg.Cluster, cfg.Policy)
	if err != nil {
		return nil, err
	}
	if cfg.Replicas < 1 {
		cfg.Replicas = 1
	}
	if cfg.ProbeConcurrency < 1 {
		cfg.ProbeConcurrency = 16
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	r := &Runner{
		cfg: cfg, m: m, clk: cfg.Clock,
		log:      cfg.Logger.With("cluster", cfg.Cluster),
		verdicts: map[string]State{},
		wake:     make(chan struct{}, 1),
		kick:     make(chan struct{}, 1),
		inflight: map[string]bool{},
		sem:      make(chan struct{}, cfg.ProbeConcurrency),
		status:   Status{Cluster: cfg.Cluster, Counts: map[State]int{}, Nodes: []Verdict{}},
	}
	r.learner = newLearner(r)
	if cfg.PathLoss != nil && cfg.PathLoss.Policy.Enabled {
		if r.paths, err = newPathRunner(r, *cfg.PathLoss); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Status returns the latest status section.
func (r *Runner) Status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.status
}

// Run watches the cluster until ctx ends. It returns nil when ctx ends, or
// an error if the watches cannot be started.
func (r *Runner) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	defer r.probes.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer r.learner.shutdown()
	if err := r.cfg.API.StartWatches(ctx, r.onEvent); err != nil {
		return fmt.Errorf("detector %s: %w", r.cfg.Cluster, err)
	}
	wg.Go(func() { r.checkAPI(ctx) })
	wg.Go(func() { r.learner.run(ctx) })
	if r.paths != nil {
		wg.Go(func() { r.paths.run(ctx) })
	}
	if r.cfg.Policy.Early.Enabled && r.cfg.Identities != nil && len(r.cfg.Arrays) > 0 {
		s := &sweeper{r: r, none: map[string]bool{}}
		wg.Go(func() { s.run(ctx) })
	}
	// The first evaluation waits for the first API server check (it kicks
	// the loop) or one poll interval, whichever comes first.
	timer := r.clk.NewTimer(r.cfg.Policy.PollInterval)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-r.wake:
			r.drain()
			continue
		case <-r.kick:
		case <-timer.C():
		}
		next := r.step(ctx)
		timer.Stop()
		timer.Reset(max(next.Sub(r.clk.Now()), time.Millisecond))
	}
}

// pendingWakeAt is how many observations wait for the next evaluation
// before the loop is woken to apply them. Every evaluation applies what
// waits first (step), and an observation carries the time it was made,
// so applying it later changes nothing; waking the loop for each one cost
// a goroutine wake-up per Lease renewal, 200 a second at 2,000 nodes. The
// bound keeps the waiting list small between evaluations.
const pendingWakeAt = 256

// enqueue records f to be applied to the machine before the next
// evaluation; with evaluate, that evaluation runs now.
func (r *Runner) enqueue(f func(*Machine), evaluate bool) {
	r.mu.Lock()
	r.pending = append(r.pending, f)
	n := len(r.pending)
	r.mu.Unlock()
	ch := r.kick
	if !evaluate {
		if n < pendingWakeAt {
			return
		}
		ch = r.wake
	}
	select {
	case ch <- struct{}{}:
	default:
	}
}

func (r *Runner) drain() {
	r.mu.Lock()
	p := r.pending
	r.pending = nil
	r.mu.Unlock()
	for _, f := range p {
		f(r.m)
	}
}

// onEvent runs on the informers' goroutines: it only records.
func (r *Runner) onEvent(ev kube.Event) {
	switch ev.Kind {
	case kube.KindNode:
		obs := NodeObservation{Node: ev.Name, Deleted: ev.Deleted, Ready: kube.ReadyStatus(ev.Node), ObservedAt: ev.At}
		r.enqueue(func(m *Machine) { m.ObserveNode(obs) }, false)
		r.learner.add(ev.Name)
	case kube.KindLease:
		obs := LeaseObservation{Node: ev.Name, Deleted: ev.Deleted, ObservedAt: ev.At}
		if ev.Lease != nil {
			obs.fromLease(ev.Lease)
		}
		r.enqueue(func(m *Machine) { m.ObserveLease(obs) }, false)
	case kube.KindCSINode:
		r.learner.add(ev.Name)
	}
}

func (r *Runner) checkAPI(ctx context.Context) {
	t := r.clk.NewTicker(r.cfg.Policy.APICheckInterval)
	defer t.Stop()
	for {
		cctx, cancel := context.WithTimeout(ctx, r.cfg.Policy.APICheckTimeout)
		err := r.cfg.API.CheckAPIServer(cctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		c := apiCheck{ok: err == nil, at: r.clk.Now()}
		if err != nil {
			c.err = err.Error()
		}
		r.mu.Lock()
		changed := r.api.ok != c.ok
		c.restoredAt = r.api.restoredAt
		if c.ok && !r.api.ok && !r.api.at.IsZero() {
			c.restoredAt = c.at
		}
		r.api = c
		r.mu.Unlock()
		if changed {
			r.enqueue(func(*Machine) {}, true)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

func (r *Runner) self() Self {
	r.mu.Lock()
	api := r.api
	r.mu.Unlock()
	ws := r.cfg.API.WatchState()
	s := Self{
		APIReachable: api.ok, APICheckedAt: api.at, APIError: api.err,
		WatchSynced: ws.Synced, WatchError: ws.Error,
		Quorum: true, Replicas: r.cfg.Replicas,
	}
	// After an API server outage the Lease watch resumes only when the
	// reflector's backoff lets it; until it shows progress, the view is not
	// restored.
	if s.WatchError == "" && !api.restoredAt.IsZero() && ws.LastLeaseProgress.Before(api.restoredAt) {
		s.WatchError = "lease watch has not resumed since the API server returned at " + api.restoredAt.Format(time.RFC3339)
	}
	if g := r.cfg.Guard; g != nil {
		s.Quorum = g.Quorum()
		s.Paused = g.Paused(r.cfg.Cluster)
	}
	return s
}

// step evaluates the machine once and acts on the result.
func (r *Runner) step(ctx context.Context) time.Time {
	r.drain()
	if v := r.cfg.Vantage; v != nil {
		for _, name := range r.probeSet {
			r.m.ReplaceVantage(name, r.cfg.Replica, v.Probes(r.cfg.Cluster, name))
		}
	}
	self := r.self()
	now := r.clk.Now()
	res := r.m.Evaluate(self, now)
	var storms []StorageStormState
	if r.paths != nil {
		res, storms = r.paths.merge(res, self, now)
	}
	r.cfg.Metrics.observe(res)
	r.report(res)
	st := NewStatus(res, self, now)
	st.StorageStorm = storms
	verdicts := make(map[string]State, len(res.Verdicts))
	for _, v := range res.Verdicts {
		verdicts[v.Node] = v.State
	}
	r.mu.Lock()
	r.status = st
	r.verdicts = verdicts
	r.mu.Unlock()
	for _, c := range res.Changes {
		if c.State == Healthy {
			r.learner.add(c.Node)
		}
	}
	if len(res.Changes) > 0 && r.cfg.Publisher != nil {
		r.cfg.Publisher.PublishVerdicts(ctx, res.Changes)
	}
	r.probeSet = res.Probe
	r.probe(ctx, res.Probe, res.WitnessesOnly)
	return res.NextCheck
}

// report logs doubt and storm transitions loudly and every verdict change.
func (r *Runner) report(res Result) {
	if res.Doubt != r.doubt {
		if res.Doubt != ReasonNone {
			r.log.Warn("this replica doubts its view of the cluster: every node is blocked", "reason", string(res.Doubt))
		} else {
			r.log.Info("view of the cluster restored", "after", string(r.doubt))
		}
		r.doubt = res.Doubt
	}
	if res.Storm.Active != r.storm {
		if res.Storm.Active {
			r.log.Error("STORM GUARD ACTIVE: more nodes look dead at once than the limit allows; no node will be declared failed",
				"unhealthy", res.Storm.Unhealthy, "limit", res.Storm.Limit, "nodes", res.Storm.Total)
		} else {
			r.log.Warn("storm guard released", "unhealthy", res.Storm.Unhealthy, "limit", res.Storm.Limit)
		}
		r.storm = res.Storm.Active
	}
	switch lt := res.LeaseTiming; {
	case lt != nil && lt.RenewEvery != r.leaseEvery:
		r.log.Warn("node Lease renewals too seldom for the cluster's timing: "+lt.String(),
			"nodes", lt.Nodes, "renewEvery", lt.RenewEvery.String(), "example", lt.Example, "lateFrom", lt.LateFrom.String())
		r.leaseEvery = lt.RenewEvery
	case lt == nil && r.leaseEvery != 0:
		r.log.Info("node Lease renewals fit the cluster's timing again")
		r.leaseEvery = 0
	}
	healthy := 0
	for _, c := range res.Changes {
		if c.State == Healthy {
			healthy++
		}
	}
	summarize := healthy > healthyLogEach
	var first []string
	for _, c := range res.Changes {
		if res.Doubt != ReasonNone && c.State == Blocked {
			continue
		}
		if c.State == Healthy && summarize {
			if len(first) < healthyLogEach {
				first = append(first, c.Node)
			}
			continue
		}
		level := slog.LevelInfo
		if c.State == Failed || c.State == Blocked {
			level = slog.LevelWarn
		}
		r.log.Log(context.Background(), level, "node verdict", "node", c.Node, "state", string(c.State),
			"reason", string(c.Reason), "partitioned", c.Partitioned, "heartbeatAge", c.Evidence.HeartbeatAge.String())
	}
	if summarize {
		r.log.Info("node verdicts", "state", string(Healthy), "nodes", healthy, "first", first)
	}
}

// healthyLogEach is how many nodes turning Healthy in one evaluation are
// logged one line each; more are logged in one line. Every node turns
// Healthy at once at a replica's start and when a doubt clears: at 5,000
// nodes a line each made 5,000 lines every time (250,000 in 12 minutes of
// an overloaded test bed whose API server checks kept failing).
const healthyLogEach = 10
