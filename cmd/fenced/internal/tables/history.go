package tables

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/fenced-project/fenced/cmd/fenced/status"
)

// History renders the fence history as a table.
func History(out io.Writer, h status.History) error {
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
