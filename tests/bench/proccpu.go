package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ProcessCPU is the CPU time the processes of one command name used over
// a window: this process and every process it started (the control
// plane, kwok, the replicas), read from /proc.
type ProcessCPU struct {
	Command string `json:"command"`
	// Processes is how many processes of that name were counted.
	Processes int `json:"processes"`
	// CPUSeconds is their user plus system time in the window; Share is
	// that over the window's wall time (1 = one core).
	CPUSeconds    float64 `json:"cpuSeconds"`
	WindowSeconds float64 `json:"windowSeconds"`
	Share         float64 `json:"share"`
}

// procCPU is one process's name and CPU time at one moment.
type procCPU struct {
	comm  string
	ticks uint64
}

// clockTicks is Linux's USER_HZ, the unit of /proc/<pid>/stat's times:
// 100 on every architecture Go supports.
const clockTicks = 100

// processCPU reads the CPU time of root and all its descendants, by pid.
// Processes that cannot be read (gone meanwhile) are left out.
func processCPU(root int) map[int]procCPU {
	parent := map[int]int{}
	all := map[int]procCPU{}
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue
		}
		comm, ppid, ticks, ok := parseStat(string(b))
		if !ok {
			continue
		}
		parent[pid] = ppid
		all[pid] = procCPU{comm: comm, ticks: ticks}
	}
	out := map[int]procCPU{}
	for pid, p := range all {
		for q, hops := pid, 0; q > 0 && hops < 64; q, hops = parent[q], hops+1 {
			if q == root {
				out[pid] = p
				break
			}
		}
	}
	return out
}

// parseStat reads the command name, parent pid and utime+stime of a
// /proc/<pid>/stat line. The name is in parentheses and may hold spaces.
func parseStat(line string) (comm string, ppid int, ticks uint64, ok bool) {
	open, end := strings.IndexByte(line, '('), strings.LastIndexByte(line, ')')
	if open < 0 || end < open {
		return "", 0, 0, false
	}
	comm = line[open+1 : end]
	f := strings.Fields(line[end+1:])
	// After the name: state(0) ppid(1) ... utime(11) stime(12).
	if len(f) < 13 {
		return "", 0, 0, false
	}
	ppid, err1 := strconv.Atoi(f[1])
	ut, err2 := strconv.ParseUint(f[11], 10, 64)
	st, err3 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return "", 0, 0, false
	}
	return comm, ppid, ut + st, true
}

// cpuSince sums, by command name, the CPU time each process used between
// the two readings (a process started meanwhile counts from zero), most
// first.
func cpuSince(before, after map[int]procCPU, window time.Duration) []ProcessCPU {
	by := map[string]*ProcessCPU{}
	for pid, a := range after {
		used := a.ticks
		if b, ok := before[pid]; ok && b.comm == a.comm && b.ticks <= a.ticks {
			used -= b.ticks
		}
		pc := by[a.comm]
		if pc == nil {
			pc = &ProcessCPU{Command: a.comm, WindowSeconds: window.Seconds()}
			by[a.comm] = pc
		}
		pc.Processes++
		pc.CPUSeconds += float64(used) / clockTicks
	}
	var out []ProcessCPU
	for _, pc := range by {
		if window > 0 {
			pc.Share = pc.CPUSeconds / window.Seconds()
		}
		out = append(out, *pc)
	}
	slices.SortFunc(out, func(x, y ProcessCPU) int {
		if x.CPUSeconds != y.CPUSeconds {
			if x.CPUSeconds > y.CPUSeconds {
				return -1
			}
			return 1
		}
		return strings.Compare(x.Command, y.Command)
	})
	return out
}

// renderProcessCPU is the storm section's table of CPU time by process.
func renderProcessCPU(ps []ProcessCPU) string {
	if len(ps) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "CPU time of every process of the run over the same window (%.0f s; user plus system time from /proc, "+
		"by command name; a share of 1 is one core, of the machine's %d):\n\n| Command | processes | CPU s | share of a core |\n|---|---|---|---|\n",
		ps[0].WindowSeconds, runtime.NumCPU())
	var total float64
	for _, p := range ps {
		if p.CPUSeconds < 0.05 {
			continue
		}
		total += p.CPUSeconds
		fmt.Fprintf(&b, "| %s | %d | %.1f | %.2f |\n", p.Command, p.Processes, p.CPUSeconds, p.Share)
	}
	fmt.Fprintf(&b, "| all | | %.1f | %.2f |\n\n", total, total/ps[0].WindowSeconds)
	return b.String()
}
