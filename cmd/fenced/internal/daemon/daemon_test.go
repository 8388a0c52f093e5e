package daemon

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/cmd/fenced/internal/logging"
	"github.com/fenced-project/fenced/configs"
)

const planted = "PLANTED-pw-7f3a9c"

// recorder records sd_notify states.
type recorder struct {
	mu     sync.Mutex
	states []string
}

func (r *recorder) notify(s string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.states = append(r.states, s)
	return nil
}

func (r *recorder) seen(s string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Contains(r.states, s)
}

func (r *recorder) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.states...)
}

func testConfig(t *testing.T, extra string) *configs.Config {
	t.Helper()
	dir := t.TempDir()
	doc := "replica:\n  id: r1\n  dataDir: " + filepath.Join(dir, "data") + "\n  raftBindAddress: 127.0.0.1:7441\n" + extra
	cfg, err := configs.Parse([]byte(doc), dir, configs.Options{})
	require.NoError(t, err)
	return cfg
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	return ln
}

func TestRunNotifiesServesAndStops(t *testing.T) {
	cfg := testConfig(t, "")
	rec := &recorder{}
	ln := listen(t)
	d, err := New(cfg, Options{
		Listener: ln,
		Notify:   rec.notify,
		Watchdog: func() (time.Duration, error) { return 40 * time.Millisecond, nil },
	})
	require.NoError(t, err)

	var stopped sync.WaitGroup
	stopped.Add(1)
	require.NoError(t, d.AddComponent("worker", func(ctx context.Context) error {
		defer stopped.Done()
		<-ctx.Done()
		return nil
	}))
	d.AddReadinessCheck("worker", func(context.Context) error { return nil })

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()

	require.Eventually(t, func() bool { return rec.seen("READY=1") }, 5*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool { return rec.seen("WATCHDOG=1") }, 5*time.Second, 10*time.Millisecond)
	assert.True(t, rec.seen("STATUS=ready: replica r1, 0 clusters"))
	resp, err := http.Get("http://" + ln.Addr().String() + "/readyz")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	require.Error(t, d.AddComponent("late", func(context.Context) error { return nil }), "components are added before Run")

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	stopped.Wait()
	assert.True(t, rec.seen("STOPPING=1"))
	states := rec.all()
	assert.Equal(t, "READY=1", states[0])
	assert.Equal(t, "STATUS=stopping", states[len(states)-1])
	_, err = os.Stat(cfg.Replica.DataDir)
	assert.NoError(t, err, "the data directory is created")
}

func TestComponentFailureStopsTheDaemon(t *testing.T) {
	d, err := New(testConfig(t, ""), Options{Listener: listen(t), Notify: (&recorder{}).notify})
	require.NoError(t, err)
	boom := errors.New("boom")
	require.NoError(t, d.AddComponent("raft", func(context.Context) error { return boom }))
	err = d.Run(context.Background())
	require.ErrorIs(t, err, boom)
	assert.Contains(t, err.Error(), "raft: boom")
}

func TestSlowComponentDoesNotHoldShutdown(t *testing.T) {
	d, err := New(testConfig(t, ""), Options{Listener: listen(t), Notify: (&recorder{}).notify, ShutdownTimeout: 600 * time.Millisecond})
	require.NoError(t, err)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	require.NoError(t, d.AddComponent("stuck", func(context.Context) error { <-release; return nil }))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("a stuck component held the daemon")
	}
}

func TestDataDirMustBeWritable(t *testing.T) {
	cfg := testConfig(t, "")
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	cfg.Replica.DataDir = filepath.Join(file, "data")
	d, err := New(cfg, Options{Listener: listen(t)})
	require.NoError(t, err)
	err = d.Run(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "data directory")
}

func TestSecretsAreReadAndRedacted(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	tok := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(pw, []byte(planted+"\n"), 0o600))
	require.NoError(t, os.WriteFile(tok, []byte("api-token-xyz-0123456789\n"), 0o600))
	cfg := testConfig(t, "http:\n  tokenFile: "+tok+"\narrays:\n  - name: u1\n    family: unity\n    endpoint: https://127.0.0.1:1\n    username: admin\n    passwordFile: "+pw+"\n")

	var buf bytes.Buffer
	red := logging.NewRedactor()
	log, err := logging.New(logging.Options{Level: "debug", Output: logging.Stream, Writer: &buf, Redactor: red})
	require.NoError(t, err)
	d, err := New(cfg, Options{Logger: log, Redactor: red})
	require.NoError(t, err)
	require.Len(t, d.ArrayConfigs(), 1)
	assert.Equal(t, planted, d.ArrayConfigs()[0].Password)

	log.Info("connecting", "cfg", d.ArrayConfigs()[0], "header", "Bearer api-token-xyz-0123456789")
	assert.NotContains(t, buf.String(), planted)
	assert.NotContains(t, buf.String(), "api-token-xyz")

	require.NoError(t, os.Remove(pw))
	_, err = New(cfg, Options{Logger: slog.New(slog.DiscardHandler)})
	require.Error(t, err)
	assert.Contains(t, err.Error(), pw)
}
