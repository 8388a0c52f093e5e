package stonith

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fenced-project/fenced/cluster/ledger"
	"github.com/fenced-project/fenced/kube"
)

// fenced as a remediator of medik8s NodeHealthCheck (NHC).
//
// NHC (node-healthcheck-operator v0.12.0) creates, for an unhealthy node,
// a CR of the kind its template names minus "Template"
// (internal/controller/resources/manager.go generateRemediationCR): here a
// FencedRemediation. To fenced such a CR is a verdict on the node, as the
// detector's Failed verdict is: the fence is opened under every rule that
// holds for a verdict (pause, dry-run, storm guard, doubt about this
// replica, an unprotected node is never fenced), with origin "verdict" in
// the ledger and a reason naming the CR. fenced reports in the CR's
// status.conditions the types NHC reads (medik8s/common pkg/conditions:
// Processing, Succeeded) and its own domain condition StorageFenced with
// the read-back evidence, in the order Fence Agents Remediation uses
// (Processing=True, domain Unknown, Succeeded Unknown; then domain True;
// then Succeeded). Succeeded=False makes NHC go on to its next remediator
// at once (nodehealthcheck_controller.go, the "remediation failed" path).
//
// fenced's finalizer keeps the CR until the node's fence is closed: NHC
// deletes the CR once the node is healthy again, and the fence is unfenced
// only after a verified reboot (invariant 5), never because NHC timed the
// step out (its remediation.medik8s.io/nhc-timed-out annotation only
// means NHC tried the next remediator as well).

// Condition types and reasons fenced sets on a FencedRemediation.
const (
	// CondProcessing and CondSucceeded are NHC's types
	// (medik8s/common pkg/conditions ProcessingType, SucceededType).
	CondProcessing = "Processing"
	CondSucceeded  = "Succeeded"
	// CondStorageFenced is fenced's domain condition: True once every
	// array's cut was read back.
	CondStorageFenced = "StorageFenced"

	ReasonStarted         = "Started"
	ReasonWaiting         = "Waiting"
	ReasonFencing         = "Fencing"
	ReasonReadBack        = "ReadBack"
	ReasonEvicting        = "Evicting"
	ReasonFenced          = "Fenced"
	ReasonUnfenced        = "Unfenced"
	ReasonNodeUnprotected = "NodeUnprotected"
	ReasonArrayNotFenced  = "ArrayNotFenced"
	ReasonNotFenceable    = "NotFenceable"
	ReasonDryRun          = "DryRun"
	ReasonAborted         = "Aborted"
	ReasonOtherFence      = "OtherFence"
)

// RemediationSource is one cluster's FencedRemediations.
// *kube.Remediations implements it.
type RemediationSource interface {
	// Synced reports whether every FencedRemediation has been listed.
	Synced() bool
	// ForNode returns the node's FencedRemediations, oldest first.
	ForNode(node string) []kube.Remediation
	// Nodes names every node with a FencedRemediation.
	Nodes() []string
	SetStatus(ctx context.Context, r kube.Remediation, st kube.RemediationStatus) error
	SetFinalizer(ctx context.Context, r kube.Remediation, on bool) error
}

var _ RemediationSource = (*kube.Remediations)(nil)

// NodeLeaseSource is one cluster's medik8s node Leases (coordination with
// NodeHealthCheck and the other medik8s remediators). *kube.NodeLeases
// implements it.
type NodeLeaseSource interface {
	// Acquire takes or renews the node's Lease; held is false, with the
	// holder, while another holder's Lease is valid.
	Acquire(ctx context.Context, node string, duration time.Duration) (held bool, holder string, err error)
	// Release gives the node's Lease back if fenced holds it.
	Release(ctx context.Context, node string) error
	Namespace() string
}

var _ NodeLeaseSource = (*kube.NodeLeases)(nil)

// nodeLeaseDuration is how long fenced takes a node's Lease for; it is
// renewed on every reconcile of the fence once half of it is gone, and a
// fence is reconciled at least every Resync.
func (c *Controller) nodeLeaseDuration() time.Duration {
	return max(2*time.Minute, 6*c.cfg.Resync)
}

// isRemediationFence reports whether a fence was opened on a
// FencedRemediation (its NodeHealthCheck holds the node's Lease).
func isRemediationFence(f *ledger.Fence) bool {
	return strings.HasPrefix(f.Reason, remediationReasonPrefix)
}

