package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/cluster/clustertest"
	"github.com/fenced-project/fenced/cmd/fenced/status"
)

const (
	testVersion = "v0.0.0-test"
	planted     = "PLANTED-pw-7f3a9c"
)

// buildFenced builds the binary into a temporary directory, stamping the
// version the way the Makefile does.
func buildFenced(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "fenced")
	pkg := "github.com/fenced-project/fenced/cmd/fenced/internal/buildinfo"
	cmd := exec.Command("go", "build", "-o", bin,
		"-ldflags", "-X "+pkg+".version="+testVersion+" -X "+pkg+".revision=testrev", ".")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

// freeAddr returns a loopback address that was free a moment ago and
// has not been handed out before in this test process.
func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := clustertest.FreeAddr()
	require.NoError(t, err)
	return addr
}

// devConfig rewrites the shipped single-replica example to a temporary
// data directory and a free port, appending extra YAML.
func devConfig(t *testing.T, httpAddr, extra string) string {
	t.Helper()
	b, err := os.ReadFile("../../configs/dev-single.yaml")
	require.NoError(t, err)
	doc := string(b)
	dir := t.TempDir()
	for old, repl := range map[string]string{
		"dataDir: /var/lib/fenced":        "dataDir: " + filepath.Join(dir, "data"),
		"listen: 127.0.0.1:7440":          "listen: " + httpAddr,
		"raftBindAddress: 127.0.0.1:7441": "raftBindAddress: " + freeAddr(t),
	} {
		require.Contains(t, doc, old)
		doc = strings.Replace(doc, old, repl, 1)
	}
	if extra != "" {
		doc = strings.Replace(doc, "clusters: []\narrays: []\n", extra, 1)
	}
	p := filepath.Join(dir, "fenced.yaml")
	require.NoError(t, os.WriteFile(p, []byte(doc), 0o600))
	return p
}

// syncBuffer is a bytes.Buffer safe for a process to write while the test reads.
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

type proc struct {
	cmd    *exec.Cmd
	stderr *syncBuffer
	exited chan struct{}
	err    error // Wait's result, set before exited is closed
}

func start(t *testing.T, bin string, args ...string) *proc {
	t.Helper()
	return startEnv(t, nil, bin, args...)
}

// startEnv starts fenced outside systemd, plus env.
func startEnv(t *testing.T, env []string, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(bin, args...), stderr: &syncBuffer{}, exited: make(chan struct{})}
	p.cmd.Stdout = p.stderr
	p.cmd.Stderr = p.stderr
	p.cmd.Env = append(os.Environ(), "JOURNAL_STREAM=", "NOTIFY_SOCKET=", "WATCHDOG_USEC=", "WATCHDOG_PID=")
	p.cmd.Env = append(p.cmd.Env, env...)
	require.NoError(t, p.cmd.Start())
	go func() {
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("output of %s:\n%s", strings.Join(p.cmd.Args, " "), tail(p.stderr.String(), 16<<10))
		}
	})
	return p
}

// tail returns the last n bytes of s, marked when cut.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "[…]" + s[len(s)-n:]
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// stop sends SIGTERM and returns the exit code and how long exiting took.
func (p *proc) stop(t *testing.T) (int, time.Duration) {
	t.Helper()
	begin := time.Now()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-p.exited:
		took := time.Since(begin)
		var ee *exec.ExitError
		if errors.As(p.err, &ee) {
			return ee.ExitCode(), took
		}
		require.NoError(t, p.err)
		return 0, took
	case <-time.After(30 * time.Second):
		t.Fatalf("fenced did not exit after SIGTERM\n%s", p.stderr)
		return -1, 0
	}
}

func waitHealthy(t *testing.T, p *proc, base string) {
	t.Helper()
	require.Eventually(t, func() bool {
		code, _ := httpGet(t, base+"/healthz")
		return code == http.StatusOK
	}, 30*time.Second, 50*time.Millisecond, "fenced never answered /healthz:\n%s", p.stderr)
}

