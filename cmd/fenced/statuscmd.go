package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/fenced-project/fenced/cmd/fenced/status"
)

// defaultAddr is the HTTP endpoint the operator commands call by default:
// the default http.listen.
const defaultAddr = "http://127.0.0.1:7440"

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
	endpointFlags
	output string
}

func newStatusCmd() *cobra.Command {
	var f statusFlags
	cmd := &cobra.Command{
		Use:   "status [--config F | --addr URL] [-o table|json]",
		Short: "Show a replica's status (its /status endpoint)",
		Long: `Show a replica's status: readiness, the Raft group with each peer's
reachability and last contact, the pause (who, when, why), the clusters
with their unhealthy and unprotected nodes, fences and arrays.

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
			e, err := f.resolve()
			if err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
			defer cancel()
			raw, st, err := fetchStatus(ctx, e)
			if err != nil {
				return &exitError{code: exitFailure, err: err}
			}
			if f.output == "json" {
				var b bytes.Buffer
				if err := json.Indent(&b, raw, "", "  "); err != nil {
					return &exitError{code: exitFailure, err: fmt.Errorf("format status: %w", err)}
				}
				b.WriteByte('\n')
				if _, err := cmd.OutOrStdout().Write(b.Bytes()); err != nil {
					return err
				}
			} else if err := writeTable(cmd.OutOrStdout(), st, time.Now()); err != nil {
				return err
			}
			return statusExit(st)
		},
	}
	f.register(cmd, 10*time.Second)
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

// fetchStatus GETs /status and decodes it.
func fetchStatus(ctx context.Context, e *endpoint) ([]byte, status.Status, error) {
	var st status.Status
	url := e.base + "/status"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, st, fmt.Errorf("status from %s: %w", url, err)
	}
	resp, err := e.http.Do(req)
	if err != nil {
		return nil, st, fmt.Errorf("status from %s: %w", e.base, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, st, fmt.Errorf("read status from %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		hint := ""
		if resp.StatusCode == http.StatusBadRequest && e.base[:5] == "http:" {
			hint = " (an HTTPS endpoint? use https://, or --config)"
		}
		return nil, st, fmt.Errorf("status from %s: %s%s", url, resp.Status, hint)
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		return nil, st, fmt.Errorf("decode status from %s: %w", url, err)
	}
	return raw, st, nil
}
