package main

import (
	"context"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/fenced-project/fenced/cmd/fenced/internal/opclient"
	"github.com/fenced-project/fenced/cmd/fenced/internal/replica"
	"github.com/fenced-project/fenced/cmd/fenced/status"
)

// nodeCompletionTimeout bounds the status call behind a node name
// completion: a shell waits on it at every TAB.
const nodeCompletionTimeout = 2 * time.Second

// nodeChoice says which nodes a command's NODE argument completes to.
type nodeChoice int

const (
	// anyKnownNode: the nodes the replica reports, unhealthy, unprotected
	// or fenced (fence).
	anyKnownNode nodeChoice = iota
	// fencedNode: the nodes of fences not yet closed, and the nodes whose
	// verdict is fenced or needs-reboot (unfence, confirm).
	fencedNode
)

// completeNodes completes a command's NODE argument with the node names
// of the replica's /status, asked with the endpoint and credentials the
// command itself would use, of the --cluster given (every cluster when
// none). Completion never prints an error and never waits long: on any
// failure it offers nothing.
func completeNodes(f *opclient.EndpointFlags, choice nodeChoice) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		cluster := ""
		if fl := cmd.Flags().Lookup("cluster"); fl != nil {
			cluster = fl.Value.String()
		}
		e, err := f.Resolve(replica.GroupCAPool)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		timeout := min(f.Timeout, nodeCompletionTimeout)
		if timeout <= 0 {
			timeout = nodeCompletionTimeout
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
		defer cancel()
		_, st, err := e.Status(ctx)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return knownNodes(st, cluster, choice), cobra.ShellCompDirectiveNoFileComp
	}
}

// knownNodes names, sorted and once each, the nodes of st that choice
// selects, of cluster only unless it is empty.
func knownNodes(st status.Status, cluster string, choice nodeChoice) []string {
	var out []string
	for _, fc := range st.Fences {
		if (cluster == "" || fc.Cluster == cluster) && fc.Phase != "closed" && fc.Phase != "aborted" {
			out = append(out, fc.Node)
		}
	}
	for _, c := range st.Clusters {
		if cluster != "" && c.Name != cluster {
			continue
		}
		for _, n := range c.Unhealthy {
			if choice == anyKnownNode || n.Verdict == "fenced" || n.Verdict == "needs-reboot" {
				out = append(out, n.Name)
			}
		}
		if choice == anyKnownNode {
			for _, n := range c.Unprotected {
				out = append(out, n.Name)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// ptr returns a pointer to v.
func ptr[T any](v T) *T { return &v }
