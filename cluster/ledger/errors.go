package ledger

import "errors"

// Errors returned by Apply (wrapped with the command and the details). The
// same command applied to the same state fails with the same error on every
// replica.
var (
	// ErrInvalid means the command does not decode or a field is missing or
	// out of range.
	ErrInvalid = errors.New("invalid command")
	// ErrUnknownType means the type byte is unknown and not ignorable.
	ErrUnknownType = errors.New("unknown command type")
	// ErrUnsupportedVersion means the body's version is newer than this
	// ledger understands.
	ErrUnsupportedVersion = errors.New("unsupported command version")
	// ErrStaleTerm means the command was composed under another term than
	// the one of the log entry carrying it: its writer is no longer the
	// leader it was when it decided.
	ErrStaleTerm = errors.New("stale term")
	// ErrConflict means the compare-and-set failed: the fence is not in the
	// state the command expects, or another fence is open.
	ErrConflict = errors.New("conflict")
	// ErrNotFound means the named node or fence does not exist.
	ErrNotFound = errors.New("not found")
	// ErrBadTransition means the step is not allowed from the current state,
	// or its guard does not hold (e.g. fenced without every array verified).
	ErrBadTransition = errors.New("step not allowed")
	// ErrHalted means this replica met a committed entry it cannot apply
	// and applies nothing more (see Halt).
	ErrHalted = errors.New("ledger halted")
	// ErrPaused means fencing is paused for the node's cluster or globally.
	ErrPaused = errors.New("fencing is paused")
)
