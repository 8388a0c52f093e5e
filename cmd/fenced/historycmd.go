package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/fenced-project/fenced/cluster/ledger"
	"github.com/fenced-project/fenced/cmd/fenced/internal/replica"
	"github.com/fenced-project/fenced/cmd/fenced/status"
)

// maxHistoryLimit bounds the limit parameter of the history.
const maxHistoryLimit = 10000

// historyHandler serves status.History from the replica's ledger.
func historyHandler(replicaID string, l *ledger.FSM) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		cluster, node := q.Get("cluster"), q.Get("node")
		limit := 0
		if v := q.Get("limit"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || n > maxHistoryLimit {
				http.Error(w, fmt.Sprintf("limit %q: want 0 to %d", v, maxHistoryLimit), http.StatusBadRequest)
				return
			}
			limit = n
		}
		h := readHistory(l, cluster, node, limit)
		h.ReplicaID = replicaID
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(h)
	})
}

// readHistory lists the ledger's finished records, newest first, of one
// cluster and node when given; limit 0 means all.
func readHistory(l *ledger.FSM, cluster, node string, limit int) status.History {
	h := status.History{Fences: []status.Fence{}}
	var recs []*ledger.Fence
	l.Read(func(s *ledger.State) {
		h.AppliedIndex = s.Index
		for name, c := range s.Clusters {
			if cluster != "" && name != cluster {
				continue
			}
			for nname, n := range c.Nodes {
				if node != "" && nname != node {
					continue
				}
				recs = append(recs, n.History...)
			}
		}
		for _, f := range recs {
			e := replica.FinishedFence(f)
			for _, st := range f.Steps {
				e.Steps = append(e.Steps, status.FenceStep{To: string(st.To), At: st.At, By: st.By,
					Operator: st.Operator, Note: st.Note, Forced: st.Forced})
			}
			h.Fences = append(h.Fences, e)
		}
	})
	slices.SortStableFunc(h.Fences, func(a, b status.Fence) int {
		if c := b.UpdatedAt.Compare(a.UpdatedAt); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	if limit > 0 && len(h.Fences) > limit {
		h.Fences = h.Fences[:limit]
	}
	return h
}

func newHistoryCmd() *cobra.Command {
	var (
		f             endpointFlags
		output        string
		cluster, node string
		limit         int
	)
	cmd := &cobra.Command{
		Use:   "history [--cluster C] [--node N] [--limit N] [-o table|json]",
		Short: "List finished fences from the ledger",
		Long: `List the ledger's finished fence records, newest first: fences closed
after their node was restored, and fences aborted before any array changed,
with who asked, why, and who asked for the unfence. The ledger keeps the
last ` + strconv.Itoa(ledger.MaxHistory) + ` records of each node; fences in progress are in
` + "`fenced status`" + `. Any replica answers from its copy of the ledger.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			if limit < 0 || limit > maxHistoryLimit {
				return &exitError{code: exitUsage, err: fmt.Errorf("--limit %d: want 0 to %d", limit, maxHistoryLimit)}
			}
			e, err := f.resolve()
			if err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
			defer cancel()
			h, err := fetchHistory(ctx, e, cluster, node, limit)
			if err != nil {
				return &exitError{code: exitFailure, err: err}
			}
			if output == "json" {
				return writeJSON(cmd.OutOrStdout(), h)
			}
			return writeHistory(cmd.OutOrStdout(), h)
		},
	}
	f.register(cmd, 10*time.Second)
	registerOutput(cmd, &output)
	cmd.Flags().StringVar(&cluster, "cluster", "", "only this cluster's fences")
	cmd.Flags().StringVar(&node, "node", "", "only this node's fences")
	cmd.Flags().IntVar(&limit, "limit", 0, "at most this many, the newest (0: all)")
	return cmd
}

// fetchHistory GETs the history.
func fetchHistory(ctx context.Context, e *endpoint, cluster, node string, limit int) (status.History, error) {
	var h status.History
	q := url.Values{}
	for k, v := range map[string]string{"cluster": cluster, "node": node} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	u := e.base + status.HistoryPath
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return h, fmt.Errorf("history from %s: %w", e.base, err)
	}
	resp, err := e.http.Do(req)
	if err != nil {
		return h, fmt.Errorf("history from %s: %w", e.base, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return h, fmt.Errorf("read history from %s: %w", e.base, err)
	}
	if resp.StatusCode != http.StatusOK {
		return h, fmt.Errorf("history from %s: %s: %s", e.base, resp.Status, strings.TrimSpace(string(raw)))
	}
	if err := json.Unmarshal(raw, &h); err != nil {
		return h, fmt.Errorf("decode history from %s: %w", e.base, err)
	}
	return h, nil
}

// writeHistory renders the history as a table.
func writeHistory(out io.Writer, h status.History) error {
	if len(h.Fences) == 0 {
		_, err := fmt.Fprintf(out, "No finished fence in the ledger of %s.\n", h.ReplicaID)
		return err
	}
	rows := [][]string{{"FENCE", "CLUSTER", "NODE", "KIND", "BY", "OUTCOME", "OPENED", "FINISHED", "UNFENCED BY", "REASON"}}
	for _, f := range h.Fences {
		by := f.Origin
		if f.Operator != "" {
			by += ":" + f.Operator
		}
		unfenced := f.UnfenceOperator
		if f.ForcedUnfence {
			unfenced += " (forced)"
		}
		reason := f.Reason
		if f.Error != "" {
			reason += " (" + f.Error + ")"
		}
		rows = append(rows, []string{f.ID, f.Cluster, f.Node, dash(f.Kind), dash(by), f.Phase,
			f.StartedAt.Local().Format(time.RFC3339), f.UpdatedAt.Local().Format(time.RFC3339),
			dash(strings.TrimSpace(unfenced)), dash(reason)})
	}
	table(out, rows)
	return nil
}
