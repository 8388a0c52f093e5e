package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/fenced-project/fenced/cluster/ledger"
	"github.com/fenced-project/fenced/cmd/fenced/internal/opclient"
	"github.com/fenced-project/fenced/cmd/fenced/internal/replica"
	"github.com/fenced-project/fenced/cmd/fenced/internal/tables"
)

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
			if limit < 0 || limit > replica.MaxHistoryLimit {
				return &exitError{code: exitUsage, err: fmt.Errorf("--limit %d: want 0 to %d", limit, replica.MaxHistoryLimit)}
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
	_ = cmd.RegisterFlagCompletionFunc("node", completeNodes(&f, anyKnownNode))
	cmd.Flags().IntVar(&limit, "limit", 0, "at most this many, the newest (0: all)")
	return cmd
}
