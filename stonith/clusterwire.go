package stonith

import (
	"context"
	"time"

	"github.com/fenced-project/fenced/cluster"
	"github.com/fenced-project/fenced/cluster/ledger"
	"github.com/fenced-project/fenced/detector"
)

// clusterLeadership adapts a cluster.Node and one of its leaderships.
type clusterLeadership struct {
	n   *cluster.Node
	l   cluster.Leadership
	ctx context.Context
}

var _ Leadership = clusterLeadership{}

// ClusterLeadership adapts a leadership of a cluster.Node to Leadership.
func ClusterLeadership(n *cluster.Node, l cluster.Leadership) Leadership {
	return clusterLeadership{n: n, l: l, ctx: l.Ctx}
}

func (c clusterLeadership) Context() context.Context { return c.ctx }
func (c clusterLeadership) Term() uint64             { return c.l.Term }
func (c clusterLeadership) SafeAt() time.Time        { return c.l.SafeAt(0) }

func (c clusterLeadership) PeerArrayTimeout() time.Duration { return c.l.PeerArrayTimeout }

func (c clusterLeadership) VerifyLeader(ctx context.Context) error {
	if err := c.ctx.Err(); err != nil {
		return cluster.ErrNotLeader
	}
	return c.n.VerifyLeader(ctx)
}

func (c clusterLeadership) Apply(ctx context.Context, cmd ledger.Command) error {
	_, err := c.n.Apply(ctx, cmd)
	return err
}

// FollowCluster runs the pipeline whenever the node leads, until ctx ends:
// the daemon's leadership loop for the controller.
func (c *Controller) FollowCluster(ctx context.Context, n *cluster.Node) {
	for {
		l, changed := n.Leadership()
		if l.Leader {
			// The pipeline ends with the leadership or with ctx.
			lctx, cancel := context.WithCancel(l.Ctx)
			stop := context.AfterFunc(ctx, cancel)
			if err := c.Lead(clusterLeadership{n: n, l: l, ctx: lctx}); err != nil {
				c.log.Error("lead the fencing pipeline", "term", l.Term, "error", err)
			}
			stop()
			cancel()
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}

// DetectorStatusFunc adapts a function to DetectorStatus, for wiring a
// detector that is built after the controller (it publishes to it).
type DetectorStatusFunc func() detector.Status

// Status implements DetectorStatus.
func (f DetectorStatusFunc) Status() detector.Status { return f() }
