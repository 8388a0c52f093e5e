package ledger

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/fenced-project/fenced/arrayclients"
)

// MaxSteps bounds the steps kept in one fence record (the oldest go first).
const MaxSteps = 100

// lookupFence finds the open record named by ref.
func lookupFence(s *State, t MessageType, ref fenceRef) (*NodeState, *Fence, error) {
	n := s.node(ref.Cluster, ref.Node)
	if n == nil {
		return nil, nil, fmt.Errorf("%s: %w: node %s/%s", t, ErrNotFound, ref.Cluster, ref.Node)
	}
	if n.Fence == nil || n.Fence.ID != ref.FenceID {
		for _, h := range n.History {
			if h.ID == ref.FenceID {
				return nil, nil, fmt.Errorf("%s: %w: fence %s of %s/%s is %s", t, ErrConflict, ref.FenceID,
					ref.Cluster, ref.Node, h.State)
			}
		}
		return nil, nil, fmt.Errorf("%s: %w: fence %s is not open on %s/%s", t, ErrNotFound, ref.FenceID,
			ref.Cluster, ref.Node)
	}
	return n, n.Fence, nil
}

func expectState(t MessageType, f *Fence, want FenceState) error {
	if f.State != want {
		return fmt.Errorf("%s: %w: fence %s is %s, expected %s", t, ErrConflict, f.ID, f.State, want)
	}
	return nil
}

func sortPlans(plans []arrayclients.Plan) {
	sort.Slice(plans, func(i, j int) bool { return plans[i].Array < plans[j].Array })
}

func unionStrings(list, more []string) []string {
	for _, v := range more {
		if !slices.Contains(list, v) {
			list = append(list, v)
		}
	}
	return list
}

func (f *Fence) plan(array string) (arrayclients.Plan, bool) {
	for _, p := range f.Plans {
		if p.Array == array {
			return p, true
		}
	}
	return arrayclients.Plan{}, false
}

func applyOpenFence(s *State, index uint64, c *OpenFence) error {
	n := s.node(c.Cluster, c.Node)
	if n != nil && n.Fence != nil {
		return fmt.Errorf("%s: %w: %s/%s already has fence %s in %s", c.Type(), ErrConflict,
			c.Cluster, c.Node, n.Fence.ID, n.Fence.State)
	}
	if c.Origin == OriginVerdict && s.Paused(c.Cluster) {
		return fmt.Errorf("%s: %w: not opening a fence of %s/%s on a verdict", c.Type(), ErrPaused, c.Cluster, c.Node)
	}
	n = s.ensureNode(c.Cluster, c.Node)
	f := &Fence{
		ID: FenceID(index), Cluster: c.Cluster, Node: c.Node, Kind: KindFence, Origin: c.Origin,
		Operator: c.Operator, Reason: c.Reason, State: StateIntent,
		Identities:        maps.Clone(n.Identities),
		IdentitiesKnown:   !n.IdentitiesAt.IsZero(),
		Plans:             slices.Clone(c.Plans),
		Results:           map[string]*ArrayResult{},
		PodUIDs:           unionStrings(nil, c.PodUIDs),
		BootID:            c.BootID,
		Footprint:         slices.Clone(c.Footprint),
		FootprintRecorded: c.FootprintRecorded || len(c.Footprint) > 0,
		Steps: []Step{{To: StateIntent, Term: c.Term, Index: index, At: c.At, By: c.By,
			Operator: c.Operator, Note: c.Reason}},
		OpenedAt:  c.At,
		UpdatedAt: c.At,
	}
	sortPlans(f.Plans)
	n.Fence = f
	if c.Origin == OriginOperator {
		s.recordAction(index, Action{At: c.At, Operator: c.Operator, Action: "fence", Reason: c.Reason,
			Cluster: c.Cluster, Node: c.Node, FenceID: f.ID})
	}
	return nil
}

