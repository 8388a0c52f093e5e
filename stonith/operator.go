package stonith

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/fenced-project/fenced/cluster/ledger"
)

// FenceRequest asks to fence a node now (`fenced fence NODE --cluster C
// --reason R`).
type FenceRequest struct {
	Cluster string `json:"cluster"`
	Node    string `json:"node"`
	Reason  string `json:"reason"`
}

// UnfenceRequest asks to restore a fenced node (`fenced unfence NODE
// --cluster C [--force]`). Without Force the node must have rebooted since
// the fence (its boot ID changed), none of its pre-fence pods may still
// run there and no volume of the node may still wait for a detach; Force
// skips these checks. A forced unfence still reads the node and its pods
// from the API server, and is refused when it cannot, unless Unverified
// says to go ahead anyway. The ledger records both (FenceStep.Forced,
// FenceStep.Unverified).
type UnfenceRequest struct {
	Cluster    string `json:"cluster"`
	Node       string `json:"node"`
	Reason     string `json:"reason"`
	Force      bool   `json:"force,omitempty"`
	Unverified bool   `json:"unverified,omitempty"`
}

// PauseRequest pauses or resumes fencing for one cluster, or for all when
// Cluster is empty. A pause adds a holder of the caller (the same caller
// pausing the same scope again updates its reason). A resume ends the
// caller's own pauses (of Cluster when given), or the pause ID names, or
// every pause HeldBy holds, or with All every pause (of Cluster when
// given).
type PauseRequest struct {
	Cluster string `json:"cluster,omitempty"`
	Reason  string `json:"reason"`
	// ID, HeldBy and All select the pauses a resume ends (at most one).
	ID     string `json:"id,omitempty"`
	HeldBy string `json:"heldBy,omitempty"`
	All    bool   `json:"all,omitempty"`
}

// ActionResult is the answer to an operator action.
type ActionResult struct {
	// FenceID and State describe the node's record after the action.
	FenceID string `json:"fenceID,omitempty"`
	State   string `json:"state,omitempty"`
	Message string `json:"message"`
	// DryRun is set when the cluster is in dry-run: what a fence would do.
	DryRun *DryRunReport `json:"dryRun,omitempty"`
	// Paused is set by pause and resume: every pause still in effect
	// (empty when fencing runs for every cluster).
	Paused *[]PauseHolder `json:"stillPaused,omitempty"`
}

// leaderContext returns the current leadership and a context that ends
// with ctx or the leadership.
func (c *Controller) leaderContext(ctx context.Context) (Leadership, context.Context, context.CancelFunc, error) {
	l := c.leadership()
	if l == nil {
		return nil, nil, nil, ErrNotLeader
	}
	cctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(l.Context(), cancel)
	return l, cctx, func() { stop(); cancel() }, nil
}

func (c *Controller) cluster(name string) (*clusterRuntime, error) {
	cl := c.clusters[name]
	if cl == nil {
		return nil, fmt.Errorf("%w: %q", ErrUnknownCluster, name)
	}
	return cl, nil
}

func requireFields(fields ...[2]string) error {
	for _, f := range fields {
		if f[1] == "" {
			return fmt.Errorf("%w: %s is required", ErrBadRequest, f[0])
		}
	}
	return nil
}

