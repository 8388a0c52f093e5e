package ledger

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/fenced-project/fenced/arrayclients"
)

// maxName bounds names (clusters, nodes, arrays, replicas, probes, IDs).
const maxName = 253

// maxEndIDs bounds the pauses one EndPauses names (the holders and the
// single pause slots of earlier versions).
const maxEndIDs = 1024

// maxText bounds free text (reasons, notes, errors, details).
const maxText = 4096

func invalid(t MessageType, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalid, t, fmt.Sprintf(format, args...))
}

func checkName(t MessageType, field, v string, required bool) error {
	if v == "" {
		if required {
			return invalid(t, "%s is required", field)
		}
		return nil
	}
	if len(v) > maxName {
		return invalid(t, "%s is longer than %d bytes", field, maxName)
	}
	if strings.ContainsAny(v, "/\x00\n\r\t") {
		return invalid(t, "%s %q contains a slash or a control character", field, v)
	}
	return nil
}

// checkOperator checks an operator's name, which may hold slashes (a
// certificate subject, a service account).
func checkOperator(t MessageType, field, v string, required bool) error {
	if v == "" && required {
		return invalid(t, "%s is required", field)
	}
	if len(v) > maxName {
		return invalid(t, "%s is longer than %d bytes", field, maxName)
	}
	if strings.ContainsAny(v, "\x00\n\r") {
		return invalid(t, "%s %q contains a control character", field, v)
	}
	return nil
}

func checkText(t MessageType, field, v string, required bool) error {
	if v == "" && required {
		return invalid(t, "%s is required", field)
	}
	if len(v) > maxText {
		return invalid(t, "%s is longer than %d bytes", field, maxText)
	}
	return nil
}

