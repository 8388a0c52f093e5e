// Command bench measures fenced's recovery figures end to end and writes
// them to bench/results.md and bench/results.json. The figures are
// measurements, not pass/fail checks.
//
//	go run ./tests/bench -out bench            # make bench
//	go run ./tests/bench -trials 5 -baseline=false -failover 0
//	go run ./tests/bench -trials 0 -baseline=false -failover 0 \
//		-steady-nodes 250,500,1000,2000 -clusters 5 -cluster-nodes 200
//	go run ./tests/bench -trials 0 -baseline=false -failover 0 \
//		-storm-nodes 1000 -storm-dying 100 -early -storm-profile prof
//
// -storm-profile turns http.pprof on in the replicas and takes CPU
// profiles of each replica, of the kube-apiserver (its own /debug/pprof,
// admin credentials) and of the bench process (the array simulators) in
// consecutive 30 s segments from the storm's power-off until every dying
// node's pods are evicted; the storm section then has a "where the time
// goes" table and every process's CPU time over the window (/proc), and
// `go tool pprof DIR/fenced-a-*.pb.gz` reads the raw profiles merged.
//
// What it runs, each over the end-to-end harness (tests/e2e: three fenced
// processes built from this tree, a real kube-apiserver, controller
// manager and scheduler with kwok nodes, the five array simulators behind
// toxiproxy):
//
//   - single: one node of a -nodes cluster dies with -pods protected
//     StatefulSet pods on it, array latency -latency, fenced's default
//     configuration; -trials trials (a new victim each);
//   - baseline: the same death with no fenced at all (Kubernetes alone,
//     default timings), observed for -baseline-wait; it runs on its own
//     control plane, at the same time as the trials;
//   - failover: like single, but the leader is killed with SIGKILL as soon
//     as the fence is opened; the time from the kill to the fence's
//     completion;
//   - steady (the growth curve): fenced idle in one cluster of each size
//     of -steady-nodes (a comma-separated list, smallest first, each size
//     a harness of its own torn down before the next), the leader's and a
//     follower's CPU over -steady-window and RSS; a size that fails keeps
//     its error and the next one runs. With two sizes or more complete,
//     a least-squares line through each figure against the node count and
//     its projection to 2,000 and 10,000 nodes (results.json: growth,
//     growthFit; steady is the largest size that completed);
//   - multi-cluster: one fenced group protecting -clusters clusters of
//     -cluster-nodes nodes, each with its own control plane and kwok (the
//     first is the harness's cluster, the others e2e.Options.ExtraClusters),
//     idle over -steady-window: the same figures, and the time until every
//     node of every cluster had its identities learned;
//   - storm: -storm-dying of -storm-nodes nodes die at once with the storm
//     limit raised to allow it.
//
// -early turns early verdicts on (clusters[].earlyVerdict with its
// defaults) in the single-node, failover and storm runs; the single-node
// trials are then written to their own section, so that one results file
// holds the figures with and without them.
//
// Every figure is given from two moments: the power-off, when the harness
// stops the node (its kubelet port closes and its Lease is no longer
// renewed), and the last renewal of the node's Lease, which comes up to
// one renewal interval before it and from which fenced's grace counts.
//
// -control-plane-nice N runs the control plane and kwok of the steady,
// multi-cluster and storm runs at nice N (off by default). On a small
// machine it keeps kwok's Lease renewals on time, at the cost of the
// replicas' CPU: at 2,000 nodes on two cores they starved and Raft
// elections repeated.
//
// -merge keeps the sections of the existing results.json that this run
// does not measure; the steady-state sizes measured now join the earlier
// ones (a size measured again replaces its earlier figures), so the
// growth curve can be measured a size at a time.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/fenced-project/fenced/tests/e2e"
)