func applyAmendFence(s *State, index uint64, c *AmendFence) error {
	_, f, err := lookupFence(s, c.Type(), fenceRef{c.Cluster, c.Node, c.FenceID})
	if err != nil {
		return err
	}
	if err := expectState(c.Type(), f, c.Expect); err != nil {
		return err
	}
	for _, p := range c.Plans {
		if r := f.Results[p.Array]; r != nil && r.Attempts > 0 && !c.Replan {
			return fmt.Errorf("%s: %w: fence %s already operated on array %s with its plan", c.Type(),
				ErrConflict, f.ID, p.Array)
		}
	}
	for _, p := range c.Plans {
		if r := f.Results[p.Array]; r != nil && r.Attempts > 0 {
			// A replan: what the old plan removed is still to be undone.
			if old, ok := f.plan(p.Array); ok {
				f.Superseded = append(f.Superseded, old)
			}
			delete(f.Results, p.Array)
		}
		f.Plans = slices.DeleteFunc(f.Plans, func(old arrayclients.Plan) bool { return old.Array == p.Array })
		f.Plans = append(f.Plans, p)
	}
	sortPlans(f.Plans)
	f.PodUIDs = unionStrings(f.PodUIDs, c.PodUIDs)
	for _, v := range c.Footprint {
		f.Footprint = slices.DeleteFunc(f.Footprint, func(old arrayclients.FootprintVolume) bool { return old.PV == v.PV })
		f.Footprint = append(f.Footprint, v)
	}
	if len(c.Footprint) > 0 || c.FootprintRecorded {
		slices.SortFunc(f.Footprint, func(a, b arrayclients.FootprintVolume) int { return strings.Compare(a.PV, b.PV) })
		f.FootprintRecorded = true
	}
	f.UpdatedAt = c.At
	return nil
}

// guardStep checks the conditions of a step beyond Allowed.
func guardStep(s *State, f *Fence, c *FenceStep) error {
	t := c.Type()
	switch c.To {
	case StateFencing:
		if f.Kind != KindFence {
			return fmt.Errorf("%s: %w: fence %s is recovering; it cannot fence again", t, ErrBadTransition, f.ID)
		}
		if f.Origin == OriginVerdict && c.Operator == "" && s.Paused(f.Cluster) {
			return fmt.Errorf("%s: %w: not fencing %s/%s on a verdict", t, ErrPaused, f.Cluster, f.Node)
		}
	case StateFenced:
		if !f.IdentitiesKnown {
			return fmt.Errorf("%s: %w: identities of %s/%s were never learned; fence %s cannot be proven",
				t, ErrBadTransition, f.Cluster, f.Node, f.ID)
		}
		arrays := slices.Collect(maps.Keys(f.Identities))
		for _, p := range f.Plans {
			arrays = append(arrays, p.Array)
		}
		slices.Sort(arrays)
		for _, a := range slices.Compact(arrays) {
			if _, ok := f.Confirmed(a); ok && c.V >= ConfirmVersion {
				continue // an operator confirmed the node cannot write there
			}
			if _, ok := f.plan(a); !ok {
				return fmt.Errorf("%s: %w: fence %s has no plan for array %s", t, ErrBadTransition, f.ID, a)
			}
			if r := f.Results[a]; r == nil || !r.Verified {
				return fmt.Errorf("%s: %w: fence %s is not verified on array %s", t, ErrBadTransition, f.ID, a)
			}
		}
		if c.V >= 2 {
			if err := footprintCut(f, c.V); err != nil {
				return fmt.Errorf("%s: %w: fence %s: %w", t, ErrBadTransition, f.ID, err)
			}
		}
	case StateRestored:
		for _, p := range f.Plans {
			if _, ok := f.AbandonedRestore(p.Array); ok && c.V >= AbandonVersion {
				continue // an operator abandoned the restore of an array confirmed gone
			}
			if r := f.Results[p.Array]; r == nil || !r.RestoreVerified {
				return fmt.Errorf("%s: %w: fence %s is not verified restored on array %s", t,
					ErrBadTransition, f.ID, p.Array)
			}
		}
	case StateClosed:
		if c.From == StateFailed && c.Operator == "" {
			return fmt.Errorf("%s: %w: only an operator closes failed fence %s", t, ErrBadTransition, f.ID)
		}
	}
	return nil
}

