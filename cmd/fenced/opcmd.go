package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/fenced-project/fenced/cmd/fenced/internal/opclient"
	"github.com/fenced-project/fenced/cmd/fenced/internal/replica"
	"github.com/fenced-project/fenced/cmd/fenced/internal/tables"
	"github.com/fenced-project/fenced/stonith"
)

// registerOutput adds -o table|json.
func registerOutput(cmd *cobra.Command, out *string) {
	cmd.Flags().StringVarP(out, "output", "o", "table", "table or json")
}

// checkOutput refuses an -o other than table or json.
func checkOutput(out string) error {
	if out != "table" && out != "json" {
		return &exitError{code: exitUsage, err: fmt.Errorf("-o %q: want table or json", out)}
	}
	return nil
}

// writeJSON writes v indented, with a final newline.
func writeJSON(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// opCommand builds one operator command around call.
// A command whose argument is a node (nodes non-nil) completes it with
// the node names nodes selects (see completeNodes).
func opCommand(use, short, long string, args cobra.PositionalArgs, nodes *nodeChoice, setup func(*cobra.Command),
	call func(ctx context.Context, c *stonith.Client, args []string) (stonith.ActionResult, error)) *cobra.Command {
	var f opclient.OpFlags
	cmd := &cobra.Command{
		Use: use, Short: short, Long: long, Args: args,
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
			res, err := call(ctx, c, args)
			if err != nil {
				return &exitError{code: exitFailure, err: opclient.APIError(c.BaseURL, c.Token != "" || f.CertFile != "", err)}
			}
			if f.Output == "json" {
				return writeJSON(cmd.OutOrStdout(), res)
			}
			return tables.Result(cmd.OutOrStdout(), res)
		},
	}
	f.Register(cmd)
	registerOutput(cmd, &f.Output)
	if nodes != nil {
		cmd.ValidArgsFunction = completeNodes(&f.EndpointFlags, *nodes)
	}
	if setup != nil {
		setup(cmd)
	}
	return cmd
}

func newFenceCmd() *cobra.Command {
	var cluster, reason string
	return opCommand("fence NODE --cluster C --reason R", "Fence a node now",
		`Fence a node at every array where it has an identity, then taint it and
force-delete its StatefulSet pods, as for a failed node. Allowed while
fencing is paused. Any replica accepts the call; followers forward it to
the leader.`,
		cobra.ExactArgs(1), ptr(anyKnownNode), func(cmd *cobra.Command) {
			cmd.Flags().StringVar(&cluster, "cluster", "", "the node's cluster (required)")
			cmd.Flags().StringVar(&reason, "reason", "", "why, recorded in the ledger (required)")
			_ = cmd.MarkFlagRequired("cluster")
			_ = cmd.MarkFlagRequired("reason")
		},
		func(ctx context.Context, c *stonith.Client, args []string) (stonith.ActionResult, error) {
			return c.Fence(ctx, stonith.FenceRequest{Cluster: cluster, Node: args[0], Reason: reason})
		})
}

func newUnfenceCmd() *cobra.Command {
	var cluster, reason, abandon string
	var force, unverified, yes bool
	cmd := opCommand("unfence NODE --cluster C [--force [--unverified]] [--yes] [--reason R] | --abandon-array A --reason R --yes", "Restore a fenced node",
		`Restore a fenced node's array access and remove its taints. Without
--force the node must have rebooted since the fence (new boot ID) and no pod
from before the fence may still run there.

--force skips these checks; it asks for confirmation unless --yes is given,
and is still refused when the API server cannot be read (the node and its
pods are read first) unless --unverified is given too. The ledger records a
forced unfence as such.

--abandon-array A is the way out of an unfence that waits for an array
that is gone for good: it is allowed only while the unfence waits in
unfence-intent, for an array of the fence's plan that an operator confirmed
gone for this fence (fenced confirm --array A) and whose restore was not
read back. The unfence then finishes without restoring A and records A as
not restored, with who and why. fenced never writes to A for it: if A
comes back, the node has no access there until the CSI driver publishes
its volumes to the node again. Needs --yes and a --reason.`,
		cobra.ExactArgs(1), ptr(fencedNode), func(cmd *cobra.Command) {
			cmd.Flags().StringVar(&cluster, "cluster", "", "the node's cluster (required)")
			cmd.Flags().StringVar(&reason, "reason", "operator unfence", "why, recorded in the ledger")
			cmd.Flags().BoolVar(&force, "force", false, "skip the reboot and stale-pod checks")
			cmd.Flags().BoolVar(&unverified, "unverified", false, "with --force: go ahead even when the API server cannot be read")
			cmd.Flags().BoolVar(&yes, "yes", false, "with --force: do not ask for confirmation; with --abandon-array: required")
			cmd.Flags().StringVar(&abandon, "abandon-array", "", "finish the unfence without restoring this array, confirmed gone for the fence")
			cmd.MarkFlagsMutuallyExclusive("abandon-array", "force")
			_ = cmd.MarkFlagRequired("cluster")
		},
		func(ctx context.Context, c *stonith.Client, args []string) (stonith.ActionResult, error) {
			if abandon != "" {
				return c.Abandon(ctx, stonith.AbandonRequest{Cluster: cluster, Node: args[0], Array: abandon, Reason: reason})
			}
			return c.Unfence(ctx, stonith.UnfenceRequest{Cluster: cluster, Node: args[0], Reason: reason, Force: force, Unverified: unverified})
		})
	call := cmd.RunE
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if unverified && !force {
			return &exitError{code: exitUsage, err: errors.New("--unverified goes with --force")}
		}
		if abandon != "" {
			if !cmd.Flags().Changed("reason") {
				return &exitError{code: exitUsage, err: errors.New("--abandon-array needs --reason: say why the array never comes back")}
			}
			if !yes {
				return &exitError{code: exitUsage, err: errors.New("--abandon-array finishes the unfence without giving access back on that array: run it with --yes once you checked the array is gone for good")}
			}
		}
		if force {
			prompt := fmt.Sprintf("Force-unfence %s in cluster %s: its array access comes back WITHOUT checking that it rebooted and runs none of its old pods.", args[0], cluster)
			if unverified {
				prompt += " The API server need not be readable (--unverified)."
			}
			if err := confirm(cmd.InOrStdin(), cmd.ErrOrStderr(), prompt, yes); err != nil {
				return err
			}
		}
		return call(cmd, args)
	}
	return cmd
}