// params are the command line.
type params struct {
	Out          string        `json:"-"`
	Nodes        int           `json:"nodes"`
	Pods         int           `json:"podsPerNode"`
	Latency      time.Duration `json:"arrayLatency"`
	Trials       int           `json:"trials"`
	Baseline     bool          `json:"baseline"`
	BaselineWait time.Duration `json:"baselineWait"`
	Failover     int           `json:"failoverTrials"`
	// SteadyNodes is the largest of SteadySizes (in older runs the only
	// steady-state size).
	SteadyNodes int `json:"steadyNodes"`
	// SteadySizes are the node counts of the steady-state runs.
	SteadySizes  sizes         `json:"steadySizes,omitempty"`
	SteadyWindow time.Duration `json:"steadyWindow"`
	// SteadyDeadline bounds each steady run from the replicas' start to
	// the window's end.
	SteadyDeadline time.Duration `json:"steadyDeadline,omitempty"`
	// Clusters and ClusterNodes are the multi-cluster run's clusters and
	// nodes in each.
	Clusters     int `json:"clusters,omitempty"`
	ClusterNodes int `json:"nodesPerCluster,omitempty"`
	StormNodes   int `json:"stormNodes"`
	StormDying   int `json:"stormDying"`
	// StormProfile is the directory of the storm's CPU profiles (empty:
	// no profiles).
	StormProfile string `json:"-"`
	// ControlPlaneNice is the nice value of the control plane and kwok in
	// the steady, multi-cluster and storm runs (see
	// e2e.Options.ControlPlaneNice).
	ControlPlaneNice int `json:"controlPlaneNice"`
	// Early turns early verdicts on (clusters[].earlyVerdict with its
	// defaults) in the single-node, failover and storm runs.
	Early bool `json:"earlyVerdicts,omitempty"`
	// SteadyWriter is who writes the steady runs' nodes: kwok or light.
	SteadyWriter string `json:"steadyWriter,omitempty"`
	// SteadyProfile takes CPU and heap profiles of the leader and a
	// follower over each steady window, into <out>/profiles.
	SteadyProfile bool `json:"steadyProfile,omitempty"`
	// SteadyBare stops the controller manager and the scheduler in the
	// steady runs (see SteadyResult.Bare).
	SteadyBare bool `json:"steadyBare,omitempty"`
	// SteadyLeaseSeconds is the node Lease duration of the steady runs
	// (kubelet nodeLeaseDurationSeconds; renewed every quarter of it).
	// 0: the kubelet's default, 40 s.
	SteadyLeaseSeconds int           `json:"steadyLeaseSeconds,omitempty"`
	Keep               string        `json:"-"`
	Merge              bool          `json:"-"`
	TrialDeadline      time.Duration `json:"-"`
}

