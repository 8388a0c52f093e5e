// Package tables renders what fenced's operator commands show a person:
// the status document, the fence history and a node's fence plan, as
// aligned text tables whose every value stays on one line.
package tables

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/fenced-project/fenced/cmd/fenced/status"
)

// Status renders the status document for people; now dates the "ago"
// of last contacts and pauses.
func Status(out io.Writer, st status.Status, now time.Time) error {
	rows := [][]string{
		{"Replica:", st.ReplicaID},
		{"Version:", st.Version},
		{"Up:", fmt.Sprintf("%s (since %s)", st.Uptime, st.StartedAt.Local().Format(time.RFC3339))},
		{"Ready:", yesNo(st.Ready)},
	}
	if r := st.Raft; r != nil {
		leader := r.LeaderID
		if leader == "" {
			leader = "none"
		}
		line := fmt.Sprintf("%s, term %d, leader %s, commit %d, applied %d", r.State, r.Term, leader, r.CommitIndex, r.AppliedIndex)
		if r.LastContact != nil && r.State != "Leader" {
			line += ", last contact with the leader " + ago(*r.LastContact, now)
		}
		rows = append(rows, []string{"Raft:", line})
		if r.StorageFull != "" {
			rows = append(rows, []string{"Storage full:", r.StorageFull})
		}
		paused := yesNo(r.FencingPaused)
		for _, c := range st.Clusters {
			if c.Pause != nil && !r.FencingPaused {
				paused = "some clusters (see Clusters paused)"
			}
		}
		if r.Pause != nil {
			paused = "yes, every cluster: " + pauseText(*r.Pause, now)
		}
		if len(r.Pauses) > 1 {
			paused += fmt.Sprintf(" (%d pauses in effect, see Pauses)", len(r.Pauses))
		}
		rows = append(rows, []string{"Fencing paused:", paused})
	}
	table(out, rows)
	for _, c := range st.Checks {
		if c.OK {
			fmt.Fprintf(out, "  [+] %s\n", oneLine(c.Name))
		} else {
			fmt.Fprintf(out, "  [-] %s: %s\n", oneLine(c.Name), oneLine(c.Error))
		}
	}
	if r := st.Raft; r != nil && len(r.Members) > 0 {
		rows := [][]string{{"MEMBER", "ADDRESS", "SUFFRAGE", "ROLE", "REACHABLE", "LAST CONTACT", ""}}
		for _, m := range r.Members {
			note := ""
			switch {
			case m.Self:
				note = "(this replica)"
			case m.ID == r.LeaderID:
				note = "(leader)"
			}
			reachable, contact := "-", "-"
			switch {
			case m.Self:
				reachable = "yes"
			case m.Reachable != nil:
				reachable = yesNo(*m.Reachable)
			}
			if m.LastContact != nil {
				contact = ago(*m.LastContact, now)
			}
			rows = append(rows, []string{m.ID, m.Address, m.Suffrage, memberRole(*r, m), reachable, contact, note})
		}
		section(out, "", rows)
		switch {
		case r.State == "Leader":
		case r.MembersFrom != "":
			fmt.Fprintf(out, "(reachability as the leader %s sees it)\n", r.MembersFrom)
		case r.MembersError != "":
			fmt.Fprintf(out, "(peer reachability is known on the leader, which could not be asked: %s)\n", oneLine(r.MembersError))
		default:
			fmt.Fprintln(out, "(peer reachability is known on the leader: run status there to see it)")
		}
	}
	if len(st.Clusters) > 0 {
		rows := [][]string{{"CLUSTER", "READY", "NODES", "HEALTHY", "SUSPECT", "FAILED", "BLOCKED", "FENCED", "UNPROTECTED", "PAUSED", "DRY RUN", "API SERVER", "ERROR"}}
		var nodes, gaps, pauses, unplaced [][]string
		for _, c := range st.Clusters {
			counts := []string{"-", "-", "-", "-", "-", "-", "-"}
			if n := c.Nodes; n != nil {
				counts = []string{fmt.Sprint(n.Total), fmt.Sprint(n.Healthy), fmt.Sprint(n.Suspect), fmt.Sprint(n.Failed),
					fmt.Sprint(n.Blocked), fmt.Sprint(n.Fenced), fmt.Sprint(n.Unprotected)}
			}
			row := append([]string{c.Name, yesNo(c.Ready)}, counts...)
			rows = append(rows, append(row, yesNo(c.Paused), yesNo(c.DryRun), dash(c.APIServer), dash(c.Error)))
			if p := c.Pause; p != nil && p.Scope != status.PauseScopeAll {
				pauses = append(pauses, []string{c.Name, dash(p.Operator), p.At.Local().Format(time.RFC3339), dash(p.Reason)})
			}
			if s := c.Storm; s != nil {
				nodes = append(nodes, []string{c.Name, "(storm guard)", "active", fmt.Sprintf("%d unhealthy, %d allowed (limit %s)", s.Unhealthy, s.Allowed, s.Limit), ""})
			}
			if c.LeaseTiming != "" {
				nodes = append(nodes, []string{c.Name, "(Lease timing)", "warning", c.LeaseTiming, ""})
			}
			for _, s := range c.StorageStorm {
				nodes = append(nodes, []string{c.Name, "(storage storm guard: " + s.Array + ")", "active",
					fmt.Sprintf("%s: %d disconnected, %d allowed %s", s.Reason, s.Disconnected, s.Allowed, s.Error), s.Since.Local().Format(time.RFC3339)})
			}
			for _, n := range c.Unhealthy {
				nodes = append(nodes, []string{c.Name, n.Name, n.Verdict, dash(n.Reason), n.Since.Local().Format(time.RFC3339)})
			}
			for _, u := range c.Unplaced {
				unplaced = append(unplaced, []string{c.Name, u.PV, u.Driver, u.Handle, u.Missing})
			}
			for _, n := range c.Unprotected {
				for _, g := range n.Gaps {
					gaps = append(gaps, []string{c.Name, n.Name, dash(g.Volume), dash(g.Array), g.Reason, dash(g.Detail)})
				}
			}
		}
		section(out, "Clusters", rows)
		if len(pauses) > 0 {
			section(out, "Clusters paused", append([][]string{{"CLUSTER", "BY", "SINCE", "REASON"}}, pauses...))
		}
		if r := st.Raft; r != nil && len(r.Pauses) > 0 {
			rows := [][]string{{"PAUSE", "SCOPE", "BY", "SINCE", "REASON"}}
			for _, p := range r.Pauses {
				rows = append(rows, []string{dash(p.ID), p.Scope, dash(p.Operator), p.At.Local().Format(time.RFC3339), dash(p.Reason)})
			}
			section(out, "Pauses (fenced resume --id ID ends one)", rows)
		}
		if len(nodes) > 0 {
			section(out, "Nodes not healthy", append([][]string{{"CLUSTER", "NODE", "VERDICT", "REASON", "SINCE"}}, nodes...))
		}
		if len(gaps) > 0 {
			section(out, "Nodes unprotected (never fenced until every volume can be cut; repeated-regression: fenced, but the fence does not hold)",
				append([][]string{{"CLUSTER", "NODE", "VOLUME", "ARRAY", "GAP", "DETAIL"}}, gaps...))
		}
		if len(unplaced) > 0 {
			section(out, "Configuration drift (volumes on no configured array; a node they attach to is unprotected)",
				append([][]string{{"CLUSTER", "VOLUME", "DRIVER", "HANDLE", "MISSING"}}, unplaced...))
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
			if f.Regressions > 0 {
				// A held fence that regressed says so whatever else it waits for.
				note = strings.TrimSuffix(fmt.Sprintf("regressed %dx (last: %s); %s", f.Regressions, f.LastRegression, note), "; ")
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

// section writes a titled table after an empty line.
func section(out io.Writer, title string, rows [][]string) {
	fmt.Fprintln(out)
	if title != "" {
		fmt.Fprintln(out, title+":")
	}
	table(out, rows)
}

// table writes rows in aligned columns, each cell on one line.
func table(out io.Writer, rows [][]string) {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	for _, r := range rows {
		cells := make([]string, len(r))
		for i, c := range r {
			cells[i] = oneLine(c)
		}
		fmt.Fprintln(w, strings.Join(cells, "\t"))
	}
	_ = w.Flush()
}

// oneLine keeps a value (an error from an array or an API server, say) on
// one line of one column: line breaks become " | ", tabs and other
// control characters spaces.
func oneLine(s string) string {
	if !strings.ContainsFunc(s, unicode.IsControl) {
		return s
	}
	lines := strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' })
	for i, l := range lines {
		lines[i] = strings.TrimSpace(strings.Map(func(r rune) rune {
			if unicode.IsControl(r) {
				return ' '
			}
			return r
		}, l))
	}
	lines = slices.DeleteFunc(lines, func(l string) bool { return l == "" })
	return strings.Join(lines, " | ")
}

// pauseText says who paused, when and why.
func pauseText(p status.Pause, now time.Time) string {
	s := "by " + dash(p.Operator)
	if !p.At.IsZero() {
		s += " at " + p.At.Local().Format(time.RFC3339) + " (" + ago(p.At, now) + ")"
	}
	if p.Reason != "" {
		s += ": " + p.Reason
	}
	return s
}

// ago is how long before now t was, in whole seconds.
func ago(t, now time.Time) string {
	d := now.Sub(t).Round(time.Second)
	if d < 0 {
		d = 0
	}
	return d.String() + " ago"
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

// memberRole is a member's part in the group as the document shows it:
// Leader, this replica's own state, down when it does not answer the
// leader's heartbeats, Follower when it does, "-" when not known.
func memberRole(r status.Raft, m status.RaftMember) string {
	switch {
	case m.ID == r.LeaderID && r.LeaderID != "":
		return "Leader"
	case m.Self:
		return r.State
	case m.Reachable == nil:
		return "-"
	case !*m.Reachable:
		return "down"
	case m.Suffrage == "None":
		return "-"
	}
	return "Follower"
}
