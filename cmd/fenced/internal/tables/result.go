package tables

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/fenced-project/fenced/stonith"
)

// Result writes an action's answer for a person: its message, the
// fence it made or changed, and a dry run's report.
func Result(out io.Writer, res stonith.ActionResult) error {
	line := res.Message
	if res.FenceID != "" {
		line += fmt.Sprintf(" (fence %s, state %s)", res.FenceID, res.State)
	}
	if _, err := fmt.Fprintln(out, line); err != nil {
		return err
	}
	if res.Paused != nil {
		if _, err := fmt.Fprintln(out, stonith.StillPaused(*res.Paused)); err != nil {
			return err
		}
	}
	if res.DryRun != nil {
		b, err := json.MarshalIndent(res.DryRun, "", "  ")
		if err != nil {
			return fmt.Errorf("format dry-run report: %w", err)
		}
		_, err = fmt.Fprintf(out, "dry-run report:\n%s\n", b)
		return err
	}
	return nil
}