func main() {
	var p params
	flag.StringVar(&p.Out, "out", "bench", "directory for results.md and results.json")
	flag.IntVar(&p.Nodes, "nodes", 100, "nodes of the single-node and failover cluster")
	flag.IntVar(&p.Pods, "pods", 12, "protected StatefulSet pods on each dying node")
	flag.DurationVar(&p.Latency, "latency", 20*time.Millisecond, "added round-trip latency on every array path")
	flag.IntVar(&p.Trials, "trials", 20, "single-node trials")
	flag.BoolVar(&p.Baseline, "baseline", true, "run the baseline without fenced")
	flag.DurationVar(&p.BaselineWait, "baseline-wait", 10*time.Minute, "how long the baseline observes the pods")
	flag.IntVar(&p.Failover, "failover", 5, "leader-killed-during-a-fence trials")
	flag.Var(&p.SteadySizes, "steady-nodes", "nodes of the steady-state measurements, comma-separated, one run each, "+
		"fitted into a growth curve when two or more complete (empty or 0: skip; the issue asks for 250,500,1000,2000)")
	flag.DurationVar(&p.SteadyWindow, "steady-window", time.Minute, "how long CPU is sampled in steady state (also in the multi-cluster run)")
	flag.DurationVar(&p.SteadyDeadline, "steady-deadline", 30*time.Minute, "how long each steady run may take from the replicas' start (leader, every node healthy, every identity learned, the window); a run past it fails with the node counts it reached")
	flag.StringVar(&p.SteadyWriter, "steady-writer", writerKwok, "who writes the steady runs' nodes: kwok (kwok nodes) or light (the test bed's light writer: Nodes, conditions and Lease renewals every 10 s, each started at its due time, no kwok node; for 2,000 nodes and more on a small machine)")
	flag.IntVar(&p.SteadyLeaseSeconds, "steady-lease-seconds", 0, "node Lease duration of the steady runs, as a kubelet's nodeLeaseDurationSeconds (renewed every quarter of it; 0: the kubelet's default, 40 s); fenced's heartbeatGrace, earlyVerdict.after and .probeFrom are scaled from their defaults by the same factor, as an operator of such a cluster would set them. Fewer renewals a second for as many nodes: the shape in which this machine's API server holds 5,000 nodes")
	flag.BoolVar(&p.SteadyBare, "steady-bare", false, "stop the controller manager and the scheduler in the steady runs once the nodes are written (nothing at rest needs them; on a small machine the API server needs their CPU to keep thousands of Lease renewals on time)")
	flag.BoolVar(&p.SteadyProfile, "steady-profile", false, "take CPU profiles of the leader and a follower over each steady window and their heap after it, into <out>/profiles (the CPU figures then include the profiler's cost)")
	flag.IntVar(&p.Clusters, "clusters", 0, "clusters of the multi-cluster run, one fenced group protecting them all (0: skip; the issue asks for 5)")
	flag.IntVar(&p.ClusterNodes, "cluster-nodes", 0, "nodes of each cluster of the multi-cluster run (the issue asks for 200)")
	flag.IntVar(&p.StormNodes, "storm-nodes", 0, "nodes of the mass-death run (0: skip; the issue asks for 1000)")
	flag.IntVar(&p.StormDying, "storm-dying", 100, "nodes that die at once in the mass-death run")
	flag.StringVar(&p.StormProfile, "storm-profile", "", "directory for CPU profiles of the replicas, the kube-apiserver and this process (the array simulators) during the mass-death run, summarised in its section (empty: none)")
	flag.IntVar(&p.ControlPlaneNice, "control-plane-nice", 0, "nice value of the control plane and kwok in the steady, multi-cluster and storm runs, so that kwok's renewals keep time on a small machine (0: leave as is)")
	flag.BoolVar(&p.Early, "early", false, "early verdicts on (clusters[].earlyVerdict, default settings) in the single-node, failover and storm runs; the single-node trials then go to their own section")
	flag.StringVar(&p.Keep, "keep", "", "keep the runs' directories here")
	flag.DurationVar(&p.TrialDeadline, "trial-deadline", 5*time.Minute, "give up on a trial after this long")
	render := flag.Bool("render", false, "only render results.md again from the results.json in -out")
	flag.BoolVar(&p.Merge, "merge", false, "keep the sections of the existing results.json that this run does not measure")
	flag.Parse()
	if len(p.SteadySizes) > 0 {
		p.SteadyNodes = p.SteadySizes[len(p.SteadySizes)-1]
	}
	if p.SteadyWriter != writerKwok && p.SteadyWriter != writerLight {
		fmt.Fprintf(os.Stderr, "bench: -steady-writer %q: want kwok or light\n", p.SteadyWriter)
		os.Exit(2)
	}
	if p.Clusters > 0 && p.ClusterNodes <= 0 {
		fmt.Fprintln(os.Stderr, "bench: -clusters needs -cluster-nodes, the nodes of each cluster")
		os.Exit(2)
	}
	if *render {
		if err := rerender(p.Out); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(p); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// Results is the JSON document.
type Results struct {
	StartedAt time.Time      `json:"startedAt"`
	Duration  string         `json:"duration"`
	Host      Host           `json:"host"`
	Params    params         `json:"params"`
	Single    *SingleResults `json:"single,omitempty"`
	// SingleEarly are single-node trials with early verdicts on (-early).
	SingleEarly *SingleResults  `json:"singleEarly,omitempty"`
	Failover    *FailoverResult `json:"failover,omitempty"`
	Baseline    *BaselineResult `json:"baseline,omitempty"`
	// Steady is the largest completed size of Growth; older runs have
	// only it.
	Steady *SteadyResult `json:"steady,omitempty"`
	// Growth are the steady-state runs, one per size, ascending; GrowthFit
	// is the straight line through their figures (two sizes or more).
	Growth       []SteadyResult      `json:"growth,omitempty"`
	GrowthFit    *GrowthFit          `json:"growthFit,omitempty"`
	MultiCluster *MultiClusterResult `json:"multiCluster,omitempty"`
	Storm        *StormResult        `json:"storm,omitempty"`
	Notes        []string            `json:"notes,omitempty"`
}

func run(p params) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res := &Results{StartedAt: time.Now().UTC(), Host: hostInfo(), Params: p}
	// A merged run keeps the first run's start, duration and host in the
	// header; its own go into a note, rewritten at each save.
	mergeNote, mergeStart, mergeHost := -1, res.StartedAt, res.Host
	// earlier are the steady-state sizes of the run merged with, which the
	// sizes measured now join.
	var earlier []SteadyResult
	if p.Merge {
		if b, err := os.ReadFile(filepath.Join(p.Out, "results.json")); err == nil {
			var old Results
			if err := json.Unmarshal(b, &old); err != nil {
				return fmt.Errorf("merge: decode results.json: %w", err)
			}
			res.Single, res.Failover, res.Baseline, res.Steady, res.Storm = old.Single, old.Failover, old.Baseline, old.Steady, old.Storm
			res.SingleEarly = old.SingleEarly
			res.Growth, res.MultiCluster = old.Growth, old.MultiCluster
			res.StartedAt, res.Duration, res.Host, res.Params, res.Notes = old.StartedAt, old.Duration, old.Host, old.Params, old.Notes
			res.Params.SteadyNodes, res.Params.StormNodes = max(old.Params.SteadyNodes, p.SteadyNodes), max(old.Params.StormNodes, p.StormNodes)
			res.Params.SteadySizes = append(slices.Clone(old.Params.SteadySizes), p.SteadySizes...)
			slices.Sort(res.Params.SteadySizes)
			res.Params.SteadySizes = slices.Compact(res.Params.SteadySizes)
			if p.Clusters > 0 {
				res.Params.Clusters, res.Params.ClusterNodes = p.Clusters, p.ClusterNodes
			}
			earlier = old.Growth
			if len(earlier) == 0 && old.Steady != nil { // a run from before the growth curve
				earlier = []SteadyResult{*old.Steady}
			}
			mergeNote = len(res.Notes)
			res.Notes = append(res.Notes, "")
		}
	}
	var mu sync.Mutex // guards res: the baseline runs alongside
	save := func() error {
		mu.Lock()
		defer mu.Unlock()
		if mergeNote < 0 {
			res.Duration = time.Since(res.StartedAt).Round(time.Second).String()
		} else {
			res.Notes[mergeNote] = fmt.Sprintf("merged with a later run: %s, took %s, on %d CPUs (%s), %s; load average at start %s%s",
				mergeStart.Format("2006-01-02 15:04 MST"), time.Since(mergeStart).Round(time.Second), mergeHost.CPUs,
				mergeHost.CPUModel, mergeHost.GoVersion, mergeHost.LoadAvg, treeNote(mergeHost.Tree))
		}
		return write(p.Out, res)
	}
	note := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		res.Notes = append(res.Notes, s)
	}
	binDir := mustTemp()
	defer func() { _ = os.RemoveAll(binDir) }()
	bin, err := e2e.BuildFenced(ctx, binDir)
	if err != nil {
		return err
	}
	_ = os.Setenv(e2e.BinaryEnv, bin)

	var wg sync.WaitGroup
	if p.Baseline {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, err := runBaseline(ctx, p)
			if err != nil {
				note("baseline failed: " + err.Error())
				return
			}
			mu.Lock()
			res.Baseline = b
			mu.Unlock()
			_ = save()
		}()
	}
	if p.Trials > 0 || p.Failover > 0 {
		err := standalone(p.Keep, "single", func(t *e2e.Standalone) error {
			s, f, err := runSingle(t, p)
			mu.Lock()
			switch {
			case p.Trials > 0 && p.Early:
				res.SingleEarly = s
			case p.Trials > 0:
				res.Single = s
			}
			if p.Failover > 0 {
				res.Failover = f
			}
			mu.Unlock()
			_ = save()
			return err
		})
		if err != nil {
			note("single/failover: " + err.Error())
		}
	}
	// One steady run per size, smallest first, each on its own harness; a
	// size that fails keeps its error and the next size runs.
	var measured []SteadyResult
	for _, n := range p.SteadySizes {
		s := SteadyResult{Nodes: n, Window: p.SteadyWindow.String(), ControlPlaneNice: p.ControlPlaneNice, Writer: p.SteadyWriter}
		err := standalone(p.Keep, fmt.Sprintf("steady-%d", n), func(t *e2e.Standalone) error { return runSteady(t, p, &s) })
		if err != nil {
			s.Error = err.Error()
			fmt.Fprintf(os.Stderr, "steady: %d nodes failed: %v\n", n, err)
		}
		measured = append(measured, s)
		mu.Lock()
		res.Growth = mergeGrowth(earlier, measured)
		res.Steady = largest(res.Growth)
		mu.Unlock()
		_ = save()
	}
	if p.Clusters > 0 {
		m := &MultiClusterResult{Clusters: p.Clusters, NodesPerCluster: p.ClusterNodes, Window: p.SteadyWindow.String(),
			ControlPlaneNice: p.ControlPlaneNice}
		err := standalone(p.Keep, "multi-cluster", func(t *e2e.Standalone) error { return runMultiCluster(t, p, m) })
		if err != nil {
			m.Error = err.Error()
			fmt.Fprintf(os.Stderr, "multi-cluster: %v\n", err)
		}
		mu.Lock()
		res.MultiCluster = m
		mu.Unlock()
		_ = save()
	}
	if p.StormNodes > 0 {
		err := standalone(p.Keep, "storm", func(t *e2e.Standalone) error {
			s, err := runStorm(t, p)
			mu.Lock()
			res.Storm = s
			mu.Unlock()
			return err
		})
		if err != nil {
			note("storm: " + err.Error())
		}
		_ = save()
	}
	wg.Wait()
	return save()
}

