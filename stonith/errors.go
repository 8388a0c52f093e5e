package stonith

import "errors"

// Sentinel errors of the package, wrapped with what was being done.
var (
	// ErrNotLeader means this replica does not lead (or stopped leading):
	// nothing was written. The API answers 503 and the forwarding layer
	// should have sent the call to the leader.
	ErrNotLeader = errors.New("this replica is not the leader")
	// ErrUnknownCluster names a cluster that is not configured.
	ErrUnknownCluster = errors.New("unknown cluster")
	// ErrRefused means a guard refuses the action (API server unreachable,
	// paused, dry-run, storm, node not rebooted, ...). The message says which.
	ErrRefused = errors.New("refused")
	// ErrConflict means the node's fence record is not in a state that
	// allows the action.
	ErrConflict = errors.New("conflict")
	// ErrBadRequest means a field of the request is missing or invalid.
	ErrBadRequest = errors.New("bad request")
	// ErrLedgerVersion means the step needs a ledger version the group
	// does not run yet (a voter runs an older build).
	ErrLedgerVersion = errors.New("ledger version not run by the group")
	// errStopped is returned when a test hook stopped the pipeline.
	errStopped = errors.New("stopped by hook")
)
