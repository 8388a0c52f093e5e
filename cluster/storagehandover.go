package cluster

import (
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// storageHandover hands a full-disk leader's leadership over. While the
// data directory is full the store guard holds Raft's writes, and
// heartbeats keep flowing: without it the followers would never elect, and
// nothing would be fenced anywhere until a person freed space.
type storageHandover struct {
	mu    sync.Mutex
	timer *time.Timer
	last  string // the last handover, for /status
}

// armStorageHandover starts the handover bound when the data directory
// becomes full and stops it when it has space again.
func (n *Node) armStorageHandover(full bool) {
	h := &n.handover
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.timer != nil {
		h.timer.Stop()
		h.timer = nil
	}
	if full {
		h.timer = time.AfterFunc(n.cfg.Timings.StorageFullHandover, n.storageFullTooLong)
	}
}

// storageFullTooLong runs when the data directory has been full for
// StorageFullHandover. On the leader it hands leadership over: the
// transfer is asked for, and the log writes held are released with their
// error (a failed log write makes Raft's leader step down, which it must
// when its loop is held in one). A follower does nothing: its held
// stable-store writes already keep it from standing for election. The
// check is armed again while the disk stays full.
func (n *Node) storageFullTooLong() {
	full := n.guard.Full()
	if full == nil || n.ctx.Err() != nil {
		return
	}
	n.armStorageHandover(true)
	if n.raft == nil || n.raft.State() != raft.Leader {
		return
	}
	reason := fmt.Sprintf("the data directory has been full for over %s: %v", n.cfg.Timings.StorageFullHandover, full)
	n.log.Error("handing Raft leadership over to another replica: this leader cannot write its log, and its heartbeats would keep the group from electing one that can; it will not stand for election until space is freed",
		"reason", reason, "bound", n.cfg.Timings.StorageFullHandover)
	n.metrics.fullHandovers.Inc()
	n.handover.mu.Lock()
	n.handover.last = time.Now().UTC().Format(time.RFC3339) + ": " + reason
	n.handover.mu.Unlock()
	fut := n.raft.LeadershipTransfer()
	n.guard.release()
	go func() { // returns at the latest when Raft shuts down
		if err := fut.Error(); err != nil {
			// The leader stepped down on its failed log write before the
			// transfer ran: the others elect after their heartbeat timeout.
			n.log.Warn("leadership transfer did not run; this replica stepped down and the others elect one", "error", err)
			return
		}
		n.log.Info("leadership handed over because the data directory is full")
	}()
}

// lastStorageHandover is the last handover for /status, "" when none.
func (n *Node) lastStorageHandover() string {
	n.handover.mu.Lock()
	defer n.handover.mu.Unlock()
	return n.handover.last
}
