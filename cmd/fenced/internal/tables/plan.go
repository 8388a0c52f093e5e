package tables

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/fenced-project/fenced/stonith"
)

// Plan renders a node's fence plan as tables: the verdict, the
// footprint with each volume's cut, the arrays and the gaps.
func Plan(out io.Writer, p stonith.NodePlan) error {
	verdict := "PROTECTED: a fence would cut every volume and prove it by read-back"
	if !p.Protected {
		verdict = "UNPROTECTED: fenced would not fence, taint or evict this node"
		unread := slices.ContainsFunc(p.Arrays, func(a stonith.ArrayPlan) bool { return a.Error != "" })
		if len(p.Gaps) > 0 && !unread && !slices.ContainsFunc(p.Gaps, func(g stonith.VolumeGap) bool { return g.Reason.Blocking() }) {
			verdict = "UNPROTECTED: fenced would fence this node, but access to a volume keeps coming back after its fences (repeated-regression)"
		}
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
	if len(p.Drift) > 0 {
		rows := [][]string{{"VOLUME", "DRIVER", "HANDLE", "MISSING"}}
		for _, d := range p.Drift {
			rows = append(rows, []string{d.PV, d.Driver, d.Handle, d.Missing})
		}
		section(out, fmt.Sprintf("Configuration drift in cluster %s (volumes on no configured array; a node they attach to is unprotected)",
			p.Cluster), rows)
	}
	return nil
}
