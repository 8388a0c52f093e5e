package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/tests/auditcheck"
	"github.com/fenced-project/fenced/tests/testbed"
)

// syncBuffer is a bytes.Buffer safe for a writer and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// proc identifies a process across pid reuse.
type proc struct {
	pid       int
	startTime string
	comm      string
}

// procStat reads pid's command name, state, parent and start time.
func procStat(pid int) (comm string, state byte, ppid int, start string, ok bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", 0, 0, "", false
	}
	s := string(data)
	open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || closing < open {
		return "", 0, 0, "", false
	}
	fields := strings.Fields(s[closing+1:]) // state ppid pgrp ... starttime is the 20th
	if len(fields) < 20 {
		return "", 0, 0, "", false
	}
	ppid, _ = strconv.Atoi(fields[1])
	return s[open+1 : closing], fields[0][0], ppid, fields[19], true
}

// descendants returns the running processes below root.
func descendants(root int) []proc {
	entries, _ := os.ReadDir("/proc")
	parent := map[int]int{}
	info := map[int]proc{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, state, ppid, start, ok := procStat(pid)
		if !ok || state == 'Z' {
			continue
		}
		parent[pid] = ppid
		info[pid] = proc{pid: pid, startTime: start, comm: comm}
	}
	var out []proc
	for pid := range info {
		for p := parent[pid]; p > 1; p = parent[p] {
			if p == root {
				out = append(out, info[pid])
				break
			}
		}
	}
	return out
}

// alive reports whether p still runs (same pid and start time, not a zombie).
func alive(p proc) bool {
	_, state, _, start, ok := procStat(p.pid)
	return ok && start == p.startTime && state != 'Z'
}

// mentioning returns the running processes whose command line contains s.
func mentioning(s string) []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil || e.Name() == strconv.Itoa(os.Getpid()) {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(data, []byte(s)) {
			if _, state, _, _, ok := procStat(mustAtoi(e.Name())); ok && state != 'Z' {
				out = append(out, e.Name()+": "+strings.ReplaceAll(string(data), "\x00", " "))
			}
		}
	}
	return out
}

func mustAtoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// demoRun is the demo binary running as a child of the test.
type demoRun struct {
	cmd  *exec.Cmd
	out  *syncBuffer
	dir  string
	done chan error
	seen map[int]proc // every descendant seen while it ran
}

// startDemo builds the demo and starts it with args plus --dir.
func startDemo(t *testing.T, args ...string) *demoRun {
	t.Helper()
	if testing.Short() {
		t.Skip("the demo starts a Kubernetes control plane and three fenced processes")
	}
	ctx := t.Context()
	_, err := testbed.EnsureBinaries(ctx, nil) // a fresh clone builds them here, once
	require.NoError(t, err)
	bin := filepath.Join(t.TempDir(), "demo")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build the demo: %s", out)

	r := &demoRun{out: &syncBuffer{}, dir: filepath.Join(t.TempDir(), "work"), done: make(chan error, 1), seen: map[int]proc{}}
	r.cmd = exec.Command(bin, append(args, "--dir", r.dir)...)
	r.cmd.Stdout, r.cmd.Stderr = r.out, r.out
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(t, r.cmd.Start())
	go func() { r.done <- r.cmd.Wait() }()
	t.Cleanup(func() {
		_ = r.cmd.Process.Kill()
		if t.Failed() {
			t.Logf("demo output:\n%s", r.out.String())
		}
	})
	return r
}

// sample records the demo's current descendants.
func (r *demoRun) sample() {
	for _, p := range descendants(r.cmd.Process.Pid) {
		r.seen[p.pid] = p
	}
}

// wait waits for the demo to exit, sampling its descendants meanwhile.
func (r *demoRun) wait(t *testing.T, timeout time.Duration) error {
	t.Helper()
	deadline := time.After(timeout)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-r.done:
			return err
		case <-deadline:
			require.FailNow(t, "the demo did not exit in time")
		case <-tick.C:
			r.sample()
		}
	}
}

// waitOutput waits until the demo printed s, sampling its descendants.
func (r *demoRun) waitOutput(t *testing.T, s string, timeout time.Duration) {
	t.Helper()
	require.Eventually(t, func() bool {
		r.sample()
		select {
		case err := <-r.done:
			r.done <- err
			return true // checked below
		default:
		}
		return strings.Contains(r.out.String(), s)
	}, timeout, 200*time.Millisecond)
	require.Contains(t, r.out.String(), s, "the demo exited early")
}