// footprintCut is the version 2 rule for the fenced step (invariants 1
// and 7): the record has a footprint, and every footprint volume is placed,
// has a cut in its array's plan, and that array's last read-back shows the
// node without access to it. From version 5 a placement on an array an
// operator confirmed (ConfirmArray) counts as cut.
func footprintCut(f *Fence, v int) error {
	if !f.FootprintRecorded {
		return errors.New("no storage footprint is recorded: amend it before fencing")
	}
	for _, vol := range f.Footprint {
		if vol.Gap != nil {
			return fmt.Errorf("volume %s cannot be cut (%s): %s", vol.PV, vol.Gap.Reason, vol.Gap.Detail)
		}
		for _, pl := range vol.Placements {
			if _, ok := f.Confirmed(pl.Array); ok && v >= ConfirmVersion {
				continue
			}
			p, ok := f.plan(pl.Array)
			if !ok {
				return fmt.Errorf("volume %s: no plan for array %s", vol.PV, pl.Array)
			}
			i := slices.IndexFunc(p.Volumes, func(c arrayclients.VolumeCut) bool { return c.Volume == vol.PV })
			if i < 0 {
				return fmt.Errorf("volume %s: the plan of array %s has no cut for it", vol.PV, pl.Array)
			}
			if vc := p.Volumes[i]; vc.Gap != nil || vc.Cut == "" {
				reason := "no cut"
				if vc.Gap != nil {
					reason = string(vc.Gap.Reason) + ": " + vc.Gap.Detail
				}
				return fmt.Errorf("volume %s cannot be cut on array %s (%s)", vol.PV, pl.Array, reason)
			}
			r := f.Results[pl.Array]
			if r == nil || r.Verification == nil {
				return fmt.Errorf("volume %s: array %s was not read back", vol.PV, pl.Array)
			}
			j := slices.IndexFunc(r.Verification.Volumes, func(c arrayclients.VolumeCheck) bool { return c.Volume == vol.PV })
			if j < 0 {
				return fmt.Errorf("volume %s: the read-back of array %s does not show it", vol.PV, pl.Array)
			}
			if r.Verification.Volumes[j].NodeAccess {
				return fmt.Errorf("volume %s: the read-back of array %s shows the node's access", vol.PV, pl.Array)
			}
		}
	}
	return nil
}

func applyFenceStep(s *State, index uint64, c *FenceStep) error {
	n, f, err := lookupFence(s, c.Type(), fenceRef{c.Cluster, c.Node, c.FenceID})
	if err != nil {
		return err
	}
	if err := expectState(c.Type(), f, c.From); err != nil {
		return err
	}
	if last := f.Steps[len(f.Steps)-1]; last.Term > c.Term {
		return fmt.Errorf("%s: %w: fence %s stepped in term %d, this step is of term %d", c.Type(),
			ErrStaleTerm, f.ID, last.Term, c.Term)
	}
	if !AllowedIn(c.V, c.From, c.To) {
		return fmt.Errorf("%s: %w: fence %s from %s to %s", c.Type(), ErrBadTransition, f.ID, c.From, c.To)
	}
	if err := guardStep(s, f, c); err != nil {
		return err
	}

	switch c.To {
	case StateFencing:
		if c.From == StateFailed {
			for _, r := range f.Results { // a retry proves the fence again
				r.Verified = false
			}
		}
	case StateFenced:
		if f.OutOfServiceBefore == nil && c.OutOfServiceBefore != nil {
			v := *c.OutOfServiceBefore
			f.OutOfServiceBefore = &v
		}
	case StateUnfenceIntent:
		f.Kind = KindUnfence
		if c.BootID != "" {
			f.UnfenceBootID = c.BootID
		}
		f.Restore = maps.Clone(c.Restore)
		if c.V >= RescopeVersion {
			f.Scopes = appendBounded(f.Scopes, ScopeRecord{Term: c.Term, Index: index, At: c.At, By: c.By,
				Restore: maps.Clone(c.Restore), Note: "unfence intent"}, MaxScopes)
		}
	case StateFailed, StateAborted:
		f.FailReason = c.Note
	}
	f.State = c.To
	f.UpdatedAt = c.At
	f.Steps = appendBounded(f.Steps, Step{From: c.From, To: c.To, Term: c.Term, Index: index, At: c.At,
		By: c.By, Operator: c.Operator, Note: c.Note, Forced: c.Forced, Unverified: c.Unverified}, MaxSteps)
	if c.Operator != "" {
		s.recordAction(index, Action{At: c.At, Operator: c.Operator, Action: string(c.To), Reason: c.Note,
			Cluster: c.Cluster, Node: c.Node, FenceID: f.ID, Forced: c.Forced, Unverified: c.Unverified})
	}
	if Terminal(c.To) {
		n.History = appendBounded(n.History, f, MaxHistory)
		n.Fence = nil
	}
	return nil
}

