package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fenced-project/fenced/cluster/ledger"
	"github.com/fenced-project/fenced/configs"
	"github.com/fenced-project/fenced/tests/invariants"
	"github.com/fenced-project/fenced/tests/testbed"
)

// ChaosConfig configures a chaos run over a started harness.
type ChaosConfig struct {
	// Seed makes the schedule reproducible (the same seed gives the same
	// sequence of choices; timing still varies).
	Seed uint64
	// Duration is how long faults are injected, before the run heals
	// everything and settles.
	Duration time.Duration
	// MeanGap is the mean time between two faults. Default 6 s.
	MeanGap time.Duration
	// MaxNodesDown bounds the nodes that are dead or hung at once. Default 2.
	MaxNodesDown int
	// Settle bounds the wait, after healing, for every fence to be undone.
	// Default: 4 minutes, or twice the cluster's settlePeriod plus 2
	// minutes if that is longer (a node rebooted at the heal is called
	// healthy after settlePeriod of fresh heartbeats, and the pipeline
	// unfences it after settlePeriod more of healthy verdicts).
	Settle time.Duration
	// Out receives the seed, every fault as it is injected and the summary.
	Out io.Writer
	// Transient limits the schedule to the faults that must never fence
	// (see stepTransient), each shorter than the heartbeat grace, plus
	// real node deaths; a fence of a node that was not dead is then a
	// false fence and fails the run.
	Transient bool
}

// ChaosResult is what a chaos run did and found.
type ChaosResult struct {
	Seed uint64
	// Faults are the faults injected, in order (the harness's timeline).
	Faults []invariants.Event
	// Fences counts the fence records that reached "fenced"; Evictions
	// those that reached "evicted"; Unfences those restored.
	Fences, Evictions, Unfences int
	// Unsettled lists the fences still open after healing and the settle
	// wait (a liveness problem, reported with the violations).
	Unsettled []string
	// Report is the invariant checker's report over the run's evidence.
	Report *invariants.Report
	// Transient is set for a run of the transient profile; FalseFences then
	// lists the fences of nodes that were not dead when they were opened.
	Transient   bool
	FalseFences []string
	// EarlyVerdicts counts the fences opened on an early verdict,
	// GraceVerdicts those opened on a verdict at the heartbeat grace.
	EarlyVerdicts, GraceVerdicts int
	// Regrants are the transient profile's re-grant faults, and Held
	// what they did as the checker's held rule saw it (nil in the other
	// profile).
	Regrants []RegrantFault
	Held     *HeldFigures
}

// OK reports whether the run broke no invariant, settled and, in the
// transient profile, fenced no node that was not dead.
func (r *ChaosResult) OK() bool {
	return r.Report != nil && r.Report.OK() && len(r.Unsettled) == 0 && len(r.FalseFences) == 0
}

// chaos is one run's state: what is currently broken.
type chaos struct {
	h     *Harness
	cfg   ChaosConfig
	rng   *rand.Rand
	start time.Time

	replicaDown map[string]bool
	replicaCut  map[string]bool
	apiCut      map[string]bool
	arrayCut    map[string]bool
	nodeState   map[string]testbed.NodeState
	// healed are the nodes rebooted while healing.
	healed map[string]bool
	// dead are, per node, the times it was killed or hung and came back
	// (an open window has a zero end).
	dead map[string][]window
	// pending are the heals of faults that end on their own (a kubelet
	// restart, a management network cut), by when they are due.
	pending []pendingHeal
	// kubeletDown are the nodes whose kubelet the transient profile
	// stopped.
	kubeletDown map[string]bool
	// footprints are, per node killed in the transient profile, the
	// volumes it held when it died; regrants the re-grant faults
	// injected.
	footprints map[string]*chaosFootprint
	regrants   []RegrantFault
	// heldSince are, per dead node, when the run first saw its fence
	// held.
	heldSince map[string]time.Time
}

type window struct{ from, to time.Time }

type pendingHeal struct {
	at  time.Time
	run func()
}