// TestRunSingleReplica is the acceptance test: the single-replica
// example serves /healthz, /status and /metrics, and SIGTERM stops it with
// status 0 within five seconds.
func TestRunSingleReplica(t *testing.T) {
	bin := buildFenced(t)
	addr := freeAddr(t)
	base := "http://" + addr
	p := start(t, bin, "run", "--config", devConfig(t, addr, ""))
	waitHealthy(t, p, base)

	code, body := httpGet(t, base+"/healthz")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "ok\n", body)
	// A single replica is ready once it has elected itself (within about
	// two Raft heartbeat timeouts).
	require.Eventually(t, func() bool {
		code, _ := httpGet(t, base+"/readyz")
		return code == http.StatusOK
	}, 30*time.Second, 50*time.Millisecond, p.stderr.String())

	code, body = httpGet(t, base+"/status")
	require.Equal(t, http.StatusOK, code)
	var raw map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &raw), body)
	for _, k := range []string{"version", "goVersion", "replicaID", "startedAt", "uptime", "uptimeSeconds", "ready", "checks"} {
		assert.Contains(t, raw, k)
	}
	var st status.Status
	require.NoError(t, json.Unmarshal([]byte(body), &st))
	assert.Equal(t, testVersion, st.Version)
	assert.Equal(t, "testrev", st.Revision)
	assert.Equal(t, "dev", st.ReplicaID)
	assert.True(t, st.Ready)
	assert.WithinDuration(t, time.Now(), st.StartedAt, time.Minute)

	code, body = httpGet(t, base+"/metrics")
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, `fenced_build_info{goversion="go`)
	assert.Contains(t, body, `version="`+testVersion+`"`)
	assert.Contains(t, body, "go_goroutines")
	assert.Contains(t, body, "process_resident_memory_bytes")

	out, err := exec.Command(bin, "status", "--addr", base).CombinedOutput()
	require.NoError(t, err, string(out))
	assert.Regexp(t, `Replica:\s+dev\n`, string(out))
	assert.Regexp(t, `Ready:\s+yes\n`, string(out))
	out, err = exec.Command(bin, "status", "--addr", base, "-o", "json").CombinedOutput()
	require.NoError(t, err, string(out))
	require.NoError(t, json.Unmarshal(out, &st))
	// A scheme-less address of a loopback endpoint is plain HTTP.
	out, err = exec.Command(bin, "status", "--addr", addr).CombinedOutput()
	require.NoError(t, err, string(out))

	exit, took := p.stop(t)
	t.Logf("exit status %d, %v after SIGTERM", exit, took)
	assert.Equal(t, 0, exit, p.stderr.String())
	assert.Less(t, took, 5*time.Second, "SIGTERM must stop fenced within 5 s")
	assert.Contains(t, p.stderr.String(), "fenced started")
	assert.Contains(t, p.stderr.String(), "fenced stopped")
}

