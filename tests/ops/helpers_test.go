package ops

import (
	"bytes"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// repoRoot is the repository's root directory (where go.mod is).
func repoRoot(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	require.True(t, ok)
	dir := filepath.Dir(file)
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.HasPrefix(string(b), "module github.com/fenced-project/fenced\n") {
			return dir
		}
		parent := filepath.Dir(dir)
		require.NotEqual(t, parent, dir, "repository root not found")
		dir = parent
	}
}

// prerequisite skips the test on a developer's machine when something it
// needs is missing, and fails it when CI=true: CI must provide it.
func prerequisite(t testing.TB, ok bool, what string) {
	t.Helper()
	if ok {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s; CI must provide it (.ci/run installs what the tests need)", what)
	}
	t.Skipf("%s; CI=true makes this a failure", what)
}

// requireTool finds a program on PATH (see prerequisite).
func requireTool(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	prerequisite(t, err == nil, name+" is missing")
	return p
}

var (
	buildOnce sync.Once
	buildBin  string
	buildErr  error
	buildOut  []byte
)

// fencedBinary builds cmd/fenced once per test binary, as make build does:
// static and stripped, as the package requires.
func fencedBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "fenced-ops-bin-")
		if err != nil {
			buildErr = err
			return
		}
		buildBin = filepath.Join(dir, "fenced")
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", buildBin, "./cmd/fenced")
		cmd.Dir = repoRoot(t)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		buildOut, buildErr = cmd.CombinedOutput()
	})
	require.NoError(t, buildErr, "go build ./cmd/fenced: %s", buildOut)
	return buildBin
}

// freeAddr returns a loopback address that was free a moment ago.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// syncBuffer is a bytes.Buffer a process may write while the test reads it.
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

// daemon is a running `fenced run`.
type daemon struct {
	cmd    *exec.Cmd
	out    *syncBuffer
	base   string
	exited chan struct{}
}

// startDaemon runs `fenced run --config cfg` with extra arguments, serving
// HTTP on httpAddr, and waits for /healthz. It is killed when the test ends
// unless stopped before.
func startDaemon(t testing.TB, cfg, httpAddr string, args ...string) *daemon {
	t.Helper()
	d := &daemon{out: &syncBuffer{}, base: "http://" + httpAddr, exited: make(chan struct{})}
	d.cmd = exec.Command(fencedBinary(t), append([]string{"run", "--config", cfg}, args...)...)
	d.cmd.Stdout, d.cmd.Stderr = d.out, d.out
	d.cmd.Env = append(os.Environ(), "JOURNAL_STREAM=", "NOTIFY_SOCKET=", "WATCHDOG_USEC=", "CREDENTIALS_DIRECTORY=")
	require.NoError(t, d.cmd.Start())
	go func() { _ = d.cmd.Wait(); close(d.exited) }()
	t.Cleanup(func() { d.stop(t) })
	require.Eventually(t, func() bool {
		select {
		case <-d.exited:
			return true
		default:
		}
		resp, err := http.Get(d.base + "/healthz")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 30*time.Second, 50*time.Millisecond)
	select {
	case <-d.exited:
		t.Fatalf("fenced run exited early:\n%s", d.out.String())
	default:
	}
	return d
}

// stop sends SIGTERM and waits for the process to end.
func (d *daemon) stop(t testing.TB) {
	t.Helper()
	select {
	case <-d.exited:
		return
	default:
	}
	_ = d.cmd.Process.Signal(os.Interrupt)
	select {
	case <-d.exited:
	case <-time.After(10 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.exited
	}
}

// get fetches a URL and returns the status code and body.
func get(t testing.TB, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	var b bytes.Buffer
	_, err = b.ReadFrom(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, b.String()
}