// RunChaos injects a seeded random schedule of faults — replica kill -9 and
// restart, partitions of a replica from its peers, cuts of a replica from
// the apiserver, array outages, apiserver restarts, node deaths, hangs,
// reboots and returns without reboot — for cfg.Duration; then heals
// everything, reboots every node that is not up or still fenced, waits for
// every fence to be undone, stops the replicas and runs the invariant
// checker over the evidence. It deploys a StatefulSet first so that
// evictions happen.
func RunChaos(h *Harness, cfg ChaosConfig) (*ChaosResult, error) {
	if cfg.MeanGap == 0 {
		cfg.MeanGap = 6 * time.Second
	}
	if cfg.MaxNodesDown == 0 {
		cfg.MaxNodesDown = 2
	}
	if cfg.Settle == 0 {
		settle := h.opts.Timing.SettlePeriod
		if settle == 0 {
			settle = configs.DefaultCluster().SettlePeriod
		}
		cfg.Settle = max(4*time.Minute, 2*settle+2*time.Minute)
	}
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	c := &chaos{h: h, cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		replicaDown: map[string]bool{}, replicaCut: map[string]bool{}, apiCut: map[string]bool{},
		arrayCut: map[string]bool{}, nodeState: map[string]testbed.NodeState{}, healed: map[string]bool{},
		dead: map[string][]window{}, kubeletDown: map[string]bool{}, footprints: map[string]*chaosFootprint{},
		heldSince: map[string]time.Time{}}
	for name := range h.Nodes {
		c.nodeState[name] = testbed.NodeUp
	}
	profile := "all faults"
	if cfg.Transient {
		profile = "transient faults and node deaths"
	}
	fmt.Fprintf(cfg.Out, "chaos: seed %d, duration %s, %d nodes, replicas %v, %s\n", cfg.Seed, cfg.Duration, len(h.Nodes), h.IDs, profile)
	h.WaitLeader(time.Minute)
	sets := []testbed.StatefulSetSpec{{Namespace: "db", Name: "chaos",
		Replicas: int32(max(1, len(h.Nodes)-cfg.MaxNodesDown)), AntiAffinity: true}}
	if cfg.Transient {
		// Some nodes also hold a PowerScale volume: an array without
		// session state, so their verdicts wait for the grace.
		sets = append(sets, testbed.StatefulSetSpec{Namespace: "db", Name: "chaos-nfs", Driver: testbed.DriverPowerScale,
			Replicas: int32(max(1, len(h.Nodes)/3)), AntiAffinity: true})
		// And a ReadWriteMany csi-powerstore NFS volume: one the driver
		// publishes again to a fenced node whatever other node has it
		// (the re-grant fault).
		sets = append(sets, testbed.StatefulSetSpec{Namespace: "db", Name: "chaos-rwx", Driver: testbed.DriverPowerStore,
			NFS: true, ReadWriteMany: true, Replicas: int32(max(1, len(h.Nodes)-cfg.MaxNodesDown)), AntiAffinity: true})
	}
	for _, set := range sets {
		if _, err := h.CP.CreateStatefulSet(h.ctx, set); err != nil {
			return nil, fmt.Errorf("chaos: deploy the StatefulSet %s: %w", set.Name, err)
		}
		if err := c.waitDeployed(set.Name); err != nil {
			return nil, err
		}
	}
	h.SettleArrays()
	c.start = time.Now()
	end := c.start.Add(cfg.Duration)
	for time.Now().Before(end) {
		gap := time.Duration(c.rng.ExpFloat64() * float64(cfg.MeanGap))
		gap = min(max(gap, 500*time.Millisecond), 4*cfg.MeanGap)
		if err := c.sleep(time.Now().Add(gap), end); err != nil {
			return nil, err
		}
		if time.Now().After(end) {
			break
		}
		if cfg.Transient {
			c.stepTransient()
		} else {
			c.step()
		}
	}
	res := &ChaosResult{Seed: cfg.Seed, Transient: cfg.Transient}
	c.logf("healing everything")
	c.healAll()
	res.Unsettled = c.settle()
	in, opts, err := h.Inputs()
	if err != nil {
		return nil, fmt.Errorf("chaos: gather evidence: %w", err)
	}
	res.Faults = in.Timeline
	for _, f := range in.Ledger.Fences {
		states := map[ledger.FenceState]bool{}
		for _, s := range f.Steps {
			states[s.To] = true
		}
		if states[ledger.StateFenced] {
			res.Fences++
		}
		if states[ledger.StateEvicted] {
			res.Evictions++
		}
		if states[ledger.StateRestored] {
			res.Unfences++
		}
	}
	c.classify(res, in.Ledger.Fences)
	res.Report = invariants.Check(in, opts)
	if cfg.Transient {
		period := opts.HeldPeriod
		if period <= 0 {
			period = invariants.DefaultHeldPeriod
		}
		res.Regrants = c.regrants
		fig := heldFigures(c.regrants, res.Report.Held, in.Ledger.Fences, period)
		res.Held = &fig
	}
	c.summary(res)
	return res, nil
}

