package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/fenced-project/fenced/cmd/fenced/status"
)

// Replica is one `fenced run` process with its own configuration, data
// directory and log file.
type Replica struct {
	ID string
	// Dir holds the configuration (fenced.yaml), the data directory (data/)
	// and the logs (fenced.log, one per start appended).
	Dir        string
	ConfigPath string
	DataDir    string
	LogPath    string
	// HTTPURL is the status endpoint; RaftAddr the Raft listener (peers
	// reach it through their proxies).
	HTTPURL  string
	RaftAddr string

	binary string
	start  func(*exec.Cmd) error
	client *http.Client

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// Start starts the process. It returns once the process runs; use
// WaitReady to wait for its endpoint.
func (r *Replica) Start() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd != nil {
		return fmt.Errorf("replica %s: already running", r.ID)
	}
	logf, err := os.OpenFile(r.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("replica %s: open log: %w", r.ID, err)
	}
	fmt.Fprintf(logf, "=== start %s\n", time.Now().UTC().Format(time.RFC3339Nano))
	// The process outlives any one call: Stop and Kill end it.
	cmd := exec.CommandContext(context.Background(), r.binary, "run", "--config", r.ConfigPath, "--log-output", "stream")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := r.start(cmd); err != nil {
		_ = logf.Close()
		return fmt.Errorf("replica %s: start: %w", r.ID, err)
	}
	done := make(chan struct{})
	r.cmd, r.done = cmd, done
	go func() {
		err := cmd.Wait()
		_ = logf.Close()
		r.mu.Lock()
		r.err = err
		r.mu.Unlock()
		close(done)
	}()
	return nil
}

// Running reports whether the process runs.
func (r *Replica) Running() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return false
	}
	select {
	case <-r.done:
		return false
	default:
		return true
	}
}

// signal sends sig and waits up to wait for the process to exit, then
// kills it.
func (r *Replica) signal(sig syscall.Signal, wait time.Duration) error {
	r.mu.Lock()
	cmd, done := r.cmd, r.done
	r.mu.Unlock()
	if cmd == nil {
		return nil
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(wait):
		_ = cmd.Process.Kill()
		<-done
	}
	r.mu.Lock()
	r.cmd = nil
	err := r.err
	r.mu.Unlock()
	var exit *exec.ExitError
	if errors.As(err, &exit) && sig == syscall.SIGKILL {
		return nil
	}
	return err
}

// Kill kills the process with SIGKILL (kill -9) and waits for it to exit.
func (r *Replica) Kill() error { return r.signal(syscall.SIGKILL, 10*time.Second) }

// Stop stops the process with SIGTERM (SIGKILL after 15 s).
func (r *Replica) Stop() error { return r.signal(syscall.SIGTERM, 15*time.Second) }

// Status reads the replica's /status.
func (r *Replica) Status(ctx context.Context) (*status.Status, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.HTTPURL+"/status", nil)
	if err != nil {
		return nil, err
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("replica %s: status: %w", r.ID, err)
	}
	defer resp.Body.Close()
	var st status.Status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return nil, fmt.Errorf("replica %s: decode status: %w", r.ID, err)
	}
	return &st, nil
}

// newReplica lays out a replica's directory. start starts its process (the
// test bed's StartProcess: a process group of its own, killed if the test
// binary dies).
func newReplica(id, root, binary string, start func(*exec.Cmd) error) *Replica {
	dir := filepath.Join(root, id)
	return &Replica{ID: id, Dir: dir, ConfigPath: filepath.Join(dir, "fenced.yaml"), DataDir: filepath.Join(dir, "data"),
		LogPath: filepath.Join(dir, "fenced.log"), binary: binary, start: start, client: &http.Client{Timeout: 5 * time.Second}}
}

// PID returns the process ID of the running process (0 when it does not
// run).
func (r *Replica) PID() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil || r.cmd.Process == nil {
		return 0
	}
	return r.cmd.Process.Pid
}