// Fence opens an operator fence of a node; the pipeline then runs it like
// any other. It is allowed while fencing is paused (the operator decides),
// but not when the API server cannot be reached or the node's identities
// were never learned. In dry-run it reports what it would do.
func (c *Controller) Fence(ctx context.Context, operator string, req FenceRequest) (ActionResult, error) {
	if err := requireFields([2]string{"cluster", req.Cluster}, [2]string{"node", req.Node},
		[2]string{"reason", req.Reason}, [2]string{"operator", operator}); err != nil {
		return ActionResult{}, err
	}
	cl, err := c.cluster(req.Cluster)
	if err != nil {
		return ActionResult{}, err
	}
	l, ctx, cancel, err := c.leaderContext(ctx)
	if err != nil {
		return ActionResult{}, err
	}
	defer cancel()
	v := c.readNode(cl.Name, req.Node)
	if f := v.Fence; f != nil {
		if f.Kind == ledger.KindFence {
			return ActionResult{FenceID: f.ID, State: string(f.State), Message: "node already has fence " + f.ID}, nil
		}
		return ActionResult{}, fmt.Errorf("%w: fence %s of %s/%s is recovering (%s)", ErrConflict, f.ID, cl.Name, req.Node, f.State)
	}
	if !v.IdentitiesKnown {
		return ActionResult{}, fmt.Errorf("%w: the identities of %s/%s on the arrays were never learned, so a fence could not be proven",
			ErrRefused, cl.Name, req.Node)
	}
	kctx, kcancel := context.WithTimeout(ctx, c.cfg.KubeTimeout)
	err = cl.Kube.CheckAPIServer(kctx)
	kcancel()
	if err != nil {
		return ActionResult{}, fmt.Errorf("%w: cannot reach the API server of %s: %w", ErrRefused, cl.Name, err)
	}
	d, err := c.decide(ctx, cl, req.Node, v)
	if err != nil {
		return ActionResult{}, err
	}
	if len(d.Gaps) > 0 {
		return ActionResult{}, fmt.Errorf("%w: %s/%s is unprotected, so a fence could not cut all its storage and its pods would be deleted while it may still write: %s",
			ErrRefused, cl.Name, req.Node, gapsText(d.Gaps))
	}
	if cl.DryRun {
		rep := &DryRunReport{DecidedAt: c.clk.Now().UTC(), Verdict: "operator: " + req.Reason, Plans: d.Plans,
			BootID: d.BootID, WouldDelete: d.Evict,
			WouldTaint: []string{TaintFenced + "=<fence id>:NoSchedule", TaintOutOfService + "=" + OutOfServiceValue + ":NoExecute"}}
		if len(d.Missing) > 0 {
			rep.Unplanned = d.Missing
		}
		return ActionResult{Message: "dry-run: nothing was written", DryRun: rep}, nil
	}
	if err := c.verifyLeader(ctx, l); err != nil {
		return ActionResult{}, err
	}
	err = c.commit(ctx, l, &ledger.OpenFence{Meta: c.meta(l), Cluster: cl.Name, Node: req.Node,
		Origin: ledger.OriginOperator, Operator: operator, Reason: carried(ctx, req.Reason), BootID: d.BootID,
		PodUIDs: d.PodUIDs, Plans: d.plans.list, Footprint: d.Footprint, FootprintRecorded: true})
	if err != nil {
		return ActionResult{}, fmt.Errorf("open fence of %s/%s: %w", cl.Name, req.Node, err)
	}
	c.log.Warn("operator fence opened", carriedArgs(ctx, "cluster", cl.Name, "node", req.Node, "operator", operator, "reason", req.Reason)...)
	c.Enqueue(cl.Name, req.Node)
	res := ActionResult{Message: "fence opened"}
	if f := c.readNode(cl.Name, req.Node).Fence; f != nil {
		res.FenceID, res.State = f.ID, string(f.State)
	}
	return res, nil
}

