package stonith

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/cluster/ledger"
)

// identities returns the view's identities for coverage.
func (v nodeView) identities() identityView {
	return identityView{Identities: v.Identities, Known: v.IdentitiesKnown, NotFound: v.NotFound, Ambiguous: v.Ambiguous}
}

// learnedIdentity returns a copy of the node's identity on the array as
// the ledger has it learned now, nil when none is.
func (c *Controller) learnedIdentity(cluster, node, array string) *arrayclients.Identity {
	var out *arrayclients.Identity
	c.cfg.Ledger.Read(func(s *ledger.State) {
		if n := s.Node(cluster, node); n != nil {
			if id, ok := n.Identities[array]; ok {
				id.Keys = append([]string(nil), id.Keys...)
				out = &id
			}
		}
	})
	return out
}

// nodeView is a copy of what the ledger holds about one node.
type nodeView struct {
	// Fence is the open record (a deep copy), nil when none or when the
	// view was read without it (readNodeIdentities).
	Fence *ledger.Fence
	// Fenced is whether the node has an open record, read with it or not.
	Fenced bool
	// Identities were learned while the node was healthy; IdentitiesKnown
	// is false when they never were.
	Identities      map[string]arrayclients.Identity
	IdentitiesKnown bool
	// NotFound and Ambiguous name the arrays where no identity, or more
	// than one candidate, was found (with what was looked for).
	NotFound  map[string]string
	Ambiguous map[string]string
	BootID    string
	// Paused reports the global or cluster pause flag.
	Paused bool
}

func (c *Controller) readNode(cluster, node string) nodeView {
	return c.readNodeView(cluster, node, true)
}

// readNodeIdentities is readNode without a copy of the open record (only
// whether there is one: Fenced), for callers that need the identities:
// WitnessArrays runs for every probe of every late node, and copying the
// node's record for it was a fifth of a follower's CPU in a storm.
func (c *Controller) readNodeIdentities(cluster, node string) nodeView {
	return c.readNodeView(cluster, node, false)
}

func (c *Controller) readNodeView(cluster, node string, withFence bool) nodeView {
	var v nodeView
	var raw []byte
	c.cfg.Ledger.Read(func(s *ledger.State) {
		v.Paused = s.Paused(cluster)
		n := s.Node(cluster, node)
		if n == nil {
			return
		}
		v.Identities = maps.Clone(n.Identities)
		v.IdentitiesKnown = !n.IdentitiesAt.IsZero()
		v.NotFound, v.Ambiguous = maps.Clone(n.NotFound), maps.Clone(n.Ambiguous)
		v.BootID = n.BootID
		v.Fenced = n.Fence != nil
		if n.Fence != nil && withFence {
			raw, _ = json.Marshal(n.Fence) // a Fence holds only JSON values
		}
	})
	if raw != nil {
		v.Fence = &ledger.Fence{}
		if err := json.Unmarshal(raw, v.Fence); err != nil {
			// The copy of a value just encoded cannot fail to decode.
			panic(fmt.Sprintf("stonith: copy fence record: %v", err))
		}
	}
	return v
}

// meta composes a command's metadata in the group ledger version: the
// newest version every voter applies, committed in the ledger.
func (c *Controller) meta(l Leadership) ledger.Meta {
	return ledger.Meta{V: c.groupVersion(), Term: l.Term(), At: c.clk.Now().UTC(), By: c.cfg.ReplicaID}
}

// groupVersion is the group ledger version the ledger holds.
func (c *Controller) groupVersion() int {
	v := ledger.LegacyVersion
	c.cfg.Ledger.Read(func(s *ledger.State) { v = s.GroupVersion() })
	return v
}

// commit writes one command through Raft in this leadership's term.
func (c *Controller) commit(ctx context.Context, l Leadership, cmd ledger.Command) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("commit %s: %w", cmd.Type(), err)
	}
	if err := l.Apply(ctx, cmd); err != nil {
		return fmt.Errorf("commit %s: %w", cmd.Type(), err)
	}
	return nil
}

// step commits a move of the record from its current state to to.
func (c *Controller) step(ctx context.Context, l Leadership, f *ledger.Fence, to ledger.FenceState, note string) error {
	start := c.clk.Now()
	err := c.commit(ctx, l, &ledger.FenceStep{Meta: c.meta(l), Cluster: f.Cluster, Node: f.Node, FenceID: f.ID,
		From: f.State, To: to, Note: note})
	if err != nil {
		return fmt.Errorf("fence %s of %s/%s: %s -> %s: %w", f.ID, f.Cluster, f.Node, f.State, to, err)
	}
	c.log.Info("fence step", "cluster", f.Cluster, "node", f.Node, "fenceID", f.ID, "from", string(f.State),
		"to", string(to), "note", note)
	c.metrics.commitDuration(f.Cluster, string(to), c.clk.Since(start))
	return nil
}