// requireAllGone checks that every process the demo started has exited
// and none mentions its working directory.
func (r *demoRun) requireAllGone(t *testing.T) {
	t.Helper()
	// etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok
	// and three fenced replicas at least.
	names := map[string]bool{}
	for _, p := range r.seen {
		names[p.comm] = true
	}
	for _, want := range []string{"etcd", "kube-apiserver", "kwok", "fenced"} {
		assert.True(t, names[want], "never saw a %s child (saw %v)", want, names)
	}
	assert.Eventually(t, func() bool {
		for _, p := range r.seen {
			if alive(p) {
				return false
			}
		}
		return len(mentioning(r.dir)) == 0
	}, 5*time.Second, 100*time.Millisecond, "processes left behind")
	for _, p := range r.seen {
		assert.False(t, alive(p), "child %s (pid %d) still runs", p.comm, p.pid)
	}
	assert.Empty(t, mentioning(r.dir), "processes still use the demo's directory")
}

// timelineRE matches the replacement line of the timeline.
var timelineRE = regexp.MustCompile(`replacement pod demo/db-\d Running on (worker-\d+)`)

// TestDemoRecovers runs the whole demo non-interactively: a node dies, the
// timeline reaches the replacement pod running elsewhere, the demo exits
// and leaves no process behind.
func TestDemoRecovers(t *testing.T) {
	r := startDemo(t, "--exit-after-recovery", "--timeout", "5m")
	err := r.wait(t, 12*time.Minute)
	out := r.out.String()
	require.NoError(t, err, "demo output:\n%s", out)

	m := regexp.MustCompile(`powering off (worker-\d+)`).FindStringSubmatch(out)
	require.NotNil(t, m, "the demo powered off no node")
	victim := m[1]
	repl := timelineRE.FindStringSubmatch(out)
	require.NotNil(t, repl, "the timeline never reached the replacement pod running")
	assert.NotEqual(t, victim, repl[1], "the replacement runs on the dead node")
	for _, want := range []string{"heartbeat lost", "verdict Failed", "plans for 5 arrays committed",
		"every array confirmed by read-back", "out-of-service=nodeshutdown:NoExecute", "force-deleted by fenced-"} {
		assert.Contains(t, out, want)
	}
	assert.Equal(t, 5, strings.Count(out, "fenced and read back"), "one read-back line per array")
	// An outside checker, reading only the arrays' own audit files and the
	// API server's audit log, finds every array's cut of the node before
	// fenced deleted its pod.
	rep, err := auditcheck.CheckFiles(filepath.Join(r.dir, "arrays"), filepath.Join(r.dir, "kubernetes", "audit.log"),
		auditcheck.Options{FencedUsers: []string{"fenced-a", "fenced-b", "fenced-c"}})
	require.NoError(t, err)
	t.Logf("arrays' record: %s", rep)
	for _, c := range rep.Cuts {
		t.Logf("  %s: %s cut by %s (%s %s, write %d) %s before %s was deleted", c.Array, c.Node, c.Requester, c.Method, c.Path, c.Seq, c.Lead, c.Pod)
	}
	require.True(t, rep.OK(), "%s", rep)
	require.GreaterOrEqual(t, rep.Deletions, 1, "fenced deleted the dead node's pod")
	assert.Len(t, rep.Cuts, 5*rep.Deletions, "each deletion follows a cut on each of the five arrays")
	// The ledger's steps come in the order the invariants demand.
	order := []string{"heartbeat lost", "verdict Failed", "opened by leader", "fenced, every array", "tainted fenced.io/fenced",
		"force-deleted by fenced-", "replacement pod"}
	last := -1
	for _, s := range order {
		i := strings.Index(out, s)
		require.Greater(t, i, last, "%q out of order", s)
		last = i
	}
	r.requireAllGone(t)
}

// TestDemoStopsOnSIGTERM starts the demo without killing a node, stops it
// with SIGTERM once it waits for Ctrl-C, and checks it cleaned up.
func TestDemoStopsOnSIGTERM(t *testing.T) {
	r := startDemo(t, "--keep", "--timeout", "5m")
	r.waitOutput(t, "Press Ctrl-C to stop everything.", 10*time.Minute)
	r.sample()
	out := r.out.String()
	assert.Contains(t, out, "status --addr http://127.0.0.1:")
	assert.Contains(t, out, "--token-file "+filepath.Join(r.dir, "api-token"))
	require.NoError(t, r.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, r.wait(t, time.Minute), "demo output:\n%s", r.out.String())
	r.requireAllGone(t)
	_, err := os.Stat(r.dir)
	require.NoError(t, err, "--dir is kept")
}
