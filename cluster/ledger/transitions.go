package ledger

// rules lists, by ledger version, the steps a fence record may take. An
// entry is applied with the rules of its own version (Meta.V), so a
// committed log applies identically on every build that accepts it; a rule
// change is a new version with a new table, and the old tables stay.
//
//   - 1: the first ledger.
//   - 2: storage footprints. A fence goes back to fencing from fenced,
//     tainted or evicted when Kubernetes attached a volume to the node
//     after the fence read its footprint (a refence). Tainted and evicted
//     came into version 2 after its first release without a version of
//     their own: a version 2 entry taking a tainted or evicted record back
//     to fencing was written only by a build that had the rule, and is
//     applied as that build applied it (see docs/operations.md, "Ledger
//     versions").
//   - 3: the group ledger version (SetLedgerVersion). The steps are those
//     of version 2, but a leader of this build takes a tainted or evicted
//     record back to fencing only once the group runs version 3, when every
//     voter is known to apply the step.
//   - 4: the restore scope recomputed on every restore attempt (Rescope,
//     allowed only in unfence-intent). The steps are those of version 3.
//   - 5: pause holders (AddPause, EndPauses) and operator confirmations
//     (ConfirmArray): a step to fenced of version 5 counts a confirmed
//     array as planned, cut and read back. The steps are those of
//     version 3.
//   - 6: an operator's abandonment of an array's restore (AbandonRestore):
//     a step to restored of version 6 counts an abandoned array as not to
//     be restored, and no restore result of version 6 is recorded for it.
//     The steps are those of version 3.
var rules = map[int]map[FenceState][]FenceState{
	1: {
		StateIntent:        {StateFencing, StateAborted},
		StateFencing:       {StateFenced, StateFailed, StateUnfenceIntent},
		StateFenced:        {StateTainted, StateUnfenceIntent},
		StateTainted:       {StateEvicted, StateUnfenceIntent},
		StateEvicted:       {StateUnfenceIntent},
		StateUnfenceIntent: {StateRestored, StateFailed},
		StateRestored:      {StateUntainted},
		StateUntainted:     {StateClosed},
		StateFailed:        {StateFencing, StateUnfenceIntent, StateClosed},
		StateClosed:        nil,
		StateAborted:       nil,
	},
	2: refenceRules,
	3: refenceRules,
	4: refenceRules,
	5: refenceRules,
	6: refenceRules,
}

// refenceRules are the steps of versions 2 to 6.
var refenceRules = map[FenceState][]FenceState{
	StateIntent:        {StateFencing, StateAborted},
	StateFencing:       {StateFenced, StateFailed, StateUnfenceIntent},
	StateFenced:        {StateTainted, StateUnfenceIntent, StateFencing},
	StateTainted:       {StateEvicted, StateUnfenceIntent, StateFencing},
	StateEvicted:       {StateUnfenceIntent, StateFencing},
	StateUnfenceIntent: {StateRestored, StateFailed},
	StateRestored:      {StateUntainted},
	StateUntainted:     {StateClosed},
	StateFailed:        {StateFencing, StateUnfenceIntent, StateClosed},
	StateClosed:        nil,
	StateAborted:       nil,
}

// RefenceVersion is the group ledger version from which a leader takes a
// tainted or evicted record back to fencing (see rules).
const RefenceVersion = 3

// RescopeVersion is the group ledger version from which a leader records
// a restore scope computed again (Rescope) and restores with it; below it,
// an unfence restores with the scope committed with unfence-intent.
const RescopeVersion = 4

// PauseHoldersVersion is the group ledger version from which a pause is a
// holder of its own (AddPause, EndPauses); below it, a leader writes the
// single pause slot of a cluster or of all (SetPause).
const PauseHoldersVersion = 5

// ConfirmVersion is the group ledger version from which an operator may
// confirm that a fenced node cannot reach an array (ConfirmArray).
const ConfirmVersion = 5

// AbandonVersion is the group ledger version from which an operator may
// abandon the restore of an array confirmed gone (AbandonRestore).
const AbandonVersion = 6

// opState is the state a fence record must be in to record an array op.
var opState = map[ArrayOp]FenceState{
	OpApply:         StateFencing,
	OpVerify:        StateFencing,
	OpUndo:          StateUnfenceIntent,
	OpVerifyRestore: StateUnfenceIntent,
}

// Allowed reports whether a fence record may step from one state to another
// under this build's newest rules (Version). Guards that depend on the
// record (every array verified, pause flags, operator-only steps) are
// checked by Apply on top of this.
func Allowed(from, to FenceState) bool {
	return AllowedIn(Version, from, to)
}

// AllowedIn reports whether a fence record may step from one state to
// another under the rules of ledger version v.
func AllowedIn(v int, from, to FenceState) bool {
	for _, s := range rules[v][from] {
		if s == to {
			return true
		}
	}
	return false
}

// Terminal reports whether a state ends a record (it moves to history).
func Terminal(s FenceState) bool {
	return s == StateClosed || s == StateAborted
}

// Fenced reports whether, in this state, the node may have lost access on
// some array: every state after intent except the terminal ones.
func Fenced(s FenceState) bool {
	return s != StateIntent && !Terminal(s)
}

func knownState(s FenceState) bool {
	_, ok := rules[Version][s]
	return ok
}