// TestRunWithUnreachableCluster checks a cluster whose API server cannot be
// reached makes the replica not ready instead of stopping it, and that the
// planted array password never reaches the logs.
func TestRunWithUnreachableCluster(t *testing.T) {
	bin := buildFenced(t)
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	pw := filepath.Join(dir, "pw")
	require.NoError(t, os.WriteFile(pw, []byte(planted+"\n"), 0o600))
	require.NoError(t, os.WriteFile(kc, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://%s", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {password: %s, username: admin}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`, freeAddr(t), planted)), 0o600))
	extra := fmt.Sprintf(`clusters:
  - name: lab
    kubeconfig: %s
    arrays: [unity-1]
arrays:
  - name: unity-1
    family: unity
    endpoint: https://%s
    username: admin
    passwordFile: %s
`, kc, freeAddr(t), pw)
	addr := freeAddr(t)
	base := "http://" + addr
	p := start(t, bin, "run", "--config", devConfig(t, addr, extra), "--log-format", "json")
	waitHealthy(t, p, base)

	require.Eventually(t, func() bool {
		code, body := httpGet(t, base+"/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "[-] cluster/lab: GET https://")
	}, 30*time.Second, 100*time.Millisecond, p.stderr.String())
	code, body := httpGet(t, base+"/status")
	require.Equal(t, http.StatusOK, code)
	var st status.Status
	require.NoError(t, json.Unmarshal([]byte(body), &st))
	assert.False(t, st.Ready)
	require.Len(t, st.Clusters, 1)
	assert.Equal(t, "lab", st.Clusters[0].Name)
	assert.False(t, st.Clusters[0].Ready)
	assert.NotEmpty(t, st.Clusters[0].Error)

	// Once the replica leads its group of one, `fenced status` tells not
	// ready (3) from no leader (4).
	require.Eventually(t, func() bool {
		_, body := httpGet(t, base+"/status")
		var st status.Status
		return json.Unmarshal([]byte(body), &st) == nil && st.Raft != nil && st.Raft.LeaderID != ""
	}, 30*time.Second, 100*time.Millisecond, p.stderr.String())
	out, err := exec.Command(bin, "status", "--addr", base).CombinedOutput()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, string(out))
	assert.Equal(t, exitNotReady, ee.ExitCode(), "a replica that is not ready but has a leader: %s", out)
	assert.Regexp(t, `Ready:\s+no\n`, string(out))
	assert.Contains(t, string(out), "[-] cluster/lab: GET https://")

	exit, took := p.stop(t)
	assert.Equal(t, 0, exit)
	assert.Less(t, took, 5*time.Second)
	logs := p.stderr.String() + body + string(out)
	assert.Contains(t, logs, "cluster API server unreachable")
	assert.NotContains(t, logs, planted)
}

// TestConfigValidateExamples runs `fenced config validate` on every file
// shipped in configs/.
func TestConfigValidateExamples(t *testing.T) {
	bin := buildFenced(t)
	files, err := filepath.Glob("../../configs/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		out, err := exec.Command(bin, "config", "validate", f).CombinedOutput()
		require.NoError(t, err, "%s: %s", f, out)
		// One line, and the production examples' warnings about their
		// empty placeholders (configs' TestShippedExampleProtects).
		var lines []string
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if !strings.Contains(l, ": warning: ") || !strings.Contains(l, "can place no volume") {
				lines = append(lines, l)
			}
		}
		assert.Len(t, lines, 1, "one line besides the placeholder warnings: %s", out)
		assert.Contains(t, string(out), f+": valid: replica ")
	}
}

// TestConfigValidateBroken checks the CLI refuses broken configurations
// with the field and line of each problem.
func TestConfigValidateBroken(t *testing.T) {
	bin := buildFenced(t)
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	kc := filepath.Join(dir, "kc")
	require.NoError(t, os.WriteFile(pw, []byte("x\n"), 0o600))
	require.NoError(t, os.WriteFile(kc, []byte("x\n"), 0o600))
	base := "replica:\n  id: r1\n  raftBindAddress: 127.0.0.1:7441\n" +
		"clusters:\n  - name: c1\n    kubeconfig: " + kc + "\n    arrays: [ps-1]\n" +
		"arrays:\n  - name: ps-1\n    family: powerscale\n    endpoint: https://127.0.0.1:8080\n    username: u\n    passwordFile: " + pw + "\n"
	tcs := []struct{ name, doc, want string }{
		{"unknown key", base + "  - nmae: x\n", "arrays[1].nmae: unknown setting (line 14)"}, //nolint:misspell // the misspelling is the test
		{"bad duration", strings.Replace(base, "    arrays: [ps-1]\n", "    arrays: [ps-1]\n    pollInterval: 2 s\n", 1), `clusters[0].pollInterval: invalid duration "2 s"`},
		{"missing password file", strings.Replace(base, pw, pw+".gone", 1), "arrays[0].passwordFile: file " + pw + ".gone does not exist (line 13)"},
		{"unknown array", strings.Replace(base, "[ps-1]", "[ps-1, pstore-2]", 1), `clusters[0].arrays[1]: unknown array "pstore-2" (line 7)`},
		{"duplicate replica ids", base + "peers:\n  - id: r1\n    raftAddress: 127.0.0.2:7441\n    httpAddress: http://127.0.0.2:7440\n", `peers[0].id: duplicate replica id "r1" (also replica.id) (line 15)`},
		{"bad percentage", strings.Replace(base, "    arrays: [ps-1]\n", "    arrays: [ps-1]\n    stormLimit: 33.5%\n", 1), `clusters[0].stormLimit: invalid percentage "33.5%": want a whole number from 1% to 100% (line 8)`},
		{"planted inline password", strings.Replace(base, "    passwordFile: "+pw+"\n", "    password: "+planted+"\n", 1), "arrays[0].password: inline passwords are refused"},
	}
	for _, tc := range tcs {
		t.Run(tc.name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "fenced.yaml")
			require.NoError(t, os.WriteFile(f, []byte(tc.doc), 0o600))
			var stdout, stderr bytes.Buffer
			cmd := exec.Command(bin, "config", "validate", f)
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			var ee *exec.ExitError
			require.ErrorAs(t, err, &ee, "want a non-zero exit\n%s", stdout.String())
			assert.Equal(t, 1, ee.ExitCode())
			assert.Contains(t, stderr.String(), tc.want)
			assert.NotContains(t, stdout.String()+stderr.String(), planted)

			// -o json: the same problem, as a field, a line and a message.
			cmd = exec.Command(bin, "config", "validate", "-o", "json", f)
			js, err := cmd.Output()
			require.ErrorAs(t, err, &ee)
			assert.Equal(t, 1, ee.ExitCode())
			var results []struct {
				File     string `json:"file"`
				Valid    bool   `json:"valid"`
				Problems []struct {
					Field   string `json:"field"`
					Line    int    `json:"line"`
					Message string `json:"message"`
				} `json:"problems"`
			}
			require.NoError(t, json.Unmarshal(js, &results), string(js))
			require.Len(t, results, 1)
			assert.Equal(t, f, results[0].File)
			assert.False(t, results[0].Valid)
			require.NotEmpty(t, results[0].Problems, string(js))
			found := false
			for _, p := range results[0].Problems {
				line := fmt.Sprintf("%s: %s (line %d)", p.Field, p.Message, p.Line)
				found = found || strings.Contains(line, tc.want)
			}
			assert.True(t, found, "%s not among %s", tc.want, js)
			assert.NotContains(t, string(js), planted)

			// fenced run refuses it too, with EX_CONFIG and the same message.
			cmd = exec.Command(bin, "run", "--config", f)
			out, err := cmd.CombinedOutput()
			require.ErrorAs(t, err, &ee, string(out))
			assert.Equal(t, exitConfig, ee.ExitCode())
			assert.Contains(t, string(out), strings.ReplaceAll(tc.want, `"`, `\"`))
			assert.NotContains(t, string(out), planted)
		})
	}
}