func applyArrayResult(s *State, c *RecordArrayResult) error {
	_, f, err := lookupFence(s, c.Type(), fenceRef{c.Cluster, c.Node, c.FenceID})
	if err != nil {
		return err
	}
	if err := expectState(c.Type(), f, c.Expect); err != nil {
		return err
	}
	if _, ok := f.plan(c.Array); !ok {
		return fmt.Errorf("%s: %w: fence %s has no plan for array %s", c.Type(), ErrNotFound, f.ID, c.Array)
	}
	if a, ok := f.AbandonedRestore(c.Array); ok && c.V >= AbandonVersion && (c.Op == OpUndo || c.Op == OpVerifyRestore) {
		return fmt.Errorf("%s: %w: fence %s: the restore of array %s was abandoned by %s", c.Type(), ErrConflict,
			f.ID, c.Array, a.Operator)
	}
	if f.Results == nil {
		f.Results = map[string]*ArrayResult{}
	}
	r := f.Results[c.Array]
	if r == nil {
		r = &ArrayResult{Array: c.Array}
		f.Results[c.Array] = r
	}
	r.Attempts++
	r.LastOp, r.LastTerm, r.LastAt = c.Op, c.Term, c.At
	f.UpdatedAt = c.At
	if !c.OK {
		r.Failures++
		r.LastError = c.Error
		return nil
	}
	r.LastError = ""
	switch c.Op {
	case OpApply:
		r.Applied = true
	case OpVerify:
		v := *c.Verification
		r.Verification = &v
		r.Verified = v.Fenced
	case OpUndo:
		r.Undone = true
	case OpVerifyRestore:
		v := *c.Verification
		r.Verification = &v
		r.RestoreVerified = v.Restored
	}
	return nil
}

// applyRescope records a restore scope computed again (version 4). The
// record must be in unfence-intent. Every array whose scope differs from
// the recorded one loses its restore read-back: it is restored and read
// back again under the new scope before the record may step to restored.
func applyRescope(s *State, index uint64, c *Rescope) error {
	_, f, err := lookupFence(s, c.Type(), fenceRef{c.Cluster, c.Node, c.FenceID})
	if err != nil {
		return err
	}
	if err := expectState(c.Type(), f, StateUnfenceIntent); err != nil {
		return err
	}
	arrays := slices.Collect(maps.Keys(f.Restore))
	arrays = append(arrays, slices.Collect(maps.Keys(c.Restore))...)
	slices.Sort(arrays)
	for _, a := range slices.Compact(arrays) {
		if sameWanted(f.Restore[a], c.Restore[a]) {
			continue
		}
		if r := f.Results[a]; r != nil {
			r.RestoreVerified = false
		}
	}
	f.Restore = maps.Clone(c.Restore)
	f.Scopes = appendBounded(f.Scopes, ScopeRecord{Term: c.Term, Index: index, At: c.At, By: c.By,
		Restore: maps.Clone(c.Restore), Note: c.Note}, MaxScopes)
	f.UpdatedAt = c.At
	return nil
}

// sameWanted reports whether two scopes of an array name the same volumes.
func sameWanted(a, b arrayclients.RestoreScope) bool {
	x, y := slices.Clone(a.Wanted), slices.Clone(b.Wanted)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(slices.Compact(x), slices.Compact(y))
}

// Confirmed returns the operator confirmation covering an array of a
// fence record, if any (see ConfirmArray). It is a rule
// of the fenced step from version 5.
//
// A read-back of the array recorded after the confirmation that shows the
// node's access (the array answered, and the node can write there) voids
// it: an array's own answer outweighs an operator's word.
func (f *Fence) Confirmed(array string) (Confirmation, bool) {
	for i := len(f.Confirmations) - 1; i >= 0; i-- {
		c := f.Confirmations[i]
		if c.Array != array && (c.Array != "" || !c.PoweredOff) {
			continue
		}
		if r := f.Results[array]; r != nil && r.LastOp == OpVerify && r.LastError == "" && !r.Verified &&
			r.LastAt.After(c.At) {
			return Confirmation{}, false
		}
		return c, true
	}
	return Confirmation{}, false
}