// takeNodeLease takes the node's medik8s Lease before fenced fences it on
// its own verdict; "" when taken (or not configured), else why not.
func (c *Controller) takeNodeLease(ctx context.Context, cl *clusterRuntime, node string) (string, error) {
	if cl.NodeLeases == nil {
		return "", nil
	}
	held, holder, err := cl.NodeLeases.Acquire(ctx, node, c.nodeLeaseDuration())
	if err != nil {
		return "", err
	}
	if !held {
		return fmt.Sprintf("%s holds the node's Lease %s/%s: another medik8s remediator works on the node; fenced waits until it is given back or lapses",
			holder, cl.NodeLeases.Namespace(), kube.LeaseName(node)), nil
	}
	return "", nil
}

// syncNodeLease keeps the node's Lease while fenced's own fence of it is
// open, and gives it back once none is.
func (c *Controller) syncNodeLease(ctx context.Context, cl *clusterRuntime, node string) error {
	if cl.NodeLeases == nil || cl.DryRun {
		return nil
	}
	v := c.readNode(cl.Name, node)
	if v.Fence == nil {
		return cl.NodeLeases.Release(ctx, node)
	}
	if isRemediationFence(v.Fence) {
		return nil
	}
	held, holder, err := cl.NodeLeases.Acquire(ctx, node, c.nodeLeaseDuration())
	if err == nil && !held {
		c.log.Warn("another holder took the node's Lease while fenced's fence is open", "cluster", cl.Name, "node", node,
			"fenceID", v.Fence.ID, "holder", holder)
	}
	return err
}

// RemediationChanged is told that a FencedRemediation of the node changed.
func (c *Controller) RemediationChanged(cluster, node string) {
	c.Enqueue(cluster, node)
}

// remediationAsks returns the request a live FencedRemediation of the node
// makes: one not being deleted that no fence answered yet, or whose fence
// is the given open one. ok is false when there is none.
func (c *Controller) remediationAsks(cl *clusterRuntime, node, openFence string) (kube.Remediation, bool) {
	if cl.Remediations == nil || !cl.Remediations.Synced() {
		return kube.Remediation{}, false
	}
	for _, r := range cl.Remediations.ForNode(node) {
		if r.Deleting {
			continue
		}
		if r.Status.FenceID == "" || (openFence != "" && r.Status.FenceID == openFence) {
			return r, true
		}
	}
	return kube.Remediation{}, false
}

// remediationReasonPrefix begins the reason of a fence opened on a
// FencedRemediation.
const remediationReasonPrefix = "NodeHealthCheck remediation: "

// remediationReason is the reason recorded in the ledger for a fence
// opened on a FencedRemediation: its origin.
func remediationReason(r kube.Remediation) string {
	s := remediationReasonPrefix + "FencedRemediation " + r.Key()
	if r.Template != "" {
		s += " from template " + r.Template
	}
	if len(r.Owners) > 0 {
		s += " of " + strings.Join(r.Owners, ", ")
	}
	if r.Reason != "" {
		s += ": " + r.Reason
	}
	return s
}

// remediationHoldsRecovery reports the FencedRemediation an evicted
// fence's recovery waits for: NHC has not deleted it yet (NHC deletes it
// once the node is healthy again, after its healthyDelay). The unfence
// then runs with its own checks (invariant 5) and the finalizer is
// removed once the fence is closed.
func (c *Controller) remediationHoldsRecovery(cl *clusterRuntime, f *ledger.Fence) (kube.Remediation, bool) {
	if cl.Remediations == nil || !cl.Remediations.Synced() {
		return kube.Remediation{}, false
	}
	for _, r := range cl.Remediations.ForNode(f.Node) {
		if r.Status.FenceID == f.ID && !r.Deleting {
			return r, true
		}
	}
	return kube.Remediation{}, false
}

