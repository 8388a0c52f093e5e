package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/fenced-project/fenced/cmd/fenced/internal/opclient"
	"github.com/fenced-project/fenced/cmd/fenced/internal/replica"
	"github.com/fenced-project/fenced/cmd/fenced/internal/tables"
	"github.com/fenced-project/fenced/cmd/fenced/status"
)

// Exit codes of `fenced status` besides exitOK, exitFailure (no answer)
// and exitUsage, for monitoring (like `crm_mon -s`).
const (
	// exitNotReady: the replica answers and its group has a leader, but
	// the replica is not ready (a readiness check fails).
	exitNotReady = 3
	// exitNoLeader: the replica answers but knows no Raft leader: nothing
	// is fenced until a quorum of replicas is up and reach each other.
	exitNoLeader = 4
)

type statusFlags struct {
	opclient.EndpointFlags
	output string
}

func newStatusCmd() *cobra.Command {
	var f statusFlags
	cmd := &cobra.Command{
		Use:   "status [--config F | --addr URL] [-o table|json]",
		Short: "Show a replica's status (its /status endpoint)",
		Long: `Show a replica's status: readiness, the Raft group with each peer's
role, reachability and last contact, the pause (who, when, why), the
clusters with their unhealthy and unprotected nodes, fences and arrays.

Only the leader hears every member's heartbeats: asked on a follower, the
command also asks the leader (at its peers[].httpAddress, trusted like the
follower) and shows the members as the leader sees them, so any replica
shows the whole group, a stopped one as down. raft.membersFrom in -o json
names that leader; raft.membersError says why it could not be asked.

On a replica's host, --config with the replica's configuration is enough:
it gives the endpoint (https when the configuration serves TLS) and the CAs
to verify it with.

Exit status: 0 ready, with a leader; 1 no answer (or an error); 2 usage;
3 not ready (the group has a leader); 4 no Raft leader known to the replica.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(f.output); err != nil {
				return err
			}
			e, err := f.Resolve(replica.GroupCAPool)
			if errors.Is(err, fs.ErrPermission) {
				// Not a usage error: the same command works as root.
				return &exitError{code: exitFailure, err: err}
			}
			if err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), f.Timeout)
			defer cancel()
			raw, st, err := e.Status(ctx)
			if err != nil {
				return &exitError{code: exitFailure, err: err}
			}
			if leaderView(ctx, e, &st) {
				if raw, err = json.Marshal(st); err != nil {
					return &exitError{code: exitFailure, err: fmt.Errorf("encode status: %w", err)}
				}
			}
			if f.output == "json" {
				var b bytes.Buffer
				if err := json.Indent(&b, bytes.TrimSpace(raw), "", "  "); err != nil {
					return &exitError{code: exitFailure, err: fmt.Errorf("format status: %w", err)}
				}
				b.WriteByte('\n')
				if _, err := cmd.OutOrStdout().Write(b.Bytes()); err != nil {
					return err
				}
			} else if err := tables.Status(cmd.OutOrStdout(), st, time.Now()); err != nil {
				return err
			}
			return statusExit(st)
		},
	}
	f.Register(cmd, 10*time.Second)
	registerOutput(cmd, &f.output)
	return cmd
}

// statusExit maps a status document to the command's exit status.
func statusExit(st status.Status) error {
	if st.Raft != nil && st.Raft.LeaderID == "" {
		return &exitError{code: exitNoLeader, err: fmt.Errorf("replica %s knows no Raft leader", st.ReplicaID)}
	}
	if !st.Ready {
		return &exitError{code: exitNotReady, err: fmt.Errorf("replica %s is not ready", st.ReplicaID)}
	}
	return nil
}

// leaderView fills a follower's member table with the leader's view of
// every member's reachability and last contact, asking the leader at the
// HTTP address the follower knows it by, with the same client. It reports
// whether it changed st.
func leaderView(ctx context.Context, e *opclient.Endpoint, st *status.Status) bool {
	r := st.Raft
	if r == nil || r.State == "Leader" || r.LeaderID == "" {
		return false
	}
	addr := ""
	for _, m := range r.Members {
		if m.ID == r.LeaderID {
			addr = m.HTTPAddress
		}
	}
	if addr == "" {
		r.MembersError = fmt.Sprintf("the HTTP address of the leader %s is not configured on %s (peers[].httpAddress)", r.LeaderID, st.ReplicaID)
		return true
	}
	leader := *e
	leader.Base = strings.TrimSuffix(addr, "/")
	_, lst, err := leader.Status(ctx)
	switch {
	case err != nil:
		r.MembersError = err.Error()
		return true
	case lst.Raft == nil || lst.Raft.State != "Leader" || lst.ReplicaID != r.LeaderID:
		r.MembersError = fmt.Sprintf("%s answered but is not the leader %s any more", leader.Base, r.LeaderID)
		return true
	}
	seen := map[string]status.RaftMember{}
	for _, m := range lst.Raft.Members {
		seen[m.ID] = m
	}
	for i := range r.Members {
		m := &r.Members[i]
		lm, ok := seen[m.ID]
		switch {
		case m.Self:
			// It answered this command.
		case m.ID == r.LeaderID:
			up := true
			m.Reachable, m.LastContact = &up, nil
		case ok:
			m.Reachable, m.LastContact = lm.Reachable, lm.LastContact
		}
	}
	r.MembersFrom = r.LeaderID
	return true
}
