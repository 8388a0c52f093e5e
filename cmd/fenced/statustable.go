package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fenced-project/fenced/cmd/fenced/status"
)

// writeTable renders the status document for people.
func writeTable(out io.Writer, st status.Status) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "Replica:\t%s\n", st.ReplicaID)
	fmt.Fprintf(w, "Version:\t%s\n", st.Version)
	fmt.Fprintf(w, "Up:\t%s (since %s)\n", st.Uptime, st.StartedAt.Local().Format(time.RFC3339))
	fmt.Fprintf(w, "Ready:\t%s\n", yesNo(st.Ready))
	if r := st.Raft; r != nil {
		leader := r.LeaderID
		if leader == "" {
			leader = "none"
		}
		fmt.Fprintf(w, "Raft:\t%s, term %d, leader %s, commit %d, applied %d\n", r.State, r.Term, leader, r.CommitIndex, r.AppliedIndex)
		fmt.Fprintf(w, "Fencing paused:\t%s\n", yesNo(r.FencingPaused))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	for _, c := range st.Checks {
		if c.OK {
			fmt.Fprintf(out, "  [+] %s\n", c.Name)
		} else {
			fmt.Fprintf(out, "  [-] %s: %s\n", c.Name, c.Error)
		}
	}
	if r := st.Raft; r != nil && len(r.Members) > 0 {
		rows := [][]string{{"MEMBER", "ADDRESS", "SUFFRAGE", ""}}
		for _, m := range r.Members {
			self := ""
			if m.Self {
				self = "(this replica)"
			}
			rows = append(rows, []string{m.ID, m.Address, m.Suffrage, self})
		}
		section(out, "", rows)
	}
	if len(st.Clusters) > 0 {
		rows := [][]string{{"CLUSTER", "READY", "NODES", "HEALTHY", "SUSPECT", "FAILED", "BLOCKED", "FENCED", "UNPROTECTED", "PAUSED", "DRY RUN", "API SERVER", "ERROR"}}
		var nodes, gaps [][]string
		for _, c := range st.Clusters {
			counts := []string{"-", "-", "-", "-", "-", "-", "-"}
			if n := c.Nodes; n != nil {
				counts = []string{fmt.Sprint(n.Total), fmt.Sprint(n.Healthy), fmt.Sprint(n.Suspect), fmt.Sprint(n.Failed),
					fmt.Sprint(n.Blocked), fmt.Sprint(n.Fenced), fmt.Sprint(n.Unprotected)}
			}
			row := append([]string{c.Name, yesNo(c.Ready)}, counts...)
			rows = append(rows, append(row, yesNo(c.Paused), yesNo(c.DryRun), dash(c.APIServer), dash(c.Error)))
			if s := c.Storm; s != nil {
				nodes = append(nodes, []string{c.Name, "(storm guard)", "active", fmt.Sprintf("%d unhealthy, %d allowed (limit %s)", s.Unhealthy, s.Allowed, s.Limit), ""})
			}
			for _, s := range c.StorageStorm {
				nodes = append(nodes, []string{c.Name, "(storage storm guard: " + s.Array + ")", "active",
					fmt.Sprintf("%s: %d disconnected, %d allowed %s", s.Reason, s.Disconnected, s.Allowed, s.Error), s.Since.Local().Format(time.RFC3339)})
			}
			for _, n := range c.Unhealthy {
				nodes = append(nodes, []string{c.Name, n.Name, n.Verdict, dash(n.Reason), n.Since.Local().Format(time.RFC3339)})
			}
			for _, n := range c.Unprotected {
				for _, g := range n.Gaps {
					gaps = append(gaps, []string{c.Name, n.Name, dash(g.Volume), dash(g.Array), g.Reason, dash(g.Detail)})
				}
			}
		}
		section(out, "Clusters", rows)
		if len(nodes) > 0 {
			section(out, "Nodes not healthy", append([][]string{{"CLUSTER", "NODE", "VERDICT", "REASON", "SINCE"}}, nodes...))
		}
		if len(gaps) > 0 {
			section(out, "Nodes unprotected (never fenced until every volume can be cut)",
				append([][]string{{"CLUSTER", "NODE", "VOLUME", "ARRAY", "GAP", "DETAIL"}}, gaps...))
		}
	}
	if len(st.Fences) > 0 {
		rows := [][]string{{"FENCE", "CLUSTER", "NODE", "KIND", "BY", "PHASE", "ARRAYS", "UPDATED", "NOTE"}}
		for _, f := range st.Fences {
			by := f.Origin
			if f.Operator != "" {
				by += ":" + f.Operator
			}
			arrays := make([]string, 0, len(f.Arrays))
			for _, a := range f.Arrays {
				arrays = append(arrays, a.Array+"="+a.Step)
			}
			note := f.Blocked
			for _, s := range []string{f.NeedsReboot, f.Error, f.Recovery} {
				if note == "" {
					note = s
				}
			}
			rows = append(rows, []string{f.ID, f.Cluster, f.Node, dash(f.Kind), dash(by), f.Phase, dash(strings.Join(arrays, ",")),
				f.UpdatedAt.Local().Format(time.RFC3339), dash(note)})
		}
		section(out, "Fences", rows)
	}
	if len(st.Arrays) > 0 {
		rows := [][]string{{"ARRAY", "FAMILY", "REACHABLE", "API VERSION", "ERROR"}}
		for _, a := range st.Arrays {
			rows = append(rows, []string{a.Name, a.Family, yesNo(a.Reachable), dash(a.APIVersion), dash(a.Error)})
		}
		section(out, "Arrays", rows)
	}
	return nil
}

func section(out io.Writer, title string, rows [][]string) {
	fmt.Fprintln(out)
	if title != "" {
		fmt.Fprintln(out, title+":")
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	for _, r := range rows {
		fmt.Fprintln(w, strings.Join(r, "\t"))
	}
	_ = w.Flush()
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
