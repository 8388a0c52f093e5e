package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/fenced-project/fenced/stonith"
)

// newPlanCmd is `fenced plan NODE --cluster C`: what a fence of the node
// would cut now, and every gap.
func newPlanCmd() *cobra.Command {
	var (
		f       opFlags
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
			if err := checkOutput(f.output); err != nil {
				return err
			}
			c, err := f.client()
			if err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
			defer cancel()
			p, err := c.Plan(ctx, stonith.PlanRequest{Cluster: cluster, Node: args[0]})
			if err != nil {
				return &exitError{code: exitFailure, err: apiError(c.BaseURL, err)}
			}
			out := cmd.OutOrStdout()
			if f.output == "json" {
				if err := writeJSON(out, p); err != nil {
					return err
				}
			} else if err := writePlan(out, p); err != nil {
				return err
			}
			if !p.Protected {
				return &exitError{code: exitFailure, err: fmt.Errorf("node %s of cluster %s is not protected", p.Node, p.Cluster)}
			}
			return nil
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&cluster, "cluster", "", "the node's cluster (required)")
	registerOutput(cmd, &f.output)
	_ = cmd.MarkFlagRequired("cluster")
	return cmd
}

// writePlan renders a NodePlan as tables.
func writePlan(out io.Writer, p stonith.NodePlan) error {
	verdict := "PROTECTED: a fence would cut every volume and prove it by read-back"
	if !p.Protected {
		verdict = "UNPROTECTED: fenced would not fence, taint or evict this node"
	}
	fmt.Fprintf(out, "Node %s (cluster %s): %s\n", p.Node, p.Cluster, verdict)
	fmt.Fprintf(out, "Read at %s", p.ReadAt.Local().Format(time.RFC3339))
	if p.OpenFence != "" {
		fmt.Fprintf(out, "; open fence %s (its record holds the footprint being fenced)", p.OpenFence)
	}
	fmt.Fprintln(out)

	cuts := map[string]map[string]string{} // volume -> array -> cut
	for _, a := range p.Arrays {
		for _, v := range a.Volumes {
			if cuts[v.Volume] == nil {
				cuts[v.Volume] = map[string]string{}
			}
			c := string(v.Cut)
			if v.Gap != nil {
				c = "gap: " + string(v.Gap.Reason)
			}
			if len(v.Holders) > 0 {
				c += " (also given to " + strings.Join(v.Holders, ",") + ")"
			}
			cuts[v.Volume][a.Array] = c
		}
	}
	rows := [][]string{{"VOLUME", "DRIVER", "HANDLE", "ATTACHED", "ARRAY", "CUT"}}
	for _, v := range p.Footprint {
		attached := yesNo(v.Attached)
		if len(v.Placements) == 0 {
			cut := "-"
			if v.Gap != nil {
				cut = "gap: " + string(v.Gap.Reason)
			}
			rows = append(rows, []string{v.PV, dash(v.Driver), dash(v.Handle), attached, "-", cut})
			continue
		}
		for _, pl := range v.Placements {
			cut := cuts[v.PV][pl.Array]
			if cut == "" {
				cut = "-"
			}
			rows = append(rows, []string{v.PV, v.Driver, v.Handle, attached, pl.Array, cut})
		}
	}
	if len(p.Footprint) == 0 {
		fmt.Fprintln(out, "\nNo volume is attached or attaching to the node.")
	} else {
		section(out, "Footprint", rows)
	}
	if len(p.Arrays) > 0 {
		rows := [][]string{{"ARRAY", "IDENTITY", "A FENCE WOULD REMOVE"}}
		for _, a := range p.Arrays {
			what := a.Summary
			if a.Error != "" {
				what = "not read: " + a.Error
			}
			rows = append(rows, []string{a.Array, dash(a.Identity), dash(what)})
		}
		section(out, "Arrays", rows)
	}
	if len(p.Gaps) > 0 {
		rows := [][]string{{"VOLUME", "ARRAY", "GAP", "DETAIL"}}
		for _, g := range p.Gaps {
			rows = append(rows, []string{dash(g.Volume), dash(g.Array), string(g.Reason), dash(g.Detail)})
		}
		section(out, "Gaps (see docs/footprint.md for what to do)", rows)
	}
	return nil
}