// syncRemediations brings the node's FencedRemediations up to date on the
// leader: fenced's finalizer on each live one, the status from the ledger
// and this leader's report, and the finalizer removed from a deleted one
// whose fence is closed (or that no fence answered).
func (c *Controller) syncRemediations(ctx context.Context, cl *clusterRuntime, node string) error {
	if cl.Remediations == nil || !cl.Remediations.Synced() {
		return nil
	}
	rems := cl.Remediations.ForNode(node)
	if len(rems) == 0 {
		return nil
	}
	v := c.readNode(cl.Name, node)
	rep, _ := c.reportOf(cl.Name, node)
	gaps := c.nodeGaps(cl.Name, node)
	var errs []error
	for _, r := range rems {
		in := remediationInput{Remediation: r, Open: v.Fence, DryRun: cl.DryRun, Report: rep, Gaps: gaps,
			IdentitiesKnown: v.IdentitiesKnown}
		if id := r.Status.FenceID; id != "" && (v.Fence == nil || v.Fence.ID != id) {
			c.cfg.Ledger.Read(func(s *ledger.State) {
				if f := s.Fence(cl.Name, node, id); f != nil {
					cp := *f
					in.Bound = &cp
				}
			})
		}
		// The API server keeps times to the second.
		st := remediationStatus(in, metav1.NewTime(c.clk.Now().Truncate(time.Second)))
		fenceOpen := in.boundOpen()
		if r.Deleting && !fenceOpen {
			if r.Finalized {
				if err := cl.Remediations.SetFinalizer(ctx, r, false); err != nil && !errors.Is(err, kube.ErrRemediationGone) {
					errs = append(errs, err)
				} else {
					c.log.Info("NodeHealthCheck remediation released", "cluster", cl.Name, "node", node,
						"remediation", r.Key(), "fenceID", st.FenceID)
				}
			}
			continue
		}
		if !r.Deleting && !r.Finalized && !cl.DryRun { // dry-run writes only the report
			if err := cl.Remediations.SetFinalizer(ctx, r, true); err != nil && !errors.Is(err, kube.ErrRemediationGone) {
				errs = append(errs, err)
				continue
			}
		}
		if !sameStatus(st, r.Status) {
			if err := cl.Remediations.SetStatus(ctx, r, st); err != nil && !errors.Is(err, kube.ErrRemediationGone) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// nodeGaps returns the node's gaps as this replica last saw them.
func (c *Controller) nodeGaps(cluster, node string) []VolumeGap {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := c.protection[nodeKey(cluster, node)]; st != nil {
		return slices.Clone(st.Gaps)
	}
	return nil
}

// remediationInput is what a FencedRemediation's status is computed from.
type remediationInput struct {
	Remediation kube.Remediation
	// Open is the node's open fence, nil when none; Bound the closed
	// fence the CR names, when it is not the open one.
	Open, Bound     *ledger.Fence
	DryRun          bool
	IdentitiesKnown bool
	Report          nodeReport
	Gaps            []VolumeGap
}

// fence returns the fence that answers the CR: the one it names, else
// the node's open fence (a fence on fenced's own verdict, or one opened
// for the CR before its status was written).
func (in remediationInput) fence() *ledger.Fence {
	id := in.Remediation.Status.FenceID
	switch {
	case in.Open != nil && (id == "" || in.Open.ID == id) && in.Open.Kind == ledger.KindFence:
		return in.Open
	case in.Open != nil && in.Open.ID == id:
		return in.Open
	case in.Bound != nil:
		return in.Bound
	}
	return nil
}

// boundOpen reports whether the CR's fence is still open.
func (in remediationInput) boundOpen() bool {
	f := in.fence()
	return f != nil && in.Open != nil && f.ID == in.Open.ID
}

// remediationStatus computes a FencedRemediation's status. Conditions
// keep their transition time while their status stays.
func remediationStatus(in remediationInput, now metav1.Time) kube.RemediationStatus {
	st := kube.RemediationStatus{Conditions: slices.Clone(in.Remediation.Status.Conditions)}
	set := func(typ string, status metav1.ConditionStatus, reason, msg string) {
		kube.SetCondition(&st.Conditions, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg, LastTransitionTime: now})
	}
	cannot := func(reason, msg string) {
		set(CondProcessing, metav1.ConditionFalse, reason, msg)
		set(CondStorageFenced, metav1.ConditionFalse, reason, msg)
		set(CondSucceeded, metav1.ConditionFalse, reason, msg)
	}
	f := in.fence()
	if f == nil {
		switch {
		case len(in.Gaps) > 0:
			cannot(ReasonNodeUnprotected, "fenced cannot cut all of the node's storage, so it does not fence it: "+gapsText(in.Gaps))
		case in.DryRun:
			cannot(ReasonDryRun, "fenced runs this cluster in dry-run: it fences nothing ("+orNone(in.Report.Blocked)+")")
		case !in.IdentitiesKnown:
			cannot(ReasonNotFenceable, "the node's identities on the arrays were never learned, so a fence could not be proven")
		case in.Report.Blocked != "":
			set(CondProcessing, metav1.ConditionTrue, ReasonWaiting, in.Report.Blocked)
			set(CondStorageFenced, metav1.ConditionUnknown, ReasonWaiting, in.Report.Blocked)
			set(CondSucceeded, metav1.ConditionUnknown, ReasonWaiting, in.Report.Blocked)
		default:
			set(CondProcessing, metav1.ConditionTrue, ReasonStarted, "fenced's leader took the request")
			set(CondStorageFenced, metav1.ConditionUnknown, ReasonStarted, "no array changed yet")
			set(CondSucceeded, metav1.ConditionUnknown, ReasonStarted, "")
		}
		return st
	}
	st.FenceID, st.Phase = f.ID, string(f.State)
	for _, p := range f.Plans {
		a := kube.RemediationArray{Name: p.Array, Cuts: len(p.Volumes), Summary: p.Summary}
		if r := f.Results[p.Array]; r != nil {
			a.Verified = r.Verified
			if r.Verification != nil && !r.Verification.CheckedAt.IsZero() {
				t := metav1.NewTime(r.Verification.CheckedAt.Truncate(time.Second))
				a.VerifiedAt = &t
			}
		}
		st.Arrays = append(st.Arrays, a)
	}
	evidence := arraysText(st.Arrays)
	other := ""
	if !strings.Contains(f.Reason, "FencedRemediation "+in.Remediation.Key()) {
		other = " (fence " + f.ID + " was opened by " + string(f.Origin) + ": " + f.Reason + ")"
	}
	blockedHere := in.Report.Blocked != "" && in.Report.FenceID == f.ID
	switch f.State {
	case ledger.StateIntent, ledger.StateFencing, ledger.StateFailed:
		if blockedHere && len(in.Report.BlockedArrays) > 0 {
			// An array that cannot be cut: NHC may escalate; the fence
			// keeps retrying and holds the pods (invariant 4).
			set(CondProcessing, metav1.ConditionTrue, ReasonArrayNotFenced, in.Report.Blocked)
			set(CondStorageFenced, metav1.ConditionFalse, ReasonArrayNotFenced, in.Report.Blocked)
			set(CondSucceeded, metav1.ConditionFalse, ReasonArrayNotFenced, in.Report.Blocked)
			return st
		}
		msg := "fence " + f.ID + " is " + string(f.State) + other
		if blockedHere {
			msg += ": " + in.Report.Blocked
		}
		set(CondProcessing, metav1.ConditionTrue, ReasonFencing, msg)
		set(CondStorageFenced, metav1.ConditionUnknown, ReasonFencing, msg)
		set(CondSucceeded, metav1.ConditionUnknown, ReasonFencing, msg)
	case ledger.StateFenced, ledger.StateTainted:
		set(CondProcessing, metav1.ConditionTrue, ReasonEvicting, "fence "+f.ID+" is "+string(f.State)+": deleting the node's pods"+other)
		set(CondStorageFenced, metav1.ConditionTrue, ReasonReadBack, evidence)
		set(CondSucceeded, metav1.ConditionUnknown, ReasonEvicting, "")
	case ledger.StateEvicted:
		set(CondProcessing, metav1.ConditionFalse, ReasonFenced, "fence "+f.ID+" done: storage cut and read back, pods deleted"+other)
		set(CondStorageFenced, metav1.ConditionTrue, ReasonReadBack, evidence)
		set(CondSucceeded, metav1.ConditionTrue, ReasonFenced, "the node's storage is cut and its pods run elsewhere; fenced unfences it after a verified reboot")
	case ledger.StateUnfenceIntent, ledger.StateRestored, ledger.StateUntainted, ledger.StateClosed:
		set(CondProcessing, metav1.ConditionFalse, ReasonUnfenced, "fence "+f.ID+" is "+string(f.State)+": the node rebooted and gets its access back")
		set(CondStorageFenced, metav1.ConditionFalse, ReasonUnfenced, "fence "+f.ID+" is "+string(f.State))
		set(CondSucceeded, metav1.ConditionTrue, ReasonFenced, "the node was fenced and has rebooted")
	case ledger.StateAborted:
		cannot(ReasonAborted, "fence "+f.ID+" was aborted before any array changed: "+f.FailReason)
	}
	return st
}

func arraysText(arrays []kube.RemediationArray) string {
	if len(arrays) == 0 {
		return "no array holds the node's storage or identity"
	}
	var parts []string
	for _, a := range arrays {
		s := fmt.Sprintf("%s: %d volume cut(s)", a.Name, a.Cuts)
		if a.Verified {
			s += ", read back"
			if a.VerifiedAt != nil {
				s += " at " + a.VerifiedAt.UTC().Format("2006-01-02T15:04:05Z")
			}
		} else {
			s += ", not read back"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

func orNone(s string) string {
	if s == "" {
		return "no fence decided yet"
	}
	return s
}

// sameStatus compares two statuses as the API server stores them (times
// to the second, whatever their location).
func sameStatus(a, b kube.RemediationStatus) bool {
	ja, erra := json.Marshal(a)
	jb, errb := json.Marshal(b)
	return erra == nil && errb == nil && string(ja) == string(jb)
}
