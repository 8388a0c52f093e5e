package cluster

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	kwait "k8s.io/apimachinery/pkg/util/wait"

	"github.com/fenced-project/fenced/cluster/ledger"
)

// Leadership is this replica's view of its own leadership. A leader-only
// goroutine takes one from Node.Leadership, derives every context from Ctx,
// and writes with Meta() so the ledger refuses its writes once it is stale.
type Leadership struct {
	// Leader is true while this replica leads and has established its
	// leadership: it has applied every earlier entry and committed a
	// LeaderEpoch for Term.
	Leader bool
	// Replica is this replica's ID.
	Replica string
	// Term is the term of this leadership.
	Term uint64
	// Since is when this replica learned it was elected (its own clock).
	Since time.Time
	// EpochIndex is the log index of this leadership's LeaderEpoch.
	EpochIndex uint64
	// PeerArrayTimeout is the longest array request timeout another
	// replica advertised before this leadership was established (0 when
	// none answered): a previous leader's array requests may run that
	// long, even if this replica's own timeout is shorter.
	PeerArrayTimeout time.Duration
	// Ctx is cancelled when the leadership ends (or the replica closes).
	// When Leader is false it is already cancelled.
	Ctx context.Context

	lease time.Duration // LeaderLeaseTimeout plus LeaseMargin
	fsm   *ledger.FSM   // for the group ledger version
}

// Meta returns the ledger metadata for a command written under this
// leadership now, of the group ledger version: the newest every voter
// applies (ledger.Version when the ledger is not known).
func (l Leadership) Meta() ledger.Meta {
	v := ledger.Version
	if l.fsm != nil {
		l.fsm.Read(func(s *ledger.State) { v = s.GroupVersion() })
	}
	return ledger.Meta{V: v, Term: l.Term, At: time.Now().UTC(), By: l.Replica}
}

// SafeAt is when this leader may take a step that conflicts with what an
// earlier leader may still have been doing (an unfence after its fence, or
// the reverse): the previous leader stopped acting at most one lease (plus a
// margin) after this one was elected, and an array request it had started
// then ends within its array timeout: the longer of arrayTimeout (this
// replica's) and PeerArrayTimeout. SafeAt(0) is when the lease ran out.
func (l Leadership) SafeAt(arrayTimeout time.Duration) time.Time {
	if arrayTimeout > 0 {
		arrayTimeout = max(arrayTimeout, l.PeerArrayTimeout)
	}
	return l.Since.Add(l.lease + arrayTimeout)
}

// WaitOut blocks until SafeAt(arrayTimeout), and returns early with an error
// when ctx ends or the leadership is lost.
func (l Leadership) WaitOut(ctx context.Context, arrayTimeout time.Duration) error {
	if !l.Leader {
		return ErrNotLeader
	}
	d := time.Until(l.SafeAt(arrayTimeout))
	if d <= 0 {
		return l.Ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-l.Ctx.Done():
		return fmt.Errorf("wait out the previous leader: %w", ErrNotLeader)
	case <-ctx.Done():
		return fmt.Errorf("wait out the previous leader: %w", ctx.Err())
	}
}

// Leadership returns the current leadership and a channel closed at the next
// change. A typical consumer:
//
//	for {
//		l, changed := node.Leadership()
//		if l.Leader {
//			go runPipeline(l)
//		}
//		select {
//		case <-changed:
//		case <-ctx.Done():
//			return
//		}
//	}
func (n *Node) Leadership() (Leadership, <-chan struct{}) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.lead, n.changed
}

func (n *Node) notLeader() Leadership {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return Leadership{Replica: n.cfg.ID, Ctx: ctx}
}

func (n *Node) setLeadership(l Leadership) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.publishLocked(l)
}

func (n *Node) publishLocked(l Leadership) {
	if n.lead.Leader == l.Leader && n.lead.Term == l.Term {
		return
	}
	n.lead = l
	close(n.changed)
	n.changed = make(chan struct{})
}

