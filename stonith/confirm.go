package stonith

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/fenced-project/fenced/cluster/ledger"
)

// RouteConfirm serves `fenced confirm`.
const RouteConfirm = "POST /v1/confirm"

// EventFenceConfirmed is the reason of the Event recorded on a node when
// an operator confirms that it cannot write to an array.
const EventFenceConfirmed = "FenceConfirmedByOperator"

// ConfirmRequest is an operator's attestation, like `pcs stonith confirm`,
// that the node of an open fence cannot write to Array (it is gone for
// good, or its links are cut by hand), or with PoweredOff that the node is
// powered off (Array may then be empty: every array of the fence). fenced
// then counts that array's cut as verified for that fence only.
type ConfirmRequest struct {
	Cluster    string `json:"cluster"`
	Node       string `json:"node"`
	Array      string `json:"array,omitempty"`
	PoweredOff bool   `json:"poweredOff,omitempty"`
	Reason     string `json:"reason"`
}

// Confirm records an operator's confirmation in the ledger, logs it at
// WARN and records an Event on the node; the pipeline then takes the
// fence past that array. It is never done without an operator's call.
func (c *Controller) Confirm(ctx context.Context, operator string, req ConfirmRequest) (ActionResult, error) {
	if err := requireFields([2]string{"cluster", req.Cluster}, [2]string{"node", req.Node},
		[2]string{"reason", req.Reason}, [2]string{"operator", operator}); err != nil {
		return ActionResult{}, err
	}
	if req.Array == "" && !req.PoweredOff {
		return ActionResult{}, fmt.Errorf("%w: array is required unless the node is confirmed powered off", ErrBadRequest)
	}
	cl, err := c.cluster(req.Cluster)
	if err != nil {
		return ActionResult{}, err
	}
	if req.Array != "" {
		if _, ok := c.cfg.Arrays[req.Array]; !ok {
			return ActionResult{}, fmt.Errorf("%w: array %q is not configured", ErrBadRequest, truncateName(req.Array))
		}
	}
	l, ctx, cancel, err := c.leaderContext(ctx)
	if err != nil {
		return ActionResult{}, err
	}
	defer cancel()
	if g := c.groupVersion(); g < ledger.ConfirmVersion {
		return ActionResult{}, fmt.Errorf("%w: a confirmation needs ledger version %d, the group runs %d: upgrade every replica first",
			ErrLedgerVersion, ledger.ConfirmVersion, g)
	}
	f := c.readNode(cl.Name, req.Node).Fence
	if f == nil {
		return ActionResult{}, fmt.Errorf("%w: %s/%s has no open fence to confirm", ErrConflict, cl.Name, req.Node)
	}
	if err := c.commit(ctx, l, &ledger.ConfirmArray{Meta: c.meta(l), Cluster: cl.Name, Node: req.Node, FenceID: f.ID,
		Array: req.Array, PoweredOff: req.PoweredOff, Operator: operator, Reason: carried(ctx, req.Reason)}); err != nil {
		return ActionResult{}, fmt.Errorf("confirm fence %s of %s/%s: %w", f.ID, cl.Name, req.Node, err)
	}
	f = c.readNode(cl.Name, req.Node).Fence
	if f == nil || len(f.Confirmations) == 0 {
		return ActionResult{}, fmt.Errorf("%w: fence of %s/%s closed meanwhile", ErrConflict, cl.Name, req.Node)
	}
	cf := f.Confirmations[len(f.Confirmations)-1]
	arrays := req.Array
	if arrays == "" {
		arrays = "every array"
	}
	msg := fmt.Sprintf("fence %s of node %s: %s; fenced counts %s as cut for this fence only, without a read-back",
		f.ID, req.Node, cf.Text(), arrays)
	c.log.Warn("operator confirmed a fenced node cannot write to an array", carriedArgs(ctx, "cluster", cl.Name, "node", req.Node,
		"fenceID", f.ID, "array", req.Array, "poweredOff", req.PoweredOff, "operator", operator, "reason", req.Reason)...)
	c.nodeEvent(ctx, cl, req.Node, corev1.EventTypeWarning, EventFenceConfirmed,
		f.ID+"/"+strings.ReplaceAll(arrays, " ", "-"), msg)
	c.Enqueue(cl.Name, req.Node)
	return ActionResult{FenceID: f.ID, State: string(f.State), Message: msg}, nil
}

// confirmedArrays names the arrays an operator confirmed for the record.
func confirmedArrays(f *ledger.Fence, arrays []string) []string {
	var out []string
	for _, a := range arrays {
		if _, ok := f.Confirmed(a); ok {
			out = append(out, a)
		}
	}
	return out
}

