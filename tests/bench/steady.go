package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/fenced-project/fenced/cmd/fenced/status"
	"github.com/fenced-project/fenced/configs"
	"github.com/fenced-project/fenced/tests/e2e"
	"github.com/fenced-project/fenced/tests/testbed"
)

// SteadyResult is fenced idle over many nodes.
type SteadyResult struct {
	Nodes  int    `json:"nodes"`
	Window string `json:"window"`
	// Learned is how long after the replicas started the leader knew the
	// array identities of every node (cold start: every node resolved on
	// every array). The window begins after it.
	Learned float64 `json:"identitiesLearnedSeconds"`
	// ControlPlaneNice is the nice value the control plane and kwok ran at.
	ControlPlaneNice int     `json:"controlPlaneNice,omitempty"`
	Leader           Process `json:"leader"`
	// Follower is one follower.
	Follower Process `json:"follower"`
	// Writer is who wrote the Nodes and renewed their Leases: "kwok"
	// (kwok nodes, the test bed's per-node lease controllers; the default,
	// and older runs) or "light" (the test bed's light writer, no kwok
	// node). The control plane, the three replicas and the array
	// simulators are the real ones in both.
	Writer string `json:"writer,omitempty"`
	// Bare says the controller manager and the scheduler were stopped
	// once the nodes were written (-steady-bare): nothing at rest needs
	// them, and on a small machine they take CPU the API server needs to
	// keep the renewals of thousands of Leases on time.
	Bare bool `json:"bare,omitempty"`
	// RenewalSeconds is how often each node's Lease was renewed (a
	// quarter of its duration). Zero in older runs: 10 s.
	RenewalSeconds float64 `json:"renewalSeconds,omitempty"`
	// ArrayRequests are the array requests of the three replicas over the
	// window, per minute, by family and operation.
	ArrayRequests []IdleRequests `json:"arrayRequests,omitempty"`
	// LightRenewals is the light writer's renewal rate over the window.
	LightRenewals *LightRenewals `json:"lightRenewals,omitempty"`
	// Profiles name the profile files taken over the window, in the
	// -steady-profile directory (base names only);
	// the CPU figures then include the profiler's own cost.
	Profiles []string `json:"profiles,omitempty"`
	// Error is why the run did not complete; the figures are then partial
	// and left out of the growth fit.
	Error string `json:"error,omitempty"`
}

// Process is one replica's resource use.
type Process struct {
	Replica string `json:"replica"`
	// CPUPercent is CPU time over the window, in percent of one core.
	CPUPercent float64 `json:"cpuPercentOfACore"`
	RSSBytes   int64   `json:"rssBytes"`
}

// runSteady measures fenced idle over one cluster of res.Nodes nodes and
// fills in res.
func runSteady(t *e2e.Standalone, p params, res *SteadyResult) error {
	n := res.Nodes
	fmt.Fprintf(os.Stderr, "steady: starting %d nodes\n", n)
	opts := e2e.Options{Nodes: n, ControlPlaneNice: p.ControlPlaneNice, NoArrayAuditFiles: true,
		LightNodes: res.Writer == writerLight, Pprof: p.SteadyProfile}
	res.RenewalSeconds = 10
	if d := p.SteadyLeaseSeconds; d > 0 && d != kubeletLeaseSeconds {
		opts.NodeLeaseDurationSeconds = d
		opts.Timing = scaledTiming(d)
		res.RenewalSeconds = float64(d) / 4
	}
	h := e2e.Start(t, opts)
	started := time.Now()
	if p.SteadyBare {
		for _, c := range []*testbed.Process{h.CP.ControllerManager, h.CP.Scheduler} {
			if err := c.Stop(10 * time.Second); err != nil {
				return fmt.Errorf("steady, %d nodes: stop %s: %w", n, c.Name, err)
			}
		}
		res.Bare = true
	}
	if res.Writer == writerLight {
		// A run that fails before its window still says whether every
		// node was renewed on time.
		light := h.CP.LightStats()
		defer func() {
			if res.LightRenewals == nil {
				res.LightRenewals = lightRenewals(h.CP.LightStats().Since(light), time.Since(started))
				res.LightRenewals.WholeRun = true
			}
		}()
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.SteadyDeadline)
	defer cancel()
	h.WaitLeader(min(5*time.Minute, p.SteadyDeadline))
	// Steady means after the cold start: every node healthy and its
	// identities learned on every array.
	if err := waitHealthy(ctx, h, map[string]int{e2e.ClusterName: n}); err != nil {
		return fmt.Errorf("steady, %d nodes: %w", n, err)
	}
	fmt.Fprintf(os.Stderr, "steady: %d nodes healthy after %.0f s\n", n, time.Since(started).Seconds())
	if err := waitLearned(ctx, h, map[string]int{e2e.ClusterName: n}); err != nil {
		return fmt.Errorf("steady, %d nodes: %w", n, err)
	}
	res.Learned = time.Since(started).Seconds()
	fmt.Fprintf(os.Stderr, "steady: identities of %d nodes learned after %.0f s\n", n, res.Learned)
	var err error
	begin, end := idleExtras(ctx, h, p, res)
	if res.Leader, res.Follower, err = measureIdle(ctx, h, p.SteadyWindow, begin, end); err != nil {
		return fmt.Errorf("steady, %d nodes: %w", n, err)
	}
	return nil
}