// stepFenced commits the step to fenced with what the node's taints were
// before the fence (read once per record, before fenced taints the node):
// an out-of-service taint an administrator put there stays on unfence.
func (c *Controller) stepFenced(ctx context.Context, l Leadership, cl *clusterRuntime, f *ledger.Fence) error {
	before := f.OutOfServiceBefore
	if before == nil {
		kctx, cancel := context.WithTimeout(ctx, c.cfg.KubeTimeout)
		n, err := cl.Kube.GetNode(kctx, f.Node)
		cancel()
		if err != nil {
			return fmt.Errorf("fence %s of %s/%s: read the node's taints before tainting it: %w", f.ID, f.Cluster, f.Node, err)
		}
		had := foreignOutOfService(n, f.ID)
		before = &had
	}
	start := c.clk.Now()
	var verified []string
	for _, p := range f.Plans {
		if r := f.Results[p.Array]; r != nil && r.Verified {
			verified = append(verified, p.Array)
		}
	}
	if len(verified) == 0 {
		verified = []string{"no array"}
	}
	note := "verified fenced on " + strings.Join(verified, ", ")
	for _, cf := range f.Confirmations {
		note += "; " + cf.Text()
	}
	err := c.commit(ctx, l, &ledger.FenceStep{Meta: c.meta(l), Cluster: f.Cluster, Node: f.Node, FenceID: f.ID,
		From: f.State, To: ledger.StateFenced, Note: note, OutOfServiceBefore: before})
	if err != nil {
		return fmt.Errorf("fence %s of %s/%s: %s -> %s: %w", f.ID, f.Cluster, f.Node, f.State, ledger.StateFenced, err)
	}
	c.log.Info("fence step", "cluster", f.Cluster, "node", f.Node, "fenceID", f.ID, "from", string(f.State),
		"to", string(ledger.StateFenced), "note", note, "outOfServiceBefore", *before)
	if confirmed := confirmedArrays(f, fenceArrayNames(f)); len(confirmed) > 0 {
		c.log.Warn("fence goes on past arrays an operator confirmed the node cannot write to", "cluster", f.Cluster,
			"node", f.Node, "fenceID", f.ID, "arrays", confirmed, "note", note)
	}
	c.metrics.commitDuration(f.Cluster, string(ledger.StateFenced), c.clk.Since(start))
	return nil
}

// record commits the outcome of one array operation.
func (c *Controller) record(ctx context.Context, l Leadership, f *ledger.Fence, array string, op ledger.ArrayOp,
	opErr error, v *arrayclients.Verification) error {
	cmd := &ledger.RecordArrayResult{Meta: c.meta(l), Cluster: f.Cluster, Node: f.Node, FenceID: f.ID,
		Expect: f.State, Array: array, Op: op, OK: opErr == nil, Verification: v}
	if opErr != nil {
		cmd.Error = truncate(opErr.Error(), 1000)
		cmd.Verification = nil
	}
	if err := c.commit(ctx, l, cmd); err != nil {
		return fmt.Errorf("fence %s: record %s on %s: %w", f.ID, op, array, err)
	}
	return nil
}

// verifyLeader runs before every destructive step: the leadership context
// must be live and a quorum must confirm this replica still leads.
func (c *Controller) verifyLeader(ctx context.Context, l Leadership) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("verify leadership: %w", err)
	}
	if err := l.VerifyLeader(ctx); err != nil {
		return fmt.Errorf("verify leadership: %w", err)
	}
	return nil
}

// direction tells whether a state belongs to fencing or to recovery.
type direction int

const (
	dirFence direction = iota
	dirUnfence
)

func stepDirection(s ledger.Step) direction {
	switch s.To {
	case ledger.StateUnfenceIntent, ledger.StateRestored, ledger.StateUntainted, ledger.StateClosed:
		return dirUnfence
	case ledger.StateFailed:
		if s.From == ledger.StateUnfenceIntent {
			return dirUnfence
		}
	}
	return dirFence
}

// conflictWait returns how long to wait before this leadership may take a
// step in direction d on the record: when the last step a previous leader
// wrote went the other way, that leader may still have writes in flight
// until its lease ran out plus one array request timeout: its own, as it
// advertised it, when that is longer than this replica's.
func (c *Controller) conflictWait(l Leadership, f *ledger.Fence, d direction) time.Duration {
	for i := len(f.Steps) - 1; i >= 0; i-- {
		s := f.Steps[i]
		if s.Term >= l.Term() {
			continue
		}
		if stepDirection(s) == d {
			return 0
		}
		return l.SafeAt().Add(max(c.cfg.ArrayTimeout, l.PeerArrayTimeout())).Sub(c.clk.Now())
	}
	return 0
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
