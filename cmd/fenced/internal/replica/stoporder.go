package replica

import (
	"context"
	"sync"
	"time"

	"github.com/fenced-project/fenced/cmd/fenced/internal/daemon"
)

// raftStopWait bounds how long the Raft group waits for its users to stop
// before it closes anyway (inside the daemon's shutdown deadline).
const raftStopWait = 2 * time.Second

// stopOrder tracks the components that use the Raft group (the detectors
// and the fencing pipeline), so the group closes after them: on SIGTERM the
// leader's work stops first, then Raft, then (the daemon's rule) HTTP.
type stopOrder struct {
	wg sync.WaitGroup
}

// add adds a component of the daemon that the Raft group outlives.
func (s *stopOrder) add(d *daemon.Daemon, name string, run func(ctx context.Context) error) error {
	s.wg.Add(1)
	var once sync.Once
	done := func() { once.Do(s.wg.Done) }
	if err := d.AddComponent(name, func(ctx context.Context) error {
		defer done()
		return run(ctx)
	}); err != nil {
		done()
		return err
	}
	return nil
}

// Wait waits for every component added to stop, at most d.
func (s *stopOrder) Wait(d time.Duration) bool {
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}