func (c *chaos) logf(format string, args ...any) {
	fmt.Fprintf(c.cfg.Out, "%8s  %s\n", time.Since(c.start).Round(100*time.Millisecond), fmt.Sprintf(format, args...))
}

// pick returns a random element of a sorted copy of xs.
func (c *chaos) pick(xs []string) string {
	xs = slices.Clone(xs)
	sort.Strings(xs)
	return xs[c.rng.IntN(len(xs))]
}

func keys(m map[string]bool) []string {
	var out []string
	for k, v := range m {
		if v {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// disturbedReplicas counts replicas that are down or cut from their peers.
func (c *chaos) disturbedReplicas() int {
	n := 0
	for _, id := range c.h.IDs {
		if c.replicaDown[id] || c.replicaCut[id] {
			n++
		}
	}
	return n
}

func (c *chaos) nodesIn(states ...testbed.NodeState) []string {
	var out []string
	for n, s := range c.nodeState {
		if slices.Contains(states, s) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// step injects or heals one fault, chosen at random among those that make
// sense in the current state.
func (c *chaos) step() {
	var acts actions
	add := acts.add
	h := c.h
	down := c.nodesIn(testbed.NodeKilled, testbed.NodeHung)
	up := c.nodesIn(testbed.NodeUp)
	c.groupFaults(add, 3)
	add(len(down) < c.cfg.MaxNodesDown && len(up) > 0, 5, func() {
		c.nodeDown(c.pick(up), "dies", h.KillNode, testbed.NodeKilled)
	})
	add(len(down) < c.cfg.MaxNodesDown && len(up) > 0, 2, func() {
		c.nodeDown(c.pick(up), "hangs (kubelet up, heartbeat lost)", h.HangNode, testbed.NodeHung)
	})
	add(len(down) > 0, 4, func() {
		c.nodeUp(c.pick(down), "reboots", h.RebootNode)
	})
	add(len(down) > 0, 2, func() {
		c.nodeUp(c.pick(down), "returns without a reboot", h.ReturnNode)
	})
	acts.runOne(c.rng)
}

// actions are the faults a step may inject, each with its weight.
type actions []action

type action struct {
	weight int
	run    func()
}

// add offers f with weight w when ok.
func (a *actions) add(ok bool, w int, f func()) {
	if ok {
		*a = append(*a, action{w, f})
	}
}

// runOne runs one action, drawn in proportion to the weights.
func (a actions) runOne(rng *rand.Rand) {
	total := 0
	for _, x := range a {
		total += x.weight
	}
	r := rng.IntN(total)
	for _, x := range a {
		if r < x.weight {
			x.run()
			return
		}
		r -= x.weight
	}
}

// groupFaults offers the faults of the replicas, the apiserver and the
// arrays, common to both profiles, in a fixed order (seeded schedules
// replay): replica kill -9 (weight kill) and restart, partitions and
// heals, apiserver cuts and reconnections, array outages and returns, an
// apiserver restart.
func (c *chaos) groupFaults(add func(bool, int, func()), kill int) {
	h := c.h
	calm := c.disturbedReplicas() == 0
	add(calm, kill, func() {
		id := c.leaderOrAny()
		c.logf("kill -9 replica %s", id)
		h.KillReplica(id)
		c.replicaDown[id] = true
	})
	add(len(keys(c.replicaDown)) > 0, 4, func() {
		id := c.pick(keys(c.replicaDown))
		c.logf("restart replica %s", id)
		h.StartReplica(id)
		c.replicaDown[id] = false
	})
	add(calm, 2, func() {
		id := c.leaderOrAny()
		c.logf("partition replica %s from its peers", id)
		h.PartitionReplica(id)
		c.replicaCut[id] = true
	})
	add(len(keys(c.replicaCut)) > 0, 4, func() {
		id := c.pick(keys(c.replicaCut))
		c.logf("heal the partition of replica %s", id)
		h.HealReplica(id)
		c.replicaCut[id] = false
	})
	add(len(keys(c.apiCut)) == 0, 2, func() {
		id := c.leaderOrAny()
		c.logf("cut replica %s from the apiserver", id)
		h.CutAPIServer(id)
		c.apiCut[id] = true
	})
	add(len(keys(c.apiCut)) > 0, 4, func() {
		id := c.pick(keys(c.apiCut))
		c.logf("reconnect replica %s to the apiserver", id)
		h.HealAPIServer(id)
		c.apiCut[id] = false
	})
	add(len(keys(c.arrayCut)) == 0, 2, func() {
		name := c.pick(mapKeys(h.Arrays))
		c.logf("array %s API down", name)
		h.ArrayDown(name)
		c.arrayCut[name] = true
	})
	add(len(keys(c.arrayCut)) > 0, 4, func() {
		name := c.pick(keys(c.arrayCut))
		c.logf("array %s API back", name)
		h.ArrayUp(name)
		c.arrayCut[name] = false
	})
	add(true, 1, func() {
		c.logf("restart the apiserver")
		if err := h.RestartAPIServer(); err != nil {
			c.logf("  restart failed: %v", err)
		}
	})
}

func mapKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// leaderOrAny returns the leader half of the time when one is known, else
// a random running replica.
func (c *chaos) leaderOrAny() string {
	if c.rng.IntN(2) == 0 {
		ctx, cancel := context.WithTimeout(c.h.ctx, 3*time.Second)
		defer cancel()
		if l, err := c.h.Leader(ctx); err == nil {
			return l
		}
	}
	var up []string
	for _, id := range c.h.IDs {
		if !c.replicaDown[id] {
			up = append(up, id)
		}
	}
	return c.pick(up)
}

// healAll ends every fault: replicas restarted and reconnected, arrays
// back, and every node that is not up rebooted.
func (c *chaos) healAll() {
	h := c.h
	for _, p := range c.pending {
		p.run()
	}
	c.pending = nil
	for _, id := range keys(c.replicaCut) {
		h.HealReplica(id)
	}
	for _, id := range keys(c.apiCut) {
		h.HealAPIServer(id)
	}
	for _, name := range keys(c.arrayCut) {
		h.ArrayUp(name)
	}
	for _, id := range keys(c.replicaDown) {
		h.StartReplica(id)
	}
	clear(c.replicaCut)
	clear(c.apiCut)
	clear(c.arrayCut)
	clear(c.replicaDown)
	for _, n := range c.nodesIn(testbed.NodeKilled, testbed.NodeHung) {
		c.logf("node %s reboots (heal)", n)
		h.RebootNode(n)
		c.healed[n] = true
		c.nodeState[n] = testbed.NodeUp
		c.markUp(n)
	}
}

// settle waits until no fence is open; a node that came back without a
// reboot and is fenced is rebooted. It returns the fences still open at
// the deadline.
func (c *chaos) settle() []string {
	h := c.h
	h.WaitLeader(time.Minute)
	deadline := time.Now().Add(c.cfg.Settle)
	rebooted := c.healed
	var open []string
	for time.Now().Before(deadline) {
		fences, err := h.Fences(h.ctx)
		open = open[:0]
		if err != nil {
			open = append(open, err.Error())
		}
		for _, f := range fences {
			if f.Phase == string(ledger.StateClosed) || f.Phase == string(ledger.StateAborted) {
				continue
			}
			open = append(open, fmt.Sprintf("%s %s %s (%s)", f.ID, f.Node, f.Phase, f.Error))
			if f.NeedsReboot != "" && !rebooted[f.Node] {
				rebooted[f.Node] = true
				c.logf("node %s is fenced and needs a reboot: reboot it (heal)", f.Node)
				h.RebootNode(f.Node)
			}
		}
		if err == nil && len(open) == 0 {
			c.logf("settled: no fence open")
			return nil
		}
		select {
		case <-h.ctx.Done():
			return append(open, h.ctx.Err().Error())
		case <-time.After(time.Second):
		}
	}
	c.logf("not settled after %s: %v", c.cfg.Settle, open)
	return open
}

func (c *chaos) summary(r *ChaosResult) {
	w := c.cfg.Out
	fmt.Fprintf(w, "\nchaos summary: seed %d\n", r.Seed)
	fmt.Fprintf(w, "fault timeline (%d events):\n", len(r.Faults))
	for _, e := range r.Faults {
		fmt.Fprintf(w, "  %s  %-22s %s\n", e.Time.Format("15:04:05.000"), e.Kind, e.Detail)
	}
	fmt.Fprintf(w, "fences performed: %d fenced, %d evicted, %d unfenced\n", r.Fences, r.Evictions, r.Unfences)
	fmt.Fprintf(w, "verdicts that opened a fence: %d early, %d at the grace\n", r.EarlyVerdicts, r.GraceVerdicts)
	if r.Transient {
		fmt.Fprintf(w, "false fences (a node that was not dead): %d\n", len(r.FalseFences))
		for _, f := range r.FalseFences {
			fmt.Fprintf(w, "FALSE FENCE: %s\n", f)
		}
	}
	if r.Held != nil {
		fmt.Fprintln(w, r.Held)
	}
	fmt.Fprintf(w, "invariants: %s\n", r.Report)
	for _, u := range r.Unsettled {
		fmt.Fprintf(w, "UNSETTLED: %s\n", u)
	}
	if r.OK() {
		fmt.Fprintln(w, "result: OK, no violation")
	} else {
		fmt.Fprintf(w, "result: FAILED, %d violation(s), %d unsettled fence(s), %d false fence(s)\n", len(r.Report.Violations), len(r.Unsettled), len(r.FalseFences))
	}
}

// errChaos is returned by callers that turn a failed run into an error.
var errChaos = errors.New("chaos run failed")

// Err returns nil for a clean run, else an error naming the seed.
func (r *ChaosResult) Err() error {
	if r.OK() {
		return nil
	}
	return fmt.Errorf("%w: seed %d: %d violation(s), %d unsettled, %d false fence(s)", errChaos, r.Seed, len(r.Report.Violations), len(r.Unsettled), len(r.FalseFences))
}

// ChaosTiming is the cluster timing of chaos runs: a dead node fails
// within seconds, a rebooted one is unfenced five seconds after it
// returns, and up to two nodes may fail at once.
func ChaosTiming() ClusterTiming {
	return ClusterTiming{HeartbeatGrace: 6 * time.Second, PollInterval: 500 * time.Millisecond,
		SettlePeriod: 5 * time.Second, StormCooldown: 30 * time.Second, StormLimit: "2", IOWindow: 2 * time.Second}
}

// waitDeployed waits until every pod of the chaos StatefulSet runs (its
// volumes created and published by the drivers).
func (c *chaos) waitDeployed(name string) error {
	ctx, cancel := context.WithTimeout(c.h.ctx, 3*time.Minute)
	defer cancel()
	for {
		sts, err := c.h.CP.Client.AppsV1().StatefulSets("db").Get(ctx, name, metav1.GetOptions{})
		if err == nil && sts.Spec.Replicas != nil {
			pods, err := c.h.CP.Client.CoreV1().Pods("db").List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
			running := 0
			if err == nil {
				for _, p := range pods.Items {
					if p.Status.Phase == corev1.PodRunning {
						running++
					}
				}
			}
			if running == int(*sts.Spec.Replicas) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("chaos: the pods of StatefulSet %s did not all run: %w", name, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}
