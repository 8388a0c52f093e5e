package cluster

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fenced-project/fenced/cluster/ledger"
)

// Apply writes a ledger command through Raft: the one write path. It returns
// the command's log index once the command is committed and applied under
// this replica's leadership, in this leader's term. It fails with
// ErrNotLeader when this replica is not the leader (nothing was written),
// with ErrLeadershipLost when leadership was lost in flight (outcome
// unknown), and with the ledger's refusal (ledger.ErrConflict,
// ledger.ErrStaleTerm, ...) wrapped with the index when Apply refused it.
// Leader-only callers pass their Leadership's Ctx (or a context derived from
// it) and compose the command with Leadership.Meta.
func (n *Node) Apply(ctx context.Context, cmd ledger.Command) (uint64, error) {
	if err := ctx.Err(); err != nil {
		n.metrics.failed("cancelled")
		return 0, fmt.Errorf("apply %s: %w", cmd.Type(), err)
	}
	buf, err := ledger.Encode(cmd)
	if err != nil {
		n.metrics.failed("invalid")
		return 0, fmt.Errorf("apply %s: %w", cmd.Type(), err)
	}
	if err := n.checkVersion(cmd); err != nil {
		n.metrics.failed("invalid")
		return 0, fmt.Errorf("apply %s: %w", cmd.Type(), err)
	}
	if n.raft.State() != raft.Leader {
		n.metrics.failed("not_leader")
		return 0, fmt.Errorf("apply %s: %w", cmd.Type(), ErrNotLeader)
	}
	f := n.raft.Apply(buf, n.timeout(ctx))
	if err := wait(ctx, f); err != nil {
		n.metrics.failed(reason(err))
		return 0, fmt.Errorf("apply %s: %w", cmd.Type(), err)
	}
	index := f.Index()
	if refused, ok := f.Response().(error); ok && refused != nil {
		n.metrics.failed("refused")
		return index, fmt.Errorf("apply %s at index %d: %w", cmd.Type(), index, refused)
	}
	return index, nil
}

func reason(err error) string {
	switch {
	case isErr(err, ErrLeadershipLost):
		return "leadership_lost"
	case isErr(err, ErrNotLeader):
		return "not_leader"
	case isErr(err, ErrTimeout), isErr(err, context.DeadlineExceeded):
		return "timeout"
	case isErr(err, context.Canceled):
		return "cancelled"
	}
	return "error"
}

// wait waits for a Raft future or the context. When the context ends first
// the operation's outcome is unknown; Raft still completes it.
func wait(ctx context.Context, f raft.Future) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return mapRaftErr(err)
	case <-ctx.Done():
		return fmt.Errorf("%w (outcome unknown)", ctx.Err())
	}
}

// VerifyLeader confirms with a quorum that this replica is still the leader.
// Call it right before a destructive step (an array change, a taint, a pod
// deletion); it fails with ErrNotLeader otherwise.
func (n *Node) VerifyLeader(ctx context.Context) error {
	if n.raft.State() != raft.Leader {
		return ErrNotLeader
	}
	if err := wait(ctx, n.raft.VerifyLeader()); err != nil {
		return fmt.Errorf("verify raft leadership: %w", err)
	}
	return nil
}

// ConsistentRead calls fn with the ledger once every entry committed before
// the call is applied, on the leader only: a Barrier entry is committed in
// this leader's term first, which proves the leadership at that point. fn
// runs under the ledger's read lock and must not keep references into it.
func (n *Node) ConsistentRead(ctx context.Context, fn func(s *ledger.State)) error {
	if n.raft.State() != raft.Leader {
		return ErrNotLeader
	}
	if err := wait(ctx, n.raft.Barrier(n.timeout(ctx))); err != nil {
		return fmt.Errorf("consistent read: %w", err)
	}
	n.fsm.Read(fn)
	return nil
}

// WaitApplied blocks until the local ledger has applied the command at
// index (from Apply): read-your-writes on any replica.
func (n *Node) WaitApplied(ctx context.Context, index uint64) error {
	if n.fsm.AppliedIndex() >= index {
		return nil
	}
	ticker := time.NewTicker(10 * time.Millisecond)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for ledger index %d (at %d): %w", index, n.fsm.AppliedIndex(), ctx.Err())
		case <-ticker.C:
			if n.fsm.AppliedIndex() >= index {
				return nil
			}
		}
	}
}

// LeaderInfo names the current leader.
type LeaderInfo struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raftAddr"`
	// HTTPAddr is the leader's HTTP base address from the configuration
	// ("" when the leader is not a configured peer).
	HTTPAddr string `json:"httpAddr,omitempty"`
}

// Leader returns the leader this replica knows of, if any.
func (n *Node) Leader() (LeaderInfo, bool) {
	addr, id := n.raft.LeaderWithID()
	if id == "" {
		return LeaderInfo{}, false
	}
	li := LeaderInfo{ID: string(id), RaftAddr: string(addr)}
	if li.ID == n.cfg.ID {
		li.HTTPAddr = n.cfg.HTTPAdvertise
	} else if p, ok := n.peer(li.ID); ok {
		li.HTTPAddr = p.HTTPAddr
	}
	return li, true
}

// IsLeader reports whether Raft considers this replica the leader now. A
// leader-only action should rather hold a Leadership (see Node.Leadership).
func (n *Node) IsLeader() bool {
	return n.raft.State() == raft.Leader
}
