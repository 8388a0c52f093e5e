package e2e

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// ErrFailNow is what Standalone.FailNow panics with; the program's Run
// recovers it.
var ErrFailNow = errors.New("harness failure")

// Standalone is the harness's test stand-in for programs (the chaos
// runner, the benchmarks): cleanups, temporary directories under one root,
// logs to stderr, and FailNow as a panic that Run recovers.
type Standalone struct {
	root string
	keep bool

	mu       sync.Mutex
	cleanups []func()
	failed   bool
	n        int
}

var _ TB = (*Standalone)(nil)

// NewStandalone makes a stand-in whose directories are under keep (kept
// afterwards), or under a new temporary directory removed by Finish unless
// the run failed.
func NewStandalone(keep string) (*Standalone, error) {
	t := &Standalone{keep: keep != ""}
	var err error
	if keep != "" {
		t.root, err = filepath.Abs(keep)
		if err == nil {
			err = os.MkdirAll(t.root, 0o755)
		}
	} else {
		t.root, err = os.MkdirTemp("", "fenced-run-")
	}
	if err != nil {
		return nil, fmt.Errorf("work directory: %w", err)
	}
	return t, nil
}

// Root is the directory everything of the run is under.
func (t *Standalone) Root() string { return t.root }

// Run calls f, turning a FailNow into an error, and then runs the
// cleanups (Finish).
func (t *Standalone) Run(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(error)
			if !ok || !errors.Is(e, ErrFailNow) {
				panic(r)
			}
			err = fmt.Errorf("the run stopped on a harness failure (logged above)")
		}
		t.Finish()
	}()
	return f()
}

// Helper does nothing.
func (t *Standalone) Helper() {}

// Cleanup registers f to run at Finish, last registered first.
func (t *Standalone) Cleanup(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cleanups = append(t.cleanups, f)
}

// TempDir returns a new directory under the root.
func (t *Standalone) TempDir() string {
	t.mu.Lock()
	t.n++
	n := t.n
	t.mu.Unlock()
	dir := filepath.Join(t.root, fmt.Sprintf("tmp%03d", n))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Errorf("temp dir: %v", err)
		t.FailNow()
	}
	return dir
}

// Logf writes a line to stderr.
func (t *Standalone) Logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
}

// Errorf marks the run failed and writes a line to stderr.
func (t *Standalone) Errorf(format string, args ...any) {
	t.Fail()
	fmt.Fprintf(os.Stderr, format+"\n", args...)
}

// Fail marks the run failed (its evidence is kept).
func (t *Standalone) Fail() {
	t.mu.Lock()
	t.failed = true
	t.mu.Unlock()
}

// FailNow marks the run failed and panics with ErrFailNow.
func (t *Standalone) FailNow() {
	t.Fail()
	panic(ErrFailNow)
}

// Failed reports whether the run failed.
func (t *Standalone) Failed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.failed
}

// ArtifactDir is where the harness saves the evidence of a failed run.
func (t *Standalone) ArtifactDir() string {
	dir := filepath.Join(t.root, "evidence")
	_ = os.MkdirAll(dir, 0o755)
	return dir
}

// Finish runs the cleanups in reverse order, then removes the work
// directory unless it is kept or the run failed.
func (t *Standalone) Finish() {
	t.mu.Lock()
	fs := t.cleanups
	t.cleanups = nil
	t.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
	if t.Failed() && !t.keep {
		fmt.Fprintf(os.Stderr, "evidence of the failed run kept in %s\n", filepath.Join(t.root, "evidence"))
		return
	}
	if !t.keep {
		_ = os.RemoveAll(t.root)
	}
}
