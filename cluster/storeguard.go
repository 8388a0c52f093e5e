package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/raft"
)

// raftStore is the Raft log and stable store (BoltDB in production).
type raftStore interface {
	raft.LogStore
	raft.StableStore
}

// ErrStorageFull means this replica's data directory has no space left: its
// Raft writes are held until space is freed.
var ErrStorageFull = errors.New("raft data directory is full")

// storeGuard wraps the Raft store. A write that fails because the disk or
// the quota is full is not returned to Raft, which would make a leader step
// down and campaign again, over and over, with every term change written to
// the same full disk: the write is held and retried until it succeeds or the
// replica closes. While it is held the replica neither commits nor
// campaigns (Raft's main loop waits), heartbeats still flow so that the
// others do not elect, the state shows in Full, a metric and one log line.
// Other write errors pass through. The first log entry stored records in the
// data directory that the store has held the log (markerHeld).
type storeGuard struct {
	raftStore
	ctx   context.Context
	log   *slog.Logger
	dir   string
	retry time.Duration

	// released makes held log writes (StoreLogs, DeleteRange) fail with
	// their error instead of waiting, while the disk stays full: set when
	// a full-disk leader hands over (a failed log write makes Raft's leader
	// step down; stable-store writes, which Raft cannot fail, stay held).
	released atomic.Bool
	kick     chan struct{} // wakes held writes when released is set

	held    atomic.Bool
	onHeld  func() // after markerHeld is written (removes the rejoin marker)
	mu      sync.Mutex
	fullErr error
	since   time.Time
	onFull  func(full bool)
	failure func()
}

// Full returns nil, or an error wrapping ErrStorageFull that says since when
// and why.
func (g *storeGuard) Full() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.fullErr == nil {
		return nil
	}
	return fmt.Errorf("%w: %s since %s; Raft writes are held until space is freed: %w",
		ErrStorageFull, g.dir, g.since.UTC().Format(time.RFC3339), g.fullErr)
}

func isNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// release makes the log writes held now and later, until the disk has
// space again, return their error instead of waiting.
func (g *storeGuard) release() {
	g.released.Store(true)
	select {
	case g.kick <- struct{}{}:
	default:
	}
}

// write runs op, holding it while the disk is full.
func (g *storeGuard) write(what string, op func() error) error {
	return g.writeHeld(what, false, op)
}

// writeLog is write for a log write, which release lets fail.
func (g *storeGuard) writeLog(what string, op func() error) error {
	return g.writeHeld(what, true, op)
}

func (g *storeGuard) writeHeld(what string, releasable bool, op func() error) error {
	var t *time.Timer
	for {
		err := op()
		if err == nil {
			g.setFull(nil, what)
			return nil
		}
		if g.failure != nil {
			g.failure()
		}
		if !isNoSpace(err) {
			return err
		}
		g.setFull(err, what)
		if releasable && g.released.Load() {
			return fmt.Errorf("%s: %w: handing leadership over: %w", what, ErrStorageFull, err)
		}
		if t == nil {
			t = time.NewTimer(g.retry)
			defer t.Stop()
		} else {
			t.Reset(g.retry)
		}
		select {
		case <-g.ctx.Done():
			return fmt.Errorf("%s: %w", what, err)
		case <-t.C:
		case <-g.kick:
		}
	}
}

func (g *storeGuard) setFull(err error, what string) {
	g.mu.Lock()
	was := g.fullErr != nil
	switch {
	case err != nil && !was:
		g.fullErr, g.since = err, time.Now()
	case err == nil && was:
		g.fullErr = nil
		g.released.Store(false)
	default:
		g.mu.Unlock()
		return
	}
	since := g.since
	g.mu.Unlock()
	if err != nil {
		g.log.Error("raft data directory is full: Raft writes are held until space is freed; this replica neither commits nor stands for election meanwhile",
			"dir", g.dir, "write", what, "error", err)
	} else {
		g.log.Info("raft data directory has space again: Raft writes resumed", "dir", g.dir, "held", time.Since(since).Round(time.Millisecond))
	}
	if g.onFull != nil {
		g.onFull(err != nil)
	}
}

