package ledger

// allowed lists the steps a fence record may take. A fence goes back to
// fencing from fenced, tainted or evicted when Kubernetes attached a volume
// to the node after the fence read its footprint (a refence): the new
// volume is cut and read back before the next taint or eviction.
var allowed = map[FenceState][]FenceState{
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

// opState is the state a fence record must be in to record an array op.
var opState = map[ArrayOp]FenceState{
	OpApply:         StateFencing,
	OpVerify:        StateFencing,
	OpUndo:          StateUnfenceIntent,
	OpVerifyRestore: StateUnfenceIntent,
}

// Allowed reports whether a fence record may step from one state to another.
// Guards that depend on the record (every array verified, pause flags,
// operator-only steps) are checked by Apply on top of this.
func Allowed(from, to FenceState) bool {
	for _, s := range allowed[from] {
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
	_, ok := allowed[s]
	return ok
}