// applyConfirmArray records an operator's attestation (version 5) that the
// node of an open fence cannot write to an array, or is powered off. The
// record must be a fence (not a recovery) in intent, fencing or failed,
// and the array one of the record's: an identity, plan or footprint array.
func applyConfirmArray(s *State, index uint64, c *ConfirmArray) error {
	_, f, err := lookupFence(s, c.Type(), fenceRef{c.Cluster, c.Node, c.FenceID})
	if err != nil {
		return err
	}
	if f.Kind != KindFence || (f.State != StateIntent && f.State != StateFencing && f.State != StateFailed) {
		return fmt.Errorf("%s: %w: fence %s is %s (%s); a confirmation helps only a fence in %s, %s or %s",
			c.Type(), ErrConflict, f.ID, f.State, f.Kind, StateIntent, StateFencing, StateFailed)
	}
	if c.Array != "" {
		arrays := fenceArrays(f)
		if !slices.Contains(arrays, c.Array) {
			return fmt.Errorf("%s: %w: array %s is not one of fence %s's arrays (%s)", c.Type(), ErrNotFound,
				c.Array, f.ID, strings.Join(arrays, ", "))
		}
	}
	f.Confirmations = append(f.Confirmations, Confirmation{Array: c.Array, PoweredOff: c.PoweredOff,
		Operator: c.Operator, Reason: c.Reason, Term: c.Term, Index: index, At: c.At, By: c.By})
	f.UpdatedAt = c.At
	s.recordAction(index, Action{At: c.At, Operator: c.Operator, Action: "confirm", Reason: c.Reason,
		Cluster: c.Cluster, Node: c.Node, FenceID: f.ID})
	return nil
}

// fenceArrays names the arrays of a record: its identity, plan and
// footprint arrays, sorted.
func fenceArrays(f *Fence) []string {
	arrays := slices.Collect(maps.Keys(f.Identities))
	for _, p := range f.Plans {
		arrays = append(arrays, p.Array)
	}
	for _, v := range f.Footprint {
		for _, pl := range v.Placements {
			arrays = append(arrays, pl.Array)
		}
	}
	slices.Sort(arrays)
	return slices.Compact(arrays)
}

// applyAbandonRestore records an operator's decision (version 6) that the
// unfence of a fence does not restore an array: the record must be in
// unfence-intent, the array one of its plan arrays whose restore was not
// read back, and an operator must have confirmed for this fence that the
// node cannot write there because the array is gone (ConfirmArray naming
// the array, not a powered-off node).
func applyAbandonRestore(s *State, index uint64, c *AbandonRestore) error {
	t := c.Type()
	_, f, err := lookupFence(s, t, fenceRef{c.Cluster, c.Node, c.FenceID})
	if err != nil {
		return err
	}
	if f.State != StateUnfenceIntent {
		return fmt.Errorf("%s: %w: fence %s is %s; a restore is abandoned only in %s", t, ErrConflict,
			f.ID, f.State, StateUnfenceIntent)
	}
	if _, ok := f.plan(c.Array); !ok {
		arrays := planArrayNames(f)
		return fmt.Errorf("%s: %w: array %s is not in fence %s's plan (%s)", t, ErrNotFound, c.Array, f.ID,
			strings.Join(arrays, ", "))
	}
	if cf, ok := f.Confirmed(c.Array); !ok || cf.PoweredOff || cf.Array != c.Array {
		return fmt.Errorf("%s: %w: no operator confirmed array %s gone for fence %s (fenced confirm --array %s)", t,
			ErrConflict, c.Array, f.ID, c.Array)
	}
	if r := f.Results[c.Array]; r != nil && r.RestoreVerified {
		return fmt.Errorf("%s: %w: fence %s is already restored and read back on array %s", t, ErrConflict, f.ID, c.Array)
	}
	if _, ok := f.AbandonedRestore(c.Array); ok {
		return fmt.Errorf("%s: %w: the restore of array %s of fence %s is already abandoned", t, ErrConflict, c.Array, f.ID)
	}
	f.Abandoned = append(f.Abandoned, Abandonment{Array: c.Array, Operator: c.Operator, Reason: c.Reason,
		Term: c.Term, Index: index, At: c.At, By: c.By})
	f.UpdatedAt = c.At
	s.recordAction(index, Action{At: c.At, Operator: c.Operator, Action: "abandon-restore", Reason: c.Reason,
		Cluster: c.Cluster, Node: c.Node, FenceID: f.ID})
	return nil
}

// planArrayNames names the arrays of a record's plans, sorted.
func planArrayNames(f *Fence) []string {
	var out []string
	for _, p := range f.Plans {
		out = append(out, p.Array)
	}
	slices.Sort(out)
	return slices.Compact(out)
}