// leaderLoop follows Raft's leadership notifications. On gaining leadership
// it starts establish under a new context; on losing it, it cancels that
// context, which every leader-only goroutine derives from.
func (n *Node) leaderLoop() {
	defer n.wg.Done()
	var cancel context.CancelFunc
	stop := func() {
		if cancel != nil {
			cancel()
			cancel = nil
		}
		n.setLeadership(n.notLeader())
	}
	for {
		select {
		case <-n.ctx.Done():
			stop()
			return
		case leader := <-n.notifyCh:
			stop()
			if !leader {
				n.log.Info("raft leadership lost")
				continue
			}
			cancel = n.startEstablish()
		}
	}
}

// startEstablish starts establish under a new leadership context and
// returns the function that ends it.
func (n *Node) startEstablish() context.CancelFunc {
	ctx, cancel := context.WithCancel(n.ctx)
	n.wg.Add(1)
	go n.establish(ctx, time.Now())
	return cancel
}

// establishBackoff is the wait between attempts to establish a leadership:
// 50ms, doubled after each failure up to 2s, each wait lengthened by up to a
// tenth at random. Steps is unbounded: only the leadership's end stops it.
func establishBackoff() kwait.Backoff {
	return kwait.Backoff{Duration: 50 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: math.MaxInt, Cap: 2 * time.Second}
}

// establish makes a new leadership usable: it waits until every earlier
// entry is applied, commits a LeaderEpoch that confirms the term, reconciles
// membership, publishes the leadership, and then keeps membership reconciled
// until the leadership ends.
func (n *Node) establish(ctx context.Context, since time.Time) {
	defer n.wg.Done()
	term := n.raft.CurrentTerm()
	n.log.Info("raft leadership gained; establishing", "term", term)
	var index uint64
	backoff := establishBackoff()
	for {
		if h := n.fsm.Halted(); h != nil {
			// A halted ledger is behind the group: it must not lead.
			n.log.Error("not establishing leadership: the ledger is halted", "term", term, "halt", h.String())
			if err := n.raft.LeadershipTransfer().Error(); err != nil {
				n.log.Error("hand leadership over from a halted ledger", "error", err)
			}
			return
		}
		var err error
		if err = n.raft.Barrier(n.cfg.Timings.ApplyTimeout).Error(); err == nil && n.fsm.Halted() != nil {
			continue
		}
		if err == nil {
			// The epoch is of the group ledger version; LedgerVersion
			// is the newest this build applies, as before version 3.
			epoch := &ledger.LeaderEpoch{
				Meta:          ledger.Meta{V: n.groupVersion(), Term: term, At: since.UTC(), By: n.cfg.ID},
				LedgerVersion: ledger.Version,
			}
			if index, err = n.Apply(ctx, epoch); err == nil {
				break
			}
		}
		if ctx.Err() != nil || errors.Is(err, ErrNotLeader) || errors.Is(err, ledger.ErrStaleTerm) {
			n.log.Info("raft leadership ended while establishing", "term", term, "error", err)
			return
		}
		delay := backoff.Step()
		n.log.Warn("establishing raft leadership failed; retrying", "term", term, "error", err, "retryIn", delay)
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
	}
	if err := n.reconcileMembers(ctx); err != nil {
		n.log.Warn("reconcile raft membership", "error", err)
	}
	if err := n.negotiateVersion(ctx, term); err != nil {
		n.log.Warn("negotiate the group ledger version", "error", err)
	}
	l := Leadership{Leader: true, Replica: n.cfg.ID, Term: term, Since: since, EpochIndex: index, Ctx: ctx,
		PeerArrayTimeout: n.peerArrayTimeout(), lease: n.cfg.Timings.LeaderLeaseTimeout + n.cfg.Timings.LeaseMargin, fsm: n.fsm}
	n.mu.Lock()
	if ctx.Err() == nil {
		n.publishLocked(l)
	}
	n.mu.Unlock()
	n.log.Info("raft leadership established", "term", term, "epochIndex", index,
		"duration", time.Since(since))

	ticker := time.NewTicker(n.cfg.Timings.ReconcileInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		case <-n.reconcile:
		}
		if err := n.reconcileMembers(ctx); err != nil && ctx.Err() == nil {
			n.log.Warn("reconcile raft membership", "error", err)
		}
		if err := n.negotiateVersion(ctx, term); err != nil && ctx.Err() == nil {
			n.log.Warn("negotiate the group ledger version", "error", err)
		}
	}
}
