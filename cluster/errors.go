package cluster

import (
	"errors"
	"fmt"

	"github.com/hashicorp/raft"
)

// Errors of the cluster package. Ledger refusals are the ledger package's
// errors (ledger.ErrConflict, ledger.ErrStaleTerm, ...), wrapped.
var (
	// ErrNotLeader means this replica is not the leader (or stopped being
	// it); nothing was written. Retry on the leader (LeaderHTTP) or after
	// the next election.
	ErrNotLeader = errors.New("not the raft leader")
	// ErrLeadershipLost means leadership was lost while the command was in
	// flight: it may or may not have been committed. It wraps ErrNotLeader.
	// Re-read the ledger under the next leadership before deciding again.
	ErrLeadershipLost = fmt.Errorf("%w: leadership lost while committing; outcome unknown", ErrNotLeader)
	// ErrTooLarge means a forwarded request's body is over the limit.
	ErrTooLarge = errors.New("request body too large")
	// ErrNoLeader means no leader was known within the forwarding wait.
	ErrNoLeader = errors.New("no raft leader")
	// ErrTimeout means Raft did not accept the command in time.
	ErrTimeout = errors.New("raft timed out")
	// ErrShutdown means the replica is shutting down.
	ErrShutdown = errors.New("raft is shut down")
	// ErrPlainHTTPCredential means a request carrying a credential (an
	// Authorization header or a cookie) would have gone to a peer over
	// plain HTTP on a non-loopback address; it was not sent. Give the
	// peers https:// HTTP addresses (http.tls) or use client certificates.
	ErrPlainHTTPCredential = errors.New("refusing to send a credential over plain HTTP")
)

// mapRaftErr turns hashicorp/raft errors into this package's.
func mapRaftErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrNotLeader):
		return ErrNotLeader
	case errors.Is(err, raft.ErrLeadershipLost), errors.Is(err, raft.ErrLeadershipTransferInProgress),
		errors.Is(err, raft.ErrAbortedByRestore):
		return fmt.Errorf("%w (%w)", ErrLeadershipLost, err)
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return ErrTimeout
	case errors.Is(err, raft.ErrRaftShutdown):
		return ErrShutdown
	}
	return err
}

func isErr(err, target error) bool { return errors.Is(err, target) }
