package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// spawner starts child processes from one locked OS thread that lives until
// the spawner is closed. The kernel sends Pdeathsig when the thread that
// forked a child ends, not when the process does; forking every child from
// a thread that outlives it makes Pdeathsig mean "the demo died".
type spawner struct {
	reqs chan func()
	once sync.Once
	done chan struct{}
}

func newSpawner() *spawner {
	s := &spawner{reqs: make(chan func()), done: make(chan struct{})}
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with this goroutine
		defer close(s.done)
		for f := range s.reqs {
			f()
		}
	}()
	return s
}

// start runs cmd.Start on the spawner's thread.
func (s *spawner) start(cmd *exec.Cmd) error {
	errc := make(chan error, 1)
	select {
	case s.reqs <- func() { errc <- cmd.Start() }:
	case <-s.done:
		return errors.New("start process: the demo is stopping")
	}
	return <-errc
}

// close ends the spawner's thread; call it only after its children exited.
func (s *spawner) close() {
	s.once.Do(func() { close(s.reqs) })
	<-s.done
}

// child is one process the demo runs in a process group of its own, with
// its output appended to a log file. It gets SIGKILL if the demo dies.
type child struct {
	name    string
	logPath string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// start starts path with args.
func (c *child) start(sp *spawner, path string, args ...string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd != nil {
		return fmt.Errorf("start %s: already running", c.name)
	}
	logf, err := os.OpenFile(c.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("start %s: open log: %w", c.name, err)
	}
	// The process lives until stop, not for the length of a request.
	cmd := exec.CommandContext(context.Background(), path, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := sp.start(cmd); err != nil {
		_ = logf.Close()
		return fmt.Errorf("start %s: %w", c.name, err)
	}
	done := make(chan struct{})
	c.cmd, c.done = cmd, done
	go func() {
		_ = cmd.Wait()
		_ = logf.Close()
		close(done)
	}()
	return nil
}

// exited returns a channel closed when the process has exited (nil if it
// was never started).
func (c *child) exited() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.done
}

// stop sends SIGTERM to the process group, waits up to grace, then sends
// SIGKILL; it returns once the process was reaped.
func (c *child) stop(grace time.Duration) {
	c.mu.Lock()
	cmd, done := c.cmd, c.done
	c.mu.Unlock()
	if cmd == nil {
		return
	}
	pgid := cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(grace):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-done
	}
	// Anything the process left in its group goes too.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

// logTail returns the last n bytes of a log file, for error messages.
func logTail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return ""
	}
	off := max(st.Size()-n, 0)
	buf := make([]byte, st.Size()-off)
	_, _ = f.ReadAt(buf, off)
	return string(buf)
}