// Unfence starts the recovery of a fenced node (or abandons a fence that
// has not changed any array yet).
func (c *Controller) Unfence(ctx context.Context, operator string, req UnfenceRequest) (ActionResult, error) {
	if err := requireFields([2]string{"cluster", req.Cluster}, [2]string{"node", req.Node},
		[2]string{"reason", req.Reason}, [2]string{"operator", operator}); err != nil {
		return ActionResult{}, err
	}
	if req.Unverified && !req.Force {
		return ActionResult{}, fmt.Errorf("%w: unverified is given only with force", ErrBadRequest)
	}
	cl, err := c.cluster(req.Cluster)
	if err != nil {
		return ActionResult{}, err
	}
	if cl.DryRun {
		return ActionResult{}, fmt.Errorf("%w: cluster %s is in dry-run; nothing is written", ErrRefused, cl.Name)
	}
	l, ctx, cancel, err := c.leaderContext(ctx)
	if err != nil {
		return ActionResult{}, err
	}
	defer cancel()
	f := c.readNode(cl.Name, req.Node).Fence
	if f == nil {
		return ActionResult{}, fmt.Errorf("%w: %s/%s has no open fence", ErrConflict, cl.Name, req.Node)
	}
	if f.Kind == ledger.KindUnfence {
		return ActionResult{FenceID: f.ID, State: string(f.State), Message: "node is already being unfenced"}, nil
	}
	step := &ledger.FenceStep{Meta: c.meta(l), Cluster: cl.Name, Node: req.Node, FenceID: f.ID, From: f.State,
		To: ledger.StateUnfenceIntent, Operator: operator, Note: carried(ctx, req.Reason)}
	if f.State == ledger.StateIntent {
		step.To = ledger.StateAborted
	} else {
		kctx, kcancel := context.WithTimeout(ctx, c.cfg.KubeTimeout)
		n, nerr := cl.Kube.GetNode(kctx, req.Node)
		pods, perr := cl.Kube.PodsOnNode(kctx, req.Node)
		var detaching []string
		if !req.Force && perr == nil {
			detaching, perr = cl.Kube.PendingDetaches(kctx, req.Node)
		}
		kcancel()
		if nerr == nil {
			step.BootID = n.Status.NodeInfo.BootID
		}
		if !req.Force {
			if err := errors.Join(nerr, perr); err != nil {
				return ActionResult{}, fmt.Errorf("%w: cannot check that %s rebooted: %w (use --force to unfence anyway)",
					ErrRefused, req.Node, err)
			}
			if f.BootID == "" || step.BootID == "" || step.BootID == f.BootID {
				return ActionResult{}, fmt.Errorf("%w: %s has not rebooted since fence %s (boot ID %q unchanged); reboot it, or use --force",
					ErrRefused, req.Node, f.ID, f.BootID)
			}
			if old := stalePods(f.PodUIDs, pods); len(old) > 0 {
				return ActionResult{}, fmt.Errorf("%w: pods from before fence %s still run on %s: %v (use --force to unfence anyway)",
					ErrRefused, f.ID, req.Node, old)
			}
			if len(detaching) > 0 {
				return ActionResult{}, fmt.Errorf("%w: volumes of %s still wait for a detach: %s; fenced unfences it by itself once they are detached (or use --force)",
					ErrRefused, req.Node, strings.Join(detaching, ", "))
			}
		} else {
			if err := errors.Join(nerr, perr); err != nil && !req.Unverified {
				return ActionResult{}, fmt.Errorf("%w: cannot read %s and its pods from the API server: %w; a forced unfence reads them first (use --unverified as well to unfence without)",
					ErrRefused, req.Node, err)
			}
			step.Note = carried(ctx, "forced: "+req.Reason)
			step.Forced, step.Unverified = true, req.Unverified
		}
		if scope, err := c.restoreScope(cl, f); err == nil {
			step.Restore = scope
		} else if !req.Force {
			return ActionResult{}, fmt.Errorf("%w: %w (use --force to unfence anyway, giving back no volume's access)", ErrRefused, err)
		}
	}
	if err := c.commit(ctx, l, step); err != nil {
		return ActionResult{}, fmt.Errorf("unfence %s/%s: %w", cl.Name, req.Node, err)
	}
	c.log.Warn("operator unfence", carriedArgs(ctx, "cluster", cl.Name, "node", req.Node, "fenceID", f.ID, "operator", operator,
		"force", req.Force, "unverified", req.Unverified, "reason", req.Reason)...)
	c.Enqueue(cl.Name, req.Node)
	return ActionResult{FenceID: f.ID, State: string(step.To), Message: "recovery started"}, nil
}