// scaledTiming is fenced's timing for kubelets whose Leases last
// leaseSeconds instead of 40 s: the defaults of heartbeatGrace,
// earlyVerdict.after and .probeFrom scaled by the same factor, so that a
// node renewing on time is never late.
func scaledTiming(leaseSeconds int) e2e.ClusterTiming {
	scale := func(d time.Duration) time.Duration {
		return d * time.Duration(leaseSeconds) / kubeletLeaseSeconds
	}
	def := configs.DefaultCluster()
	return e2e.ClusterTiming{HeartbeatGrace: scale(def.HeartbeatGrace),
		EarlyAfter: scale(def.EarlyVerdict.After), EarlyProbeFrom: scale(def.EarlyVerdict.ProbeStart())}
}

// measureIdle waits for the last ledger writes of the cold start to
// settle, then samples the CPU time of the leader and one follower over
// window, and their RSS at its end. begin and end, when not nil, are called
// at the window's beginning and end.
func measureIdle(ctx context.Context, h *e2e.Harness, window time.Duration, begin func(time.Duration), end func()) (leader, follower Process, err error) {
	time.Sleep(10 * time.Second) // let the last ledger writes settle
	lead, err := h.Leader(ctx)
	if err != nil {
		return leader, follower, fmt.Errorf("find the leader: %w", err)
	}
	fol := h.Follower(lead)
	if fol == "" {
		return leader, follower, fmt.Errorf("no follower running beside leader %s", lead)
	}
	pids := map[string]int{lead: h.Replicas[lead].PID(), fol: h.Replicas[fol].PID()}
	before := map[string]float64{}
	for id, pid := range pids {
		before[id], _ = cpuSeconds(pid)
	}
	start := time.Now()
	if begin != nil {
		begin(window)
	}
	time.Sleep(window) // the measurement window itself
	elapsed := time.Since(start).Seconds()
	if end != nil {
		defer end()
	}
	for id, pid := range pids {
		after, err := cpuSeconds(pid)
		if err != nil {
			return leader, follower, err
		}
		rss, err := rssBytes(pid)
		if err != nil {
			return leader, follower, err
		}
		pr := Process{Replica: id, CPUPercent: 100 * (after - before[id]) / elapsed, RSSBytes: rss}
		if id == lead {
			leader = pr
		} else {
			follower = pr
		}
	}
	return leader, follower, nil
}

// cpuSeconds reads a process's user+system CPU time from /proc.
func cpuSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("cpu of %d: %w", pid, err)
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	return (utime + stime) / 100, nil // USER_HZ is 100 on Linux
}

// rssBytes reads a process's resident set size from /proc.
func rssBytes(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("rss of %d: %w", pid, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			f := strings.Fields(line)
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb * 1024, nil
		}
	}
	return 0, fmt.Errorf("rss of %d: no VmRSS", pid)
}

// waitLearned waits until the leader knows the array identities of every
// node of the clusters in want (cluster name → node count): each cluster's
// status counts its nodes and none unprotected.
func waitLearned(ctx context.Context, h *e2e.Harness, want map[string]int) error {
	return waitCounts(ctx, h, want, "identities of every node never learned", func(c *status.NodeCounts, n int) bool {
		return c.Total == n && c.Unprotected == 0
	})
}

// waitHealthy waits until the leader reports every node of the clusters in
// want healthy.
func waitHealthy(ctx context.Context, h *e2e.Harness, want map[string]int) error {
	return waitCounts(ctx, h, want, "not every node healthy", func(c *status.NodeCounts, n int) bool {
		return c.Total == n && c.Healthy == n
	})
}

// waitCounts polls the leader's status every second until ok holds for the
// node counts of every cluster in want; failed says what never happened.
func waitCounts(ctx context.Context, h *e2e.Harness, want map[string]int, failed string, ok func(*status.NodeCounts, int) bool) error {
	var last string // the last counts read, for the error
	for {
		st, err := leaderStatus(ctx, h)
		if err == nil && countsHold(st, want, ok) {
			return nil
		}
		if err == nil {
			last = countsOf(st, want)
		}
		if ctx.Err() != nil {
			if err != nil {
				return fmt.Errorf("%s (last counts: %s): last status read: %w", failed, last, err)
			}
			return fmt.Errorf("%s (last counts: %s): %w", failed, last, ctx.Err())
		}
		time.Sleep(time.Second)
	}
}

// countsOf gives the node counts of the clusters of want in st, for an
// error: total, healthy, suspect, failed and unprotected of each.
func countsOf(st *status.Status, want map[string]int) string {
	var parts []string
	for _, c := range st.Clusters {
		if _, ok := want[c.Name]; !ok || c.Nodes == nil {
			continue
		}
		n := c.Nodes
		parts = append(parts, fmt.Sprintf("%s: %d nodes, %d healthy, %d suspect, %d failed, %d unprotected",
			c.Name, n.Total, n.Healthy, n.Suspect, n.Failed, n.Unprotected))
	}
	return strings.Join(parts, "; ")
}

// countsHold reports whether ok holds for every cluster of want in st.
func countsHold(st *status.Status, want map[string]int, ok func(*status.NodeCounts, int) bool) bool {
	held := 0
	for _, c := range st.Clusters {
		n, wanted := want[c.Name]
		if !wanted {
			continue
		}
		if c.Nodes == nil || !ok(c.Nodes, n) {
			return false
		}
		held++
	}
	return held == len(want)
}