func newPauseCmd() *cobra.Command {
	var cluster, reason string
	return opCommand("pause [--cluster C] --reason R", "Pause fencing (one cluster, or all)",
		`Pause fencing on verdicts, for one cluster or for all, e.g. during an
array upgrade. Fences already applied stay; recoveries and operator fences
go on.

Every pause is held by its caller: two operators' pauses are two pauses,
and fencing stays paused until both end. Pausing the same scope again
updates the reason of your pause (its start time stays). The answer lists
every pause in effect.`,
		cobra.NoArgs, nil, func(cmd *cobra.Command) {
			cmd.Flags().StringVar(&cluster, "cluster", "", "the cluster to pause (default: all)")
			cmd.Flags().StringVar(&reason, "reason", "", "why, recorded in the ledger (required)")
			_ = cmd.MarkFlagRequired("reason")
		},
		func(ctx context.Context, c *stonith.Client, _ []string) (stonith.ActionResult, error) {
			return c.Pause(ctx, stonith.PauseRequest{Cluster: cluster, Reason: reason})
		})
}

func newResumeCmd() *cobra.Command {
	var cluster, reason, id, heldBy string
	var all bool
	cmd := opCommand("resume [--cluster C] [--id ID | --held-by NAME | --all]", "End pauses of fencing",
		`End your own pauses (of --cluster C only, when given), or the pause --id
names, or every pause --held-by NAME holds (as fenced status names it), or with --all every pause (of --cluster
C only, when given). Pauses of others stay. The answer lists every pause
still in effect; fenced status shows them too.`,
		cobra.NoArgs, nil, func(cmd *cobra.Command) {
			cmd.Flags().StringVar(&cluster, "cluster", "", "only pauses of this cluster")
			cmd.Flags().StringVar(&reason, "reason", "operator resume", "why, recorded in the ledger")
			cmd.Flags().StringVar(&id, "id", "", "end the pause with this ID (see fenced status)")
			cmd.Flags().StringVar(&heldBy, "held-by", "", "end every pause this operator holds (e.g. token/alice)")
			cmd.Flags().BoolVar(&all, "all", false, "end every pause")
			cmd.MarkFlagsMutuallyExclusive("id", "held-by", "all")
			cmd.MarkFlagsMutuallyExclusive("id", "cluster")
		},
		func(ctx context.Context, c *stonith.Client, _ []string) (stonith.ActionResult, error) {
			return c.Resume(ctx, stonith.PauseRequest{Cluster: cluster, Reason: reason, ID: id, HeldBy: heldBy, All: all})
		})
	return cmd
}

func newConfirmCmd() *cobra.Command {
	var cluster, array, reason string
	var poweredOff, yes bool
	cmd := opCommand("confirm NODE --cluster C (--array A | --powered-off) --reason R --yes", "Attest that a fenced node cannot write to an array",
		`Attest, as pcs stonith confirm does, that the node of an open fence cannot
write to array A (the array is gone for good), or with --powered-off that
the node is powered off. fenced then counts that array's cut as verified
for this fence only and goes on to taint the node and delete its pods.

fenced cannot check what you attest. If the node can still write to the
array, its old pods and their replacements write the same volumes: data
corruption. Confirm only what you checked yourself (the array is
destroyed or disconnected; the node's power is off at the PDU or BMC).

The ledger records who, when and why; fenced logs it at WARN and records
an Event on the node. A later read-back of the array that shows the
node's access voids the confirmation. Needs --yes and a reason.

The node's unfence gives access back on the other arrays but finishes only
once the confirmed array answers again (a cut of the fence may still be in
place there): until then the node stays fenced, and fenced status says so.`,
		cobra.ExactArgs(1), ptr(fencedNode), func(cmd *cobra.Command) {
			cmd.Flags().StringVar(&cluster, "cluster", "", "the node's cluster (required)")
			cmd.Flags().StringVar(&array, "array", "", "the array the node cannot write to")
			cmd.Flags().BoolVar(&poweredOff, "powered-off", false, "the node is powered off (every array, unless --array)")
			cmd.Flags().StringVar(&reason, "reason", "", "what you checked, recorded in the ledger (required)")
			cmd.Flags().BoolVar(&yes, "yes", false, "confirm that you checked it (required)")
			_ = cmd.MarkFlagRequired("cluster")
			_ = cmd.MarkFlagRequired("reason")
		},
		func(ctx context.Context, c *stonith.Client, args []string) (stonith.ActionResult, error) {
			return c.Confirm(ctx, stonith.ConfirmRequest{Cluster: cluster, Node: args[0], Array: array,
				PoweredOff: poweredOff, Reason: reason})
		})
	call := cmd.RunE
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if array == "" && !poweredOff {
			return &exitError{code: exitUsage, err: errors.New("give --array A, or --powered-off")}
		}
		if !yes {
			return &exitError{code: exitUsage, err: errors.New("confirm attests what fenced cannot check: run it with --yes once you checked it yourself")}
		}
		return call(cmd, args)
	}
	return cmd
}
