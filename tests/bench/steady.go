package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/fenced-project/fenced/tests/e2e"
)

// SteadyResult is fenced idle over many nodes.
type SteadyResult struct {
	Nodes  int     `json:"nodes"`
	Window string  `json:"window"`
	Leader Process `json:"leader"`
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
	h := e2e.Start(t, e2e.Options{Nodes: p.SteadyNodes})
	leader := h.WaitLeader(5 * time.Minute)
	follower := h.Follower(leader)
	// Let the replicas learn every node's identities and settle.
	h.WaitHealthy(p.SteadyNodes, 10*time.Minute)
	res := &SteadyResult{Nodes: p.SteadyNodes, Window: p.SteadyWindow.String()}
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
