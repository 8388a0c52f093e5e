package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/fenced-project/fenced/tests/e2e"
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
}

// Process is one replica's resource use.
type Process struct {
	Replica string `json:"replica"`
	// CPUPercent is CPU time over the window, in percent of one core.
	CPUPercent float64 `json:"cpuPercentOfACore"`
	RSSBytes   int64   `json:"rssBytes"`
}

func runSteady(t *e2e.Standalone, p params) (*SteadyResult, error) {
	fmt.Fprintf(os.Stderr, "steady: starting %d nodes\n", p.SteadyNodes)
	h := e2e.Start(t, e2e.Options{Nodes: p.SteadyNodes, ControlPlaneNice: p.ControlPlaneNice})
	started := time.Now()
	h.WaitLeader(5 * time.Minute)
	// Steady means after the cold start: every node healthy and its
	// identities learned on every array.
	h.WaitHealthy(p.SteadyNodes, 10*time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	if err := waitLearned(ctx, h, p.SteadyNodes); err != nil {
		return nil, fmt.Errorf("steady: %w", err)
	}
	res := &SteadyResult{Nodes: p.SteadyNodes, Window: p.SteadyWindow.String(), Learned: time.Since(started).Seconds(),
		ControlPlaneNice: p.ControlPlaneNice}
	fmt.Fprintf(os.Stderr, "steady: identities of %d nodes learned after %.0f s\n", p.SteadyNodes, res.Learned)
	time.Sleep(10 * time.Second) // let the last ledger writes settle
	leader, err := h.Leader(ctx)
	if err != nil {
		return nil, err
	}
	follower := h.Follower(leader)
	pids := map[string]int{leader: h.Replicas[leader].PID(), follower: h.Replicas[follower].PID()}
	before := map[string]float64{}
	for id, pid := range pids {
		before[id], _ = cpuSeconds(pid)
	}
	start := time.Now()
	time.Sleep(p.SteadyWindow) // the measurement window itself
	elapsed := time.Since(start).Seconds()
	for id, pid := range pids {
		after, err := cpuSeconds(pid)
		if err != nil {
			return nil, err
		}
		rss, err := rssBytes(pid)
		if err != nil {
			return nil, err
		}
		pr := Process{Replica: id, CPUPercent: 100 * (after - before[id]) / elapsed, RSSBytes: rss}
		if id == leader {
			res.Leader = pr
		} else {
			res.Follower = pr
		}
	}
	return res, nil
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

// waitLearned waits until the leader knows the array identities of all n
// nodes (status: no node unprotected).
func waitLearned(ctx context.Context, h *e2e.Harness, n int) error {
	for {
		st, err := leaderStatus(ctx, h)
		if err == nil && len(st.Clusters) > 0 && st.Clusters[0].Nodes != nil && st.Clusters[0].Nodes.Unprotected == 0 &&
			st.Clusters[0].Nodes.Total == n {
			return nil
		}
		if ctx.Err() != nil {
			if err != nil {
				return fmt.Errorf("identities of every node never learned: last status read: %w", err)
			}
			return fmt.Errorf("identities of every node never learned: %w", ctx.Err())
		}
		time.Sleep(time.Second)
	}
}