func TestVersionCommand(t *testing.T) {
	bin := buildFenced(t)
	out, err := exec.Command(bin, "version").CombinedOutput()
	require.NoError(t, err)
	assert.Regexp(t, `^fenced v0\.0\.0-test \(revision testrev, go1\.\d+.*\)\n$`, string(out))
}

// TestCommandsInProcess covers usage errors without a build.
func TestCommandsInProcess(t *testing.T) {
	var out, errb bytes.Buffer
	assert.Equal(t, exitUsage, run(context.Background(), []string{"frobnicate"}, &out, &errb))
	assert.Equal(t, exitConfig, run(context.Background(), []string{"run"}, &out, &errb), "--config is required")
	assert.Equal(t, exitConfig, run(context.Background(), []string{"run", "--config", "x.yaml", "--no-such-flag"}, &out, &errb), "a bad flag in ExecStart= is configuration")
	assert.Equal(t, exitConfig, run(context.Background(), []string{"run", "--config", "x.yaml", "extra"}, &out, &errb))
	assert.Equal(t, exitConfig, run(context.Background(), []string{"run", "--config", "x.yaml", "--log-format", "xml"}, &out, &errb))
	assert.Equal(t, exitUsage, run(context.Background(), []string{"status", "-o", "yaml"}, &out, &errb))
	assert.Equal(t, exitFailure, run(context.Background(), []string{"status", "--addr", "http://" + freeAddr(t), "--timeout", "2s"}, &out, &errb))
	assert.Equal(t, exitConfig, run(context.Background(), []string{"run", "--config", filepath.Join(t.TempDir(), "missing.yaml")}, &out, &errb))
}

