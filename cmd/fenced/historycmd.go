package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/fenced-project/fenced/cluster/ledger"
	"github.com/fenced-project/fenced/cmd/fenced/internal/opclient"
	"github.com/fenced-project/fenced/cmd/fenced/internal/replica"
	"github.com/fenced-project/fenced/cmd/fenced/internal/tables"
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
		f             opclient.EndpointFlags
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
			e, err := f.Resolve(replica.GroupCAPool)
			if err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), f.Timeout)
			defer cancel()
			h, err := e.History(ctx, cluster, node, limit)
			if err != nil {
				return &exitError{code: exitFailure, err: err}
			}
			if output == "json" {
				return writeJSON(cmd.OutOrStdout(), h)
			}
			return tables.History(cmd.OutOrStdout(), h)
		},
	}
	f.Register(cmd, 10*time.Second)
	registerOutput(cmd, &output)
	cmd.Flags().StringVar(&cluster, "cluster", "", "only this cluster's fences")
	cmd.Flags().StringVar(&node, "node", "", "only this node's fences")
	cmd.Flags().IntVar(&limit, "limit", 0, "at most this many, the newest (0: all)")
	return cmd
}