func (m *Meta) check(t MessageType) error {
	switch {
	case m.V < 1:
		return invalid(t, "v is required")
	case m.V > Version:
		return fmt.Errorf("%w: %s: v %d, this ledger understands up to %d", ErrUnsupportedVersion, t, m.V, Version)
	case m.Term == 0:
		return invalid(t, "term is required")
	case m.At.IsZero():
		return invalid(t, "at is required")
	}
	return checkName(t, "by", m.By, true)
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// Validate implements Command.
func (c *LeaderEpoch) Validate() error {
	if err := c.check(c.Type()); err != nil {
		return err
	}
	if c.LedgerVersion < 1 {
		return invalid(c.Type(), "ledgerVersion is required")
	}
	return nil
}

// Validate implements Command.
func (c *SetIdentities) Validate() error {
	t := c.Type()
	if err := firstErr(c.check(t), checkName(t, "cluster", c.Cluster, true),
		checkName(t, "node", c.Node, true), checkName(t, "bootID", c.BootID, false)); err != nil {
		return err
	}
	for _, array := range slices.Sorted(maps.Keys(c.Identities)) {
		id := c.Identities[array]
		if err := checkName(t, "identities key", array, true); err != nil {
			return err
		}
		if id.Array != array {
			return invalid(t, "identity under %q names array %q", array, id.Array)
		}
		if id.Node != c.Node {
			return invalid(t, "identity on %q names node %q, not %q", array, id.Node, c.Node)
		}
	}
	// Keys in sorted order: a refusal's text is kept in the replicated
	// state, so it must not depend on map order.
	for _, u := range []struct {
		field, what string
		m           map[string]string
	}{{"notFound", "not found", c.NotFound}, {"ambiguous", "ambiguous", c.Ambiguous}} {
		for _, array := range slices.Sorted(maps.Keys(u.m)) {
			if err := firstErr(checkName(t, u.field+" key", array, true), checkText(t, u.field+"["+array+"]", u.m[array], false)); err != nil {
				return err
			}
			if _, both := c.Identities[array]; both {
				return invalid(t, "array %q is both an identity and %s", array, u.what)
			}
		}
		if c.V < 2 && len(u.m) > 0 {
			return invalid(t, "%s needs v 2", u.field)
		}
	}
	for _, array := range slices.Sorted(maps.Keys(c.Ambiguous)) {
		if _, both := c.NotFound[array]; both {
			return invalid(t, "array %q is both not found and ambiguous", array)
		}
	}
	if d := c.InputsDigest; d != "" && !isSHA256Hex(d) {
		return invalid(t, "inputsDigest is not 64 lower-case hex digits (%d bytes)", len(d))
	}
	return nil
}

// isSHA256Hex reports whether s is 64 lower-case hex digits.
func isSHA256Hex(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, r := range s {
		if (r < '0' || r > '9') && (r < 'a' || r > 'f') {
			return false
		}
	}
	return true
}

// validateFootprint checks footprint volumes: a PV each, once, and every
// placement on a named array; a volume with a gap has no placement.
func validateFootprint(t MessageType, m *Meta, vols []arrayclients.FootprintVolume, recorded bool) error {
	if m.V < 2 && (len(vols) > 0 || recorded) {
		return invalid(t, "a footprint needs v 2")
	}
	seen := map[string]bool{}
	for i, v := range vols {
		f := fmt.Sprintf("footprint[%d]", i)
		if err := firstErr(checkName(t, f+".pv", v.PV, true), checkText(t, f+".handle", v.Handle, false)); err != nil {
			return err
		}
		if seen[v.PV] {
			return invalid(t, "footprint names volume %q twice", v.PV)
		}
		seen[v.PV] = true
		if v.Gap != nil && len(v.Placements) > 0 {
			return invalid(t, "%s (%s) has a gap and placements", f, v.PV)
		}
		if v.Gap == nil && len(v.Placements) == 0 {
			return invalid(t, "%s (%s) has neither a gap nor a placement", f, v.PV)
		}
		if v.Gap != nil {
			if err := checkText(t, f+".gap.detail", v.Gap.Detail, false); err != nil {
				return err
			}
		}
		for j, pl := range v.Placements {
			if err := checkName(t, fmt.Sprintf("%s.placements[%d].array", f, j), pl.Array, true); err != nil {
				return err
			}
			if pl.Volume != v.PV {
				return invalid(t, "%s.placements[%d] names volume %q, not %q", f, j, pl.Volume, v.PV)
			}
		}
	}
	return nil
}

func validatePlans(t MessageType, node string, plans []arrayclients.Plan) error {
	seen := map[string]bool{}
	for i, p := range plans {
		if err := checkName(t, fmt.Sprintf("plans[%d].array", i), p.Array, true); err != nil {
			return err
		}
		if seen[p.Array] {
			return invalid(t, "plans name array %q twice", p.Array)
		}
		seen[p.Array] = true
		if p.Identity.Array != p.Array {
			return invalid(t, "plans[%d] for %q holds an identity on %q", i, p.Array, p.Identity.Array)
		}
		if p.Identity.Node != node {
			return invalid(t, "plans[%d] is for node %q, not %q", i, p.Identity.Node, node)
		}
	}
	return nil
}

func validatePods(t MessageType, uids []string) error {
	for i, uid := range uids {
		if err := checkName(t, fmt.Sprintf("podUIDs[%d]", i), uid, true); err != nil {
			return err
		}
	}
	return nil
}

// Validate implements Command.
func (c *OpenFence) Validate() error {
	t := c.Type()
	if err := firstErr(c.check(t), checkName(t, "cluster", c.Cluster, true),
		checkName(t, "node", c.Node, true), checkText(t, "reason", c.Reason, true),
		checkName(t, "bootID", c.BootID, false), validatePods(t, c.PodUIDs),
		validatePlans(t, c.Node, c.Plans), validateFootprint(t, &c.Meta, c.Footprint, c.FootprintRecorded)); err != nil {
		return err
	}
	switch c.Origin {
	case OriginVerdict:
		return checkOperator(t, "operator", c.Operator, false)
	case OriginOperator:
		return checkOperator(t, "operator", c.Operator, true)
	}
	return invalid(t, "origin %q is not verdict or operator", c.Origin)
}

// fenceRef names a fence record.
type fenceRef struct {
	Cluster, Node, FenceID string
}

func (c *fenceRef) validate(t MessageType) error {
	return firstErr(checkName(t, "cluster", c.Cluster, true), checkName(t, "node", c.Node, true),
		checkName(t, "fenceID", c.FenceID, true))
}

// Validate implements Command.
func (c *AmendFence) Validate() error {
	t := c.Type()
	ref := fenceRef{c.Cluster, c.Node, c.FenceID}
	if err := firstErr(c.check(t), ref.validate(t), validatePods(t, c.PodUIDs),
		validatePlans(t, c.Node, c.Plans), validateFootprint(t, &c.Meta, c.Footprint, c.FootprintRecorded)); err != nil {
		return err
	}
	if c.Expect != StateIntent && c.Expect != StateFencing {
		return invalid(t, "expect %q: plans can be amended only in intent or fencing", c.Expect)
	}
	if len(c.Plans) == 0 && len(c.PodUIDs) == 0 && len(c.Footprint) == 0 && !c.FootprintRecorded {
		return invalid(t, "nothing to amend")
	}
	if c.Replan && (c.V < 2 || len(c.Plans) == 0) {
		return invalid(t, "replan needs v 2 and plans")
	}
	return nil
}

// Validate implements Command.
func (c *FenceStep) Validate() error {
	t := c.Type()
	ref := fenceRef{c.Cluster, c.Node, c.FenceID}
	if err := firstErr(c.check(t), ref.validate(t), checkOperator(t, "operator", c.Operator, false),
		checkText(t, "note", c.Note, false), checkName(t, "bootID", c.BootID, false)); err != nil {
		return err
	}
	if !knownState(c.From) {
		return invalid(t, "from %q is not a fence state", c.From)
	}
	if !knownState(c.To) {
		return invalid(t, "to %q is not a fence state", c.To)
	}
	if (c.To == StateFailed || c.To == StateAborted || c.Operator != "") && c.Note == "" {
		return invalid(t, "note is required for a step to %s or by an operator", c.To)
	}
	if c.Forced && (c.To != StateUnfenceIntent || c.Operator == "") {
		return invalid(t, "forced is given only with an operator's step to %s", StateUnfenceIntent)
	}
	if c.OutOfServiceBefore != nil && c.To != StateFenced {
		return invalid(t, "outOfServiceBefore is given only with a step to %s", StateFenced)
	}
	if c.Unverified && !c.Forced {
		return invalid(t, "unverified is given only with forced")
	}
	if len(c.Restore) > 0 {
		if c.V < 2 || c.To != StateUnfenceIntent {
			return invalid(t, "restore is given only with a v 2 step to %s", StateUnfenceIntent)
		}
		return validateRestore(t, c.Restore)
	}
	return nil
}

// validateRestore checks a restore scope: arrays and volumes by name.
func validateRestore(t MessageType, restore map[string]arrayclients.RestoreScope) error {
	for _, array := range slices.Sorted(maps.Keys(restore)) {
		sc := restore[array]
		if err := checkName(t, "restore key", array, true); err != nil {
			return err
		}
		for i, v := range sc.Wanted {
			if err := checkName(t, fmt.Sprintf("restore[%s].wanted[%d]", array, i), v, true); err != nil {
				return err
			}
		}
	}
	return nil
}

// Validate implements Command.
func (c *Rescope) Validate() error {
	t := c.Type()
	ref := fenceRef{c.Cluster, c.Node, c.FenceID}
	if err := firstErr(c.check(t), ref.validate(t), checkText(t, "note", c.Note, false)); err != nil {
		return err
	}
	if c.V < RescopeVersion {
		return invalid(t, "needs v %d, got v %d", RescopeVersion, c.V)
	}
	return validateRestore(t, c.Restore)
}

// Validate implements Command.
func (c *RecordArrayResult) Validate() error {
	t := c.Type()
	ref := fenceRef{c.Cluster, c.Node, c.FenceID}
	if err := firstErr(c.check(t), ref.validate(t), checkName(t, "array", c.Array, true),
		checkText(t, "error", c.Error, false)); err != nil {
		return err
	}
	want, ok := opState[c.Op]
	if !ok {
		return invalid(t, "op %q is not apply, verify, undo or verify-restore", c.Op)
	}
	if c.Expect != want {
		return invalid(t, "op %s is recorded in %s, not %q", c.Op, want, c.Expect)
	}
	if c.OK && c.Error != "" {
		return invalid(t, "error given for a successful %s", c.Op)
	}
	if !c.OK && c.Error == "" {
		return invalid(t, "error is required for a failed %s", c.Op)
	}
	if c.OK && (c.Op == OpVerify || c.Op == OpVerifyRestore) && c.Verification == nil {
		return invalid(t, "verification is required for %s", c.Op)
	}
	return nil
}

// Validate implements Command.
func (c *SetPause) Validate() error {
	t := c.Type()
	return firstErr(c.check(t), checkName(t, "cluster", c.Cluster, false),
		checkOperator(t, "operator", c.Operator, true), checkText(t, "reason", c.Reason, true))
}

// Validate implements Command.
func (c *Observe) Validate() error {
	t := c.Type()
	if err := firstErr(c.check(t), checkName(t, "replica", c.Replica, true),
		checkName(t, "cluster", c.Cluster, true), checkName(t, "node", c.Node, false),
		checkName(t, "probe", c.Probe, true), checkText(t, "detail", c.Detail, false)); err != nil {
		return err
	}
	if c.Since.IsZero() {
		return invalid(t, "since is required")
	}
	return nil
}

// Validate implements Command.
func (c *OperatorNote) Validate() error {
	t := c.Type()
	if err := firstErr(c.check(t), checkName(t, "cluster", c.Cluster, false),
		checkName(t, "node", c.Node, false), checkName(t, "fenceID", c.FenceID, false),
		checkOperator(t, "operator", c.Operator, true), checkName(t, "action", c.Action, true),
		checkText(t, "reason", c.Reason, true)); err != nil {
		return err
	}
	if c.Node != "" && c.Cluster == "" {
		return invalid(t, "node %q given without its cluster", c.Node)
	}
	return nil
}

// Validate implements Command.
func (c *ForgetNode) Validate() error {
	t := c.Type()
	return firstErr(c.check(t), checkName(t, "cluster", c.Cluster, true),
		checkName(t, "node", c.Node, true), checkOperator(t, "operator", c.Operator, false),
		checkText(t, "reason", c.Reason, true))
}

// Validate implements Command.
func (c *SetLedgerVersion) Validate() error {
	t := c.Type()
	if err := c.check(t); err != nil {
		return err
	}
	if c.V < 3 {
		return invalid(t, "needs v 3, got v %d", c.V)
	}
	if c.LedgerVersion != c.V {
		return invalid(t, "ledgerVersion %d differs from v %d", c.LedgerVersion, c.V)
	}
	for _, id := range slices.Sorted(maps.Keys(c.Voters)) {
		if err := checkName(t, "voters key", id, true); err != nil {
			return err
		}
		if c.Voters[id] < c.LedgerVersion {
			return invalid(t, "voter %s applies up to version %d, below %d", id, c.Voters[id], c.LedgerVersion)
		}
	}
	return nil
}

// Validate implements Command.
func (c *AddPause) Validate() error {
	t := c.Type()
	if err := firstErr(c.check(t), checkName(t, "cluster", c.Cluster, false),
		checkOperator(t, "operator", c.Operator, true), checkText(t, "reason", c.Reason, true)); err != nil {
		return err
	}
	if c.V < PauseHoldersVersion {
		return invalid(t, "needs v %d, got v %d", PauseHoldersVersion, c.V)
	}
	return nil
}

// Validate implements Command.
func (c *EndPauses) Validate() error {
	t := c.Type()
	if err := firstErr(c.check(t), checkOperator(t, "operator", c.Operator, true),
		checkText(t, "reason", c.Reason, true)); err != nil {
		return err
	}
	if c.V < PauseHoldersVersion {
		return invalid(t, "needs v %d, got v %d", PauseHoldersVersion, c.V)
	}
	if len(c.IDs) == 0 {
		return invalid(t, "ids is required")
	}
	if len(c.IDs) > maxEndIDs {
		return invalid(t, "ids names %d pauses, more than %d", len(c.IDs), maxEndIDs)
	}
	seen := map[string]bool{}
	for i, id := range c.IDs {
		if err := checkName(t, fmt.Sprintf("ids[%d]", i), id, true); err != nil {
			return err
		}
		if seen[id] {
			return invalid(t, "ids names %s twice", id)
		}
		seen[id] = true
	}
	return nil
}

// Validate implements Command.
func (c *ConfirmArray) Validate() error {
	t := c.Type()
	ref := fenceRef{c.Cluster, c.Node, c.FenceID}
	if err := firstErr(c.check(t), ref.validate(t), checkName(t, "array", c.Array, false),
		checkOperator(t, "operator", c.Operator, true), checkText(t, "reason", c.Reason, true)); err != nil {
		return err
	}
	if c.V < ConfirmVersion {
		return invalid(t, "needs v %d, got v %d", ConfirmVersion, c.V)
	}
	if c.Array == "" && !c.PoweredOff {
		return invalid(t, "array is required unless the node is confirmed powered off")
	}
	return nil
}

// Validate implements Command.
func (c *AbandonRestore) Validate() error {
	t := c.Type()
	ref := fenceRef{c.Cluster, c.Node, c.FenceID}
	if err := firstErr(c.check(t), ref.validate(t), checkName(t, "array", c.Array, true),
		checkOperator(t, "operator", c.Operator, true), checkText(t, "reason", c.Reason, true)); err != nil {
		return err
	}
	if c.V < AbandonVersion {
		return invalid(t, "needs v %d, got v %d", AbandonVersion, c.V)
	}
	return nil
}