// notifySocket listens where systemd would and collects the datagrams
// fenced sends.
type notifySocket struct {
	conn *net.UnixConn
	mu   sync.Mutex
	msgs []string
}

func listenNotify(t *testing.T) (*notifySocket, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	n := &notifySocket{conn: conn}
	go func() {
		buf := make([]byte, 4096)
		for {
			k, err := conn.Read(buf)
			if err != nil {
				return
			}
			n.mu.Lock()
			n.msgs = append(n.msgs, string(buf[:k]))
			n.mu.Unlock()
		}
	}()
	return n, path
}

func (n *notifySocket) count(prefix string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := 0
	for _, m := range n.msgs {
		if strings.HasPrefix(m, prefix) {
			c++
		}
	}
	return c
}

// TestRunTalksToSystemd runs the binary with a notify socket and a watchdog
// as systemd would: it must report READY, STATUS, keep the watchdog fed from
// its main loop and report STOPPING on SIGTERM.
func TestRunTalksToSystemd(t *testing.T) {
	bin := buildFenced(t)
	n, sock := listenNotify(t)
	addr := freeAddr(t)
	p := startEnv(t, []string{"NOTIFY_SOCKET=" + sock, "WATCHDOG_USEC=300000"}, bin, "run", "--config", devConfig(t, addr, ""))
	waitHealthy(t, p, "http://"+addr)

	require.Eventually(t, func() bool { return n.count("READY=1") == 1 }, 10*time.Second, 20*time.Millisecond)
	assert.Positive(t, n.count("STATUS="), "a status line with READY=1")
	require.Eventually(t, func() bool { return n.count("WATCHDOG=1") >= 3 }, 10*time.Second, 20*time.Millisecond,
		"the watchdog is fed every WATCHDOG_USEC/2")

	exit, took := p.stop(t)
	assert.Equal(t, 0, exit)
	assert.Less(t, took, 5*time.Second)
	require.Eventually(t, func() bool { return n.count("STOPPING=1") == 1 }, 5*time.Second, 20*time.Millisecond)
	assert.Equal(t, 1, n.count("STATUS=stopping"))
}

// TestEndlessInputsUnderMemoryLimit runs the CLI and the daemon under a
// 4 GiB address-space limit (the Go runtime reserves much of it up front)
// with /dev/zero as the token file and as the
// configuration: each stops with an error naming the file instead of
// reading until memory runs out.
func TestEndlessInputsUnderMemoryLimit(t *testing.T) {
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skip("no /dev/zero")
	}
	bin := buildFenced(t)
	for _, args := range [][]string{
		{"pause", "--addr", "http://127.0.0.1:1", "--token-file", "/dev/zero", "--reason", "x"},
		{"config", "validate", "/dev/zero"},
		{"run", "--config", "/dev/zero"},
		{"resume", "--config", "/dev/zero", "--reason", "x"},
	} {
		t.Run(strings.Join(args[:2], " "), func(t *testing.T) {
			script := `ulimit -v 4194304 && exec "$@"`
			out, err := exec.Command("sh", append([]string{"-c", script, "sh", bin}, args...)...).CombinedOutput()
			require.Error(t, err, "%s", out)
			var ee *exec.ExitError
			require.ErrorAs(t, err, &ee)
			assert.False(t, ee.ProcessState.Sys().(syscall.WaitStatus).Signaled(), "killed by a signal: %s", out)
			assert.Contains(t, string(out), "/dev/zero is larger than", "%s", out)
			assert.NotContains(t, string(out), "out of memory")
		})
	}
}