// markHeld records that the store holds the log, once.
func (g *storeGuard) markHeld() {
	if g.held.Load() {
		return
	}
	if err := writeMarker(g.dir, markerHeld, "this store has held the group's Raft log: a missing or empty raft.db is data loss, not a first start\n"); err != nil {
		g.log.Warn("cannot record that the store holds the log", "error", err)
		return
	}
	g.held.Store(true)
	if g.onHeld != nil {
		g.onHeld()
	}
}

// StoreLog implements raft.LogStore.
func (g *storeGuard) StoreLog(l *raft.Log) error {
	return g.StoreLogs([]*raft.Log{l})
}

// StoreLogs implements raft.LogStore.
func (g *storeGuard) StoreLogs(logs []*raft.Log) error {
	err := g.writeLog("store log entries", func() error { return g.raftStore.StoreLogs(logs) })
	if err == nil {
		g.markHeld()
	}
	return err
}

// DeleteRange implements raft.LogStore.
func (g *storeGuard) DeleteRange(lo, hi uint64) error {
	return g.writeLog("delete log entries", func() error { return g.raftStore.DeleteRange(lo, hi) })
}

// Set implements raft.StableStore.
func (g *storeGuard) Set(k, v []byte) error {
	return g.write("store "+string(k), func() error { return g.raftStore.Set(k, v) })
}

// SetUint64 implements raft.StableStore.
func (g *storeGuard) SetUint64(k []byte, v uint64) error {
	return g.write("store "+string(k), func() error { return g.raftStore.SetUint64(k, v) })
}

// Raft's stable-store keys (hashicorp/raft raft.go).
var (
	keyCurrentTerm  = []byte("CurrentTerm")
	keyLastVoteTerm = []byte("LastVoteTerm")
)

// checkStoredLog reads every log entry the store holds, so that a damaged
// entry is refused here rather than met by Raft while it starts, and checks
// that the indexes run without gaps.
func checkStoredLog(s raft.LogStore) error {
	first, err := s.FirstIndex()
	if err != nil {
		return fmt.Errorf("read first log index: %w", err)
	}
	last, err := s.LastIndex()
	if err != nil {
		return fmt.Errorf("read last log index: %w", err)
	}
	if last < first {
		return damaged("last log index %d is below the first %d", last, first)
	}
	if first == 0 {
		return nil
	}
	var l raft.Log
	for i := first; i <= last; i++ {
		if err := s.GetLog(i, &l); err != nil {
			return &storeDamage{msg: fmt.Sprintf("log entry %d of %d..%d: %v", i, first, last, err)}
		}
		if l.Index != i {
			return damaged("log entry stored under index %d says it is %d", i, l.Index)
		}
	}
	return nil
}

// interruptedBootstrap tells whether the store holds what a first bootstrap
// killed half-way leaves: Raft writes the current term 1, then the first
// configuration entry, in two transactions. With the term and no entry, no
// vote cast and no snapshot, Raft would take the store as existing state and
// stay a follower with no configuration forever. Clearing the term makes the
// start a first start again; nothing was ever committed.
func interruptedBootstrap(s raftStore, snaps raft.SnapshotStore) (bool, error) {
	term, err := s.GetUint64(keyCurrentTerm)
	if err != nil || term != 1 {
		return false, nil // "not found" or a real term: not a half bootstrap
	}
	if vote, err := s.GetUint64(keyLastVoteTerm); err == nil && vote != 0 {
		return false, nil
	}
	last, err := s.LastIndex()
	if err != nil {
		return false, fmt.Errorf("read last log index: %w", err)
	}
	if last != 0 {
		return false, nil
	}
	list, err := snaps.List()
	if err != nil {
		return false, fmt.Errorf("list snapshots: %w", err)
	}
	return len(list) == 0, nil
}
