package testbed

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// spawner starts child processes from one OS thread that stays alive until
// the spawner is closed. Pdeathsig is delivered when the thread that forked
// the child ends, not when the process does; starting every child from a
// locked thread that outlives it makes Pdeathsig mean "the test binary died".
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
		return errors.New("start process: test bed already stopped")
	}
	return <-errc
}

// startChild starts cmd in a process group of its own, to be killed with
// SIGKILL when the spawner's thread ends (the test binary died or the test
// bed stopped).
func (s *spawner) startChild(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	return s.start(cmd)
}

// StartProcess starts a process that belongs with the test bed, such as a
// fenced replica, the way the test bed starts its own components: in a
// process group of its own and killed with SIGKILL if the test binary dies,
// so no process outlives a test that timed out or was killed. Stop the
// process before the control plane; once it is stopped, StartProcess fails.
func (cp *ControlPlane) StartProcess(cmd *exec.Cmd) error {
	return cp.spawner.startChild(cmd)
}

// close ends the spawner's thread; call it only after its children exited.
func (s *spawner) close() {
	s.once.Do(func() { close(s.reqs) })
	<-s.done
}

// Process is one control-plane component run as a child process in a
// process group of its own, killed with SIGKILL if the test binary dies.
type Process struct {
	// Name is the component's name, e.g. "kube-apiserver".
	Name string
	// LogPath is the file receiving the component's stdout and stderr.
	LogPath string

	path    string
	args    []string
	env     []string // added to this process's environment
	spawner *spawner

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{} // closed when the current cmd has been waited for
	waitErr error
}

func newProcess(sp *spawner, name, path string, args []string, logPath string) *Process {
	return &Process{Name: name, LogPath: logPath, path: path, args: args, spawner: sp}
}

// Args returns the command-line arguments the process is started with.
func (p *Process) Args() []string { return append([]string(nil), p.args...) }

// Start starts the process; it is an error if it is already running.
func (p *Process) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		return fmt.Errorf("start %s: already running (pid %d)", p.Name, p.cmd.Process.Pid)
	}
	logf, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("start %s: open log: %w", p.Name, err)
	}
	fmt.Fprintf(logf, "=== %s start: %s %s\n", time.Now().Format(time.RFC3339Nano), p.path, strings.Join(p.args, " "))
	cmd := exec.Command(p.path, p.args...) //nolint:noctx // the process outlives any one call: Stop ends it
	if len(p.env) > 0 {
		cmd.Env = append(os.Environ(), p.env...)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := p.spawner.startChild(cmd); err != nil {
		_ = logf.Close()
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	exited := make(chan struct{})
	p.cmd, p.exited = cmd, exited
	go func() {
		err := cmd.Wait()
		_ = logf.Close()
		p.mu.Lock()
		p.waitErr = err
		if p.cmd == cmd {
			p.cmd = nil
		}
		p.mu.Unlock()
		close(exited)
	}()
	return nil
}

// Running reports whether the process is running.
func (p *Process) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil
}

// Pid returns the process id, or 0 when it is not running.
func (p *Process) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Exited returns a channel closed when the current run of the process ends
// (nil when it is not running).
func (p *Process) Exited() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return nil
	}
	return p.exited
}

// Stop sends SIGTERM to the process group, waits up to grace, then sends
// SIGKILL and waits for the process to be reaped. Stopping a process that is
// not running does nothing.
func (p *Process) Stop(grace time.Duration) error {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil {
		return nil
	}
	pgid := cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(grace):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-exited
	}
	// Anything the component forked into its group goes too.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	return nil
}

// Kill sends SIGKILL to the process group and waits for the process.
func (p *Process) Kill() {
	_ = p.Stop(0)
}

// Restart stops the process (SIGTERM, then SIGKILL after grace) and starts
// it again with the same arguments.
func (p *Process) Restart(grace time.Duration) error {
	if err := p.Stop(grace); err != nil {
		return err
	}
	return p.Start()
}

// RSS returns the resident set size of the running process in bytes.
func (p *Process) RSS() (int64, error) {
	pid := p.Pid()
	if pid == 0 {
		return 0, fmt.Errorf("rss of %s: not running", p.Name)
	}
	return rssOf(pid)
}

// rssOf reads VmRSS of a process from /proc.
func rssOf(pid int) (int64, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, fmt.Errorf("read status of pid %d: %w", pid, err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			fields := strings.Fields(rest)
			if len(fields) == 2 && fields[1] == "kB" {
				kb, err := strconv.ParseInt(fields[0], 10, 64)
				if err != nil {
					return 0, fmt.Errorf("parse VmRSS of pid %d: %w", pid, err)
				}
				return kb * 1024, nil
			}
		}
	}
	return 0, fmt.Errorf("no VmRSS for pid %d", pid)
}

// logTail returns the last n bytes of a component's log, for error messages.
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
	off := st.Size() - n
	if off < 0 {
		off = 0
	}
	buf := make([]byte, st.Size()-off)
	_, _ = f.ReadAt(buf, off)
	return string(buf)
}

// SetNice sets the scheduling priority (nice value, -20..19) of every
// running component, thread by thread: Linux keeps a nice value per thread,
// and threads a component starts later inherit it from the one that starts
// them. A benchmark on a small machine uses it to favour the control plane
// and the simulated kubelets, which in production run on machines of their
// own, over the processes it measures.
func (cp *ControlPlane) SetNice(nice int) error {
	var errs []error
	for _, p := range cp.Processes() {
		pid := p.Pid()
		if pid == 0 {
			continue
		}
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			errs = append(errs, fmt.Errorf("nice %d for %s: %w", nice, p.Name, err))
			continue
		}
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil {
				continue
			}
			if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, nice); err != nil && !errors.Is(err, syscall.ESRCH) {
				errs = append(errs, fmt.Errorf("nice %d for %s thread %d: %w", nice, p.Name, tid, err))
			}
		}
	}
	return errors.Join(errs...)
}
