package cluster

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fenced-project/fenced/cluster/transport"
)

// A replica that joins a running group without Raft state (after
// `fenced datadir recover --rejoin`, or a new replica with joinExisting)
// holds none of the group's log. Raft would let it vote at once: an empty
// log is never more up to date than a candidate's, so it would elect any
// candidate, also one that lacks entries only the dead leader and this
// replica's lost state held, and those committed entries would be lost.
// So until it has caught up, it neither votes nor stands for election:
// the transport withholds its answer to vote requests (transport.VoteGate)
// and its election timers are set out of reach. It has caught up once it
// has applied the commit index of the first AppendEntries it received from
// a leader; then its timers are restored and the rejoin marker removed, so
// a restart before that is gated again.

// gatedTimeout replaces the election timers of a replica that has not
// caught up: long enough that it never becomes a candidate.
const gatedTimeout = 365 * 24 * time.Hour

// voteGate is the transport.VoteGate of a replica that rejoined without
// state.
type voteGate struct {
	closed  atomic.Bool
	target  atomic.Uint64
	applied func() uint64
	onOpen  func()
}

// MayVote reports whether the replica has caught up.
func (g *voteGate) MayVote() bool {
	if !g.closed.Load() {
		return true
	}
	g.check()
	return !g.closed.Load()
}

// LeaderCommit records the first commit index a leader announced, and
// opens the gate once it is applied.
func (g *voteGate) LeaderCommit(index uint64) {
	if !g.closed.Load() || index == 0 {
		return
	}
	g.target.CompareAndSwap(0, index)
	g.check()
}

func (g *voteGate) check() {
	t := g.target.Load()
	if t == 0 || g.applied() < t {
		return
	}
	if g.closed.CompareAndSwap(true, false) && g.onOpen != nil {
		g.onOpen()
	}
}

// Catching reports whether this replica rejoined without state and has not
// caught up with a leader yet (it neither votes nor stands for election).
func (n *Node) Catching() bool {
	return n.gate != nil && n.gate.closed.Load()
}

// newVoteGate prepares the gate of a replica that starts without the
// group's log (join) and leaves the rejoin marker in dir until it has
// caught up.
func (n *Node) newVoteGate(dir string) (*voteGate, error) {
	if err := writeMarker(dir, markerRejoin, "start without state and wait for the group's leader\n"); err != nil {
		return nil, err
	}
	g := &voteGate{applied: func() uint64 {
		if r := n.raftRef(); r != nil {
			return r.AppliedIndex()
		}
		return 0
	}}
	g.closed.Store(true)
	g.onOpen = func() { go n.caughtUp(dir, g.target.Load()) }
	return g, nil
}

// raftRef returns the Raft instance once it exists.
func (n *Node) raftRef() *raft.Raft {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.raft
}

// caughtUp restores the election timers and removes the rejoin marker.
func (n *Node) caughtUp(dir string, index uint64) {
	t := n.cfg.Timings
	r := n.raftRef()
	if r == nil {
		return
	}
	rc := r.ReloadableConfig()
	rc.HeartbeatTimeout, rc.ElectionTimeout = t.HeartbeatTimeout, t.ElectionTimeout
	if err := r.ReloadConfig(rc); err != nil {
		n.log.Error("caught up with the group, but cannot restore the election timers; restart this replica", "error", err)
		return
	}
	if err := os.Remove(filepath.Join(dir, markerRejoin)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		n.log.Warn("cannot remove the rejoin marker; the next start waits to catch up again", "error", err)
	}
	n.log.Info("caught up with the group's leader: this replica votes and may lead again", "index", index)
}

// voteGate returns the gate for the transport (nil when there is none, so
// that the interface holds no typed nil).
func (n *Node) voteGate() transport.VoteGate {
	if n.gate == nil {
		return nil
	}
	return n.gate
}
