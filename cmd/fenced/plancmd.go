package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/fenced-project/fenced/cmd/fenced/internal/opclient"
	"github.com/fenced-project/fenced/cmd/fenced/internal/replica"
	"github.com/fenced-project/fenced/cmd/fenced/internal/tables"
	"github.com/fenced-project/fenced/stonith"
)

// newPlanCmd is `fenced plan NODE --cluster C`: what a fence of the node
// would cut now, and every gap.
func newPlanCmd() *cobra.Command {
	var (
		f       opclient.OpFlags
		cluster string
	)
	cmd := &cobra.Command{
		Use:   "plan NODE --cluster C [-o json]",
		Short: "Show what a fence of a node would cut, and whether the node is protected",
		Long: `Read, without writing anything, what fencing the node would cut if it failed
now: every volume Kubernetes has attached or is attaching to it, the array
each is on, the cut that removes the node's access there, and every gap
(a volume fenced cannot cut, with the reason). A node with a gap is
unprotected: fenced never fences, taints or evicts it. Any replica answers
from its own view; the arrays are only read. Exit status 0 when the node is
protected, 1 when it is not (or on error).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(f.Output); err != nil {
				return err
			}
			c, err := f.Client(replica.GroupCAPool)
			if err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), f.Timeout)
			defer cancel()
			p, err := c.Plan(ctx, stonith.PlanRequest{Cluster: cluster, Node: args[0]})
			if err != nil {
				return &exitError{code: exitFailure, err: opclient.APIError(c.BaseURL, c.Token != "" || f.CertFile != "", err)}
			}
			out := cmd.OutOrStdout()
			if f.Output == "json" {
				if err := writeJSON(out, p); err != nil {
					return err
				}
			} else if err := tables.Plan(out, p); err != nil {
				return err
			}
			if !p.Protected {
				return &exitError{code: exitFailure, err: fmt.Errorf("node %s of cluster %s is not protected", p.Node, p.Cluster)}
			}
			return nil
		},
	}
	f.Register(cmd)
	cmd.ValidArgsFunction = completeNodes(&f.EndpointFlags, anyKnownNode)
	cmd.Flags().StringVar(&cluster, "cluster", "", "the node's cluster (required)")
	registerOutput(cmd, &f.Output)
	_ = cmd.MarkFlagRequired("cluster")
	return cmd
}