// fenceArrayNames names the record's identity, plan and footprint arrays.
func fenceArrayNames(f *ledger.Fence) []string {
	var out []string
	for a := range f.Identities {
		out = append(out, a)
	}
	for _, p := range f.Plans {
		out = append(out, p.Array)
	}
	out = append(out, footprintArrays(f)...)
	slices.Sort(out)
	return slices.Compact(out)
}

// RouteAbandon serves `fenced unfence --abandon-array`.
const RouteAbandon = "POST /v1/abandon"

// EventFenceRestoreAbandoned is the reason of the Event recorded on a node
// when an operator abandons the restore of an array confirmed gone.
const EventFenceRestoreAbandoned = "FenceRestoreAbandoned"

// AbandonRequest is an operator's decision that the unfence of a node does
// not restore access on Array, an array the operator confirmed gone for
// the fence (Confirm): the unfence finishes without it, and Array is
// recorded as not restored. fenced never writes to Array for it.
type AbandonRequest struct {
	Cluster string `json:"cluster"`
	Node    string `json:"node"`
	Array   string `json:"array"`
	Reason  string `json:"reason"`
}

// Abandon records an operator's abandonment of an array's restore in the
// ledger (AbandonRestore), logs it at WARN and records an Event on the
// node; the unfence then finishes without that array. It is allowed only
// while the fence is in unfence-intent, for an array of its plan that an
// operator confirmed gone for this fence and whose restore was not read
// back.
func (c *Controller) Abandon(ctx context.Context, operator string, req AbandonRequest) (ActionResult, error) {
	if err := requireFields([2]string{"cluster", req.Cluster}, [2]string{"node", req.Node},
		[2]string{"array", req.Array}, [2]string{"reason", req.Reason}, [2]string{"operator", operator}); err != nil {
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
	if g := c.groupVersion(); g < ledger.AbandonVersion {
		return ActionResult{}, fmt.Errorf("%w: abandoning an array's restore needs ledger version %d, the group runs %d: upgrade every replica first",
			ErrLedgerVersion, ledger.AbandonVersion, g)
	}
	f := c.readNode(cl.Name, req.Node).Fence
	switch {
	case f == nil:
		return ActionResult{}, fmt.Errorf("%w: %s/%s has no open fence", ErrConflict, cl.Name, req.Node)
	case f.State != ledger.StateUnfenceIntent:
		return ActionResult{}, fmt.Errorf("%w: fence %s of %s/%s is %s: an array's restore is abandoned only while the unfence waits in %s",
			ErrConflict, f.ID, cl.Name, req.Node, f.State, ledger.StateUnfenceIntent)
	}
	if !slices.Contains(planArrays(f), req.Array) {
		return ActionResult{}, fmt.Errorf("%w: array %q is not in the plan of fence %s (%s)", ErrBadRequest,
			truncateName(req.Array), f.ID, strings.Join(planArrays(f), ", "))
	}
	if cf, ok := f.Confirmed(req.Array); !ok || cf.PoweredOff || cf.Array != req.Array {
		return ActionResult{}, fmt.Errorf("%w: array %s: no operator confirmed it gone for fence %s; run fenced confirm %s --cluster %s --array %s first, once you checked it",
			ErrConflict, req.Array, f.ID, req.Node, cl.Name, req.Array)
	}
	if r := f.Results[req.Array]; r != nil && r.RestoreVerified {
		return ActionResult{}, fmt.Errorf("%w: array %s: fence %s is already restored and read back there", ErrConflict, req.Array, f.ID)
	}
	if err := c.commit(ctx, l, &ledger.AbandonRestore{Meta: c.meta(l), Cluster: cl.Name, Node: req.Node, FenceID: f.ID,
		Array: req.Array, Operator: operator, Reason: carried(ctx, req.Reason)}); err != nil {
		return ActionResult{}, fmt.Errorf("abandon the restore of array %s for fence %s of %s/%s: %w", req.Array, f.ID, cl.Name, req.Node, err)
	}
	f = c.readNode(cl.Name, req.Node).Fence
	if f == nil {
		return ActionResult{}, fmt.Errorf("%w: fence of %s/%s closed meanwhile", ErrConflict, cl.Name, req.Node)
	}
	ab, _ := f.AbandonedRestore(req.Array)
	msg := fmt.Sprintf("fence %s of node %s: array %s %s; the unfence finishes without giving access back there",
		f.ID, req.Node, req.Array, ab.Text())
	c.log.Warn("operator abandoned the restore of an array confirmed gone: the node gets no access there from this unfence", carriedArgs(ctx, "cluster", cl.Name, "node", req.Node, "fenceID", f.ID, "array", req.Array, "operator", operator,
		"reason", req.Reason)...)
	c.nodeEvent(ctx, cl, req.Node, corev1.EventTypeWarning, EventFenceRestoreAbandoned, f.ID+"/"+req.Array, msg)
	c.Enqueue(cl.Name, req.Node)
	return ActionResult{FenceID: f.ID, State: string(f.State), Message: msg}, nil
}