// earlyMode is the runs' early verdict setting: on with -early, else off
// (not the product's default), so that the figures say which they measure.
func earlyMode(on bool) e2e.EarlyMode {
	if on {
		return e2e.EarlyOn
	}
	return e2e.EarlyOff
}

// standalone runs f over a fresh harness stand-in.
func standalone(keep, name string, f func(*e2e.Standalone) error) error {
	dir := ""
	if keep != "" {
		dir = filepath.Join(keep, name)
	}
	t, err := e2e.NewStandalone(dir)
	if err != nil {
		return err
	}
	return t.Run(func() error { return f(t) })
}

func mustTemp() string {
	dir, err := os.MkdirTemp("", "fenced-bench-bin-")
	if err != nil {
		panic(err)
	}
	return dir
}

// write saves results.json and results.md.
func write(dir string, r *Results) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("results directory: %w", err)
	}
	r.GrowthFit = fitGrowth(r.Growth)
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encode results: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write results.json: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "results.md"), []byte(markdown(r)), 0o644); err != nil {
		return fmt.Errorf("write results.md: %w", err)
	}
	return nil
}

// rerender writes results.md again from results.json.
func rerender(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		return fmt.Errorf("read results.json: %w", err)
	}
	var r Results
	if err := json.Unmarshal(b, &r); err != nil {
		return fmt.Errorf("decode results.json: %w", err)
	}
	return os.WriteFile(filepath.Join(dir, "results.md"), []byte(markdown(&r)), 0o644)
}
