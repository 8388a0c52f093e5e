package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/fenced-project/fenced/cmd/fenced/status"
	"github.com/fenced-project/fenced/tests/e2e"
)

// Host describes the machine the figures come from.
type Host struct {
	CPUs      int    `json:"cpus"`
	CPUModel  string `json:"cpuModel"`
	GoVersion string `json:"goVersion"`
	LoadAvg   string `json:"loadAverageAtStart"`
	// Tree is the commit the run was built from (git describe --always
	// --dirty), "" when git could not say.
	Tree string `json:"tree,omitempty"`
}

func hostInfo() Host {
	h := Host{CPUs: runtime.NumCPU(), GoVersion: runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "model name") {
				h.CPUModel = strings.TrimSpace(line[strings.IndexByte(line, ':')+1:])
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		h.LoadAvg = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	gctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(gctx, "git", "describe", "--always", "--dirty").Output(); err == nil {
		h.Tree = strings.TrimSpace(string(out))
	}
	return h
}

// treeNote is ", tree T" for a run whose commit is known.
func treeNote(tree string) string {
	if tree == "" {
		return ""
	}
	return ", tree " + tree
}

func leaderStatus(ctx context.Context, h *e2e.Harness) (*status.Status, error) {
	l, err := h.Leader(ctx)
	if err != nil {
		return nil, err
	}
	return h.Replicas[l].Status(ctx)
}

// stats are the median, 90th percentile, min and max of a sample.
type stats struct {
	n                  int
	med, p90, min, max float64
}

func summarize(xs []float64) stats {
	if len(xs) == 0 {
		return stats{}
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	q := func(p float64) float64 {
		i := int(p*float64(len(s)-1) + 0.5)
		return s[i]
	}
	return stats{n: len(s), med: q(0.5), p90: q(0.9), min: s[0], max: s[len(s)-1]}
}

func (s stats) row(name, target string) string {
	if s.n == 0 {
		return fmt.Sprintf("| %s | – | – | – | – | %s |\n", name, target)
	}
	return fmt.Sprintf("| %s | %.2f | %.2f | %.2f | %.2f | %s |\n", name, s.med, s.p90, s.min, s.max, target)
}

func ok(trials []Trial) []Trial {
	var out []Trial
	for _, t := range trials {
		if t.Error == "" && !t.Evicted.IsZero() {
			out = append(out, t)
		}
	}
	return out
}

func field(trials []Trial, f func(Trial) float64) []float64 {
	var out []float64
	for _, t := range trials {
		out = append(out, f(t))
	}
	return out
}

// markdown renders the results.
func markdown(r *Results) string {
	var b strings.Builder
	b.WriteString("# fenced benchmark results\n\n")
	fmt.Fprintf(&b, "Run %s, took %s, on %d CPUs (%s), %s; load average at start %s%s. "+
		"Written by `make bench` (`go run ./tests/bench`); the raw figures are in results.json. "+
		"Every run is real: three `fenced run` processes, kube-apiserver with etcd, controller manager, scheduler and kwok nodes, "+
		"the five array simulators behind toxiproxy. Figures, not pass/fail.\n\n",
		r.StartedAt.Format("2006-01-02 15:04 MST"), r.Duration, r.Host.CPUs, r.Host.CPUModel, r.Host.GoVersion, r.Host.LoadAvg, treeNote(r.Host.Tree))
	b.WriteString("Times are given from two moments. **From power-off**: from the moment the harness stops the node " +
		"(its kubelet port closes and its Lease is no longer renewed, as when the power goes): what the workload sees. " +
		"**From the last renewal**: from the last renewTime of the node's Lease, which comes up to one renewal interval (10 s) " +
		"before the power-off; fenced's heartbeat grace counts from it, so these figures show what fenced adds to the grace. " +
		"A figure an older run did not record is shown as —.\n\n")
	p := r.Params
	if r.Single != nil {
		b.WriteString(singleSection(p, r.Single))
	}
	if r.SingleEarly != nil {
		b.WriteString(singleSection(p, r.SingleEarly))
	}
	if r.Baseline != nil {
		bl := r.Baseline
		fmt.Fprintf(&b, "## Baseline: Kubernetes alone\n\nThe same death (%d nodes, %d StatefulSet pods on the dying node) with no fenced, default Kubernetes timings, watched for %s. Seconds.\n\n",
			bl.Nodes, bl.Pods, bl.Watched)
		fr := bl.fromRenewal()
		never := "never (watched " + bl.Watched + ")"
		b.WriteString("| Milestone | from power-off | from the last renewal |\n|---|---|---|\n")
		renewalNever := "—" // an older run did not read the renewal
		if !bl.LastRenew.IsZero() && !bl.PowerOff.IsZero() {
			renewalNever = never
		}
		fmt.Fprintf(&b, "| node marked NotReady | %s | %s |\n", orNever(bl.NotReadyAfter, never), orNever(fr.NotReady, renewalNever))
		fmt.Fprintf(&b, "| first pod given a deletion timestamp (taint-based eviction) | %s | %s |\n", orNever(bl.TerminatingAfter, never), orNever(fr.Terminating, renewalNever))
		replaced := orNever(bl.ReplacedAfter, never)
		if bl.PowerOff.IsZero() {
			replaced = "—" // not recorded before power-off was
		}
		fmt.Fprintf(&b, "| all replacements Running | %s | %s |\n\n", replaced, orNever(fr.Running, renewalNever))
		fmt.Fprintf(&b, "Where the pods are after %s: **%s**.\n\n", bl.Watched, countsString(bl.Final))
		b.WriteString("| after power-off (s) | pods |\n|---|---|\n")
		for _, s := range bl.Samples {
			fmt.Fprintf(&b, "| %.0f | %s |\n", s.After, countsString(s.Counts))
		}
		b.WriteString("\n")
	}
	if r.Failover != nil {
		good := ok(r.Failover.Trials)
		fmt.Fprintf(&b, "## Leader killed during a fence\n\nAs above, but the leader is killed with SIGKILL as soon as the harness sees the fence open (polling /status every 50 ms: the kill lands between the intent and the eviction). %d trials, %d complete. Seconds.\n\n",
			len(r.Failover.Trials), len(good))
		b.WriteString("| Figure | median | p90 | min | max | target |\n|---|---|---|---|---|---|\n")
		b.WriteString(summarize(field(good, func(t Trial) float64 { return t.KillToComplete })).row("leader kill → fence complete (evicted)", "≤ 5 s"))
		b.WriteString(summarize(field(good, func(t Trial) float64 { return t.TotalRecovery })).row("total recovery (last renewal → all replacements Running)", ""))
		b.WriteString(summarize(present(field(good, func(t Trial) float64 { return t.fromPowerOff().Running }))).row("total recovery from power-off (power-off → all replacements Running)", ""))
		b.WriteString("\n")
		for _, t := range r.Failover.Trials {
			if t.Error != "" {
				fmt.Fprintf(&b, "- trial on %s failed: %s\n", t.Node, t.Error)
			}
		}
		b.WriteString("\n")
	}
	if len(r.Growth) > 0 {
		b.WriteString(growthSection(r.Growth))
	} else if r.Steady != nil { // a run from before the growth curve
		s := r.Steady
		fmt.Fprintf(&b, "## Steady state, %d nodes\n\nfenced idle (every node healthy, every node's array identities learned) over %s. "+
			"Cold start: the leader knew every node's identities %.0f s after the replicas started.%s\n\n| Replica | CPU (%% of a core) | RSS (MB) | target |\n|---|---|---|---|\n", s.Nodes, s.Window, s.Learned, niceNote(s.ControlPlaneNice))
		fmt.Fprintf(&b, "| leader (%s) | %.1f | %.0f | ≤ 3 %%, ≤ 150 MB at 2,000 nodes |\n", s.Leader.Replica, s.Leader.CPUPercent, float64(s.Leader.RSSBytes)/1e6)
		fmt.Fprintf(&b, "| follower (%s) | %.1f | %.0f | |\n\n", s.Follower.Replica, s.Follower.CPUPercent, float64(s.Follower.RSSBytes)/1e6)
	}
	if r.MultiCluster != nil {
		b.WriteString(multiClusterSection(r.MultiCluster, fitGrowth(r.Growth)))
	}
	if r.Storm != nil {
		s := r.Storm
		fmt.Fprintf(&b, "## %d of %d nodes die at once\n\nStorm limit raised to %d.%s Seconds after the last renewal of the dying nodes' Leases "+
			"(the latest of them) and after the power-off (when the harness began stopping them); "+
			"\"opened\": the leader's status shows a fence of the node, in any phase.\n\n"+
			"| from | first opened | all opened | all fenced | all evicted | all replacements Running | target |\n|---|---|---|---|---|---|---|\n",
			s.Dying, s.Nodes, max(s.Limit, s.Dying), niceNote(s.ControlPlaneNice))
		for _, row := range []struct {
			name   string
			fig    StormSince
			target string
		}{
			{"last renewal", s.fromRenewal(), "fenced and evicted within 30 s"},
			{"power-off", s.fromPowerOff(), ""},
		} {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", row.name, orDash(row.fig.FirstOpened), orDash(row.fig.AllOpened),
				orDash(row.fig.AllFenced), orDash(row.fig.AllEvicted), orDash(row.fig.AllRunning), row.target)
		}
		b.WriteString("\n")
		if s.Early {
			fmt.Fprintf(&b, "Early verdicts on: %d of the %d dying nodes' fences were opened on an early verdict.\n\n", s.EarlyFences, s.Dying)
		}
		b.WriteString(stormPowerOff(s))
		b.WriteString(renderStormProfiles(s.Profiles))
		b.WriteString(renderProcessCPU(s.ProcessCPU))
		if len(s.Unread) > 0 {
			fmt.Fprintf(&b, "The per-node and per-family figures lack: %s.\n\n", strings.Join(s.Unread, "; "))
		}
		if s.Error != "" {
			fmt.Fprintf(&b, "Incomplete: %s\n\n", s.Error)
		}
	}
	b.WriteString(targets(r))
	if len(r.Notes) > 0 {
		b.WriteString("## Notes from the run\n\n")
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "- %s\n", n)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// singleSection renders the single-node trials, with early verdicts on or
// off.
func singleSection(p params, sr *SingleResults) string {
	var b strings.Builder
	good := ok(sr.Trials)
	title, config := "Single node death, early verdicts off", fmt.Sprintf("fenced's default configuration but early verdicts (heartbeatGrace %s, pollInterval 2s, corroboration either, ioWindow 30s; "+
		"every verdict waits for the grace: the default before early verdicts, and what a cluster with earlyVerdict.enabled: false gets)", sr.Grace)
	if sr.Early {
		title = "Single node death, default configuration (early verdicts on)"
		config = fmt.Sprintf("fenced's default configuration (earlyVerdict on: after 12s, probeFrom 11s, kubeletProbes 3, ioWindow 6s; heartbeatGrace %s, pollInterval 2s, corroboration either, ioWindow 30s); "+
			"the dying node's volumes are on PowerFlex, whose SDC state and I/O counters are the array witnesses", sr.Grace)
	}
	fmt.Fprintf(&b, "## %s\n\n%d-node cluster, %d protected StatefulSet pods on the dying node, %s added round trip on every array request (toxiproxy), "+
		"%s, kube's default Lease (40 s, renewed every 10 s). %d trials, %d complete.", title, p.Nodes, p.Pods, p.Latency, config, len(sr.Trials), len(good))
	if sr.Early {
		early := 0
		for _, t := range good {
			if t.Early {
				early++
			}
		}
		fmt.Fprintf(&b, " %d of the %d fences were opened on an early verdict; the others waited for the grace.", early, len(good))
	}
	b.WriteString(" Seconds.\n\n")
	b.WriteString("| Figure | median | p90 | min | max | target |\n|---|---|---|---|---|---|\n")
	b.WriteString(summarize(field(good, func(t Trial) float64 { return t.DetectionOverhead })).row("detection overhead (Failed verdict − (last renewal + grace))", "≤ 1 s median"))
	b.WriteString(summarize(field(good, func(t Trial) float64 { return t.FenceTime })).row("fence time (intent → fenced: every array fenced and read back)", ""))
	b.WriteString(summarize(field(good, func(t Trial) float64 { return t.EvictionTime })).row("eviction time (fenced → evicted: tainted, pods force-deleted)", ""))
	b.WriteString(summarize(field(good, func(t Trial) float64 { return t.GraceToEvicted })).row("heartbeat loss past grace → all pods force-deleted", "≤ 2 s median"))
	b.WriteString(summarize(field(good, func(t Trial) float64 { return t.TotalRecovery })).row("total recovery (last renewal → all replacements Running)", ""))
	target := "≤ 15 s median"
	if sr.Early {
		target = "≤ 10 s median, p90 ≤ 13 s"
	}
	b.WriteString(summarize(present(field(good, func(t Trial) float64 { return t.fromPowerOff().Running }))).row("total recovery from power-off (power-off → all replacements Running)", target))
	b.WriteString("\n")
	b.WriteString(milestones(good))
	for _, t := range sr.Trials {
		if t.Error != "" {
			fmt.Fprintf(&b, "- trial on %s failed: %s\n", t.Node, t.Error)
		}
	}
	b.WriteString("\n")
	return b.String()
}

// niceNote says how the run favoured the control plane, if it did.
func niceNote(nice int) string {
	if nice == 0 {
		return ""
	}
	return fmt.Sprintf(" The control plane and kwok ran at nice %d: on this machine they share the cores with the three replicas and the "+
		"simulators, and a Lease renewal that lags past the grace makes a live node late, which real kubelets on their own machines do not. "+
		"fenced's CPU is counted in CPU time, which priority does not change.", nice)
}

// orNever prints a figure, or never where it was not reached.
func orNever(v float64, never string) string {
	if v == 0 {
		return never
	}
	return fmt.Sprintf("%.1f", v)
}

// cells are a sample's median, p90, min and max as table cells, or dashes.
func cells(s stats) string {
	if s.n == 0 {
		return "— | — | — | —"
	}
	return fmt.Sprintf("%.2f | %.2f | %.2f | %.2f", s.med, s.p90, s.min, s.max)
}

// milestones is the single-node table of every milestone from the
// power-off and from the last renewal.
func milestones(trials []Trial) string {
	var b strings.Builder
	ages := summarize(present(field(trials, Trial.leaseAge)))
	b.WriteString("Every milestone from the power-off and from the last renewal")
	if ages.n > 0 {
		fmt.Fprintf(&b, " (the last renewal came %.2f s before the power-off in the median, %.2f to %.2f s)", ages.med, ages.min, ages.max)
	}
	b.WriteString(". Seconds.\n\n| Milestone | from power-off: median | p90 | min | max | from last renewal: median | p90 | min | max |\n" +
		"|---|---|---|---|---|---|---|---|---|\n")
	rows := []struct {
		name string
		fig  func(Since) float64
	}{
		{"Failed verdict", func(s Since) float64 { return s.Verdict }},
		{"fence opened (intent)", func(s Since) float64 { return s.Opened }},
		{"fenced (every array fenced and read back)", func(s Since) float64 { return s.Fenced }},
		{"evicted (all pods force-deleted)", func(s Since) float64 { return s.Evicted }},
		{"all replacement pods Running", func(s Since) float64 { return s.Running }},
	}
	for _, row := range rows {
		off := summarize(present(field(trials, func(t Trial) float64 { return row.fig(t.fromPowerOff()) })))
		ren := summarize(present(field(trials, func(t Trial) float64 { return row.fig(t.fromRenewal()) })))
		fmt.Fprintf(&b, "| %s | %s | %s |\n", row.name, cells(off), cells(ren))
	}
	b.WriteString("\n")
	return b.String()
}

// stormPowerOff is the storm's power-off, per-node spread and per-family
// sections; empty for a run from before they were recorded.
func stormPowerOff(s *StormResult) string {
	var b strings.Builder
	if !s.PowerOff.IsZero() {
		fmt.Fprintf(&b, "The harness stopped the %d nodes over %.1f s; the last renewal of their Leases came %s.\n\n",
			s.Dying, secondsAfter(s.PowerOff, s.PowerOffDone), beforeAfter(secondsAfter(s.LastRenew, s.PowerOff), "it began"))
	}
	if len(s.Steps) > 0 {
		b.WriteString("Per node, from the ledger's step times: the first-to-last spread over the dying nodes, and the times after each node's own power-off and own last renewal. Seconds.\n\n" +
			"| Step | nodes | first → last | from power-off: median | p90 | max | from last renewal: median | p90 | max |\n|---|---|---|---|---|---|---|---|---|\n")
		for _, st := range s.Steps {
			fmt.Fprintf(&b, "| %s | %d | %.1f | %.1f | %.1f | %.1f | %s | %s | %s |\n", st.Step, st.Nodes, st.Spread,
				st.PowerOffMedian, st.PowerOffP90, st.PowerOffMax, orDash(st.RenewalMedian), orDash(st.RenewalP90), orDash(st.RenewalMax))
		}
		b.WriteString("\n")
	}
	if len(s.Families) > 0 {
		ops := []string{"plan", "apply", "verify", "health"}
		b.WriteString("Where the time goes per array family: over the dying nodes' fences, the time from the fence's intent to the read-back " +
			"that confirmed the family's array fenced, the array operations the fences recorded (failed), and the array requests of " +
			"every replica during the storm (count, mean seconds; `fenced_array_request_duration_seconds`).\n\n" +
			"| Family | fences | done after intent: median | p90 | max | operations (failed) |")
		for _, op := range ops {
			fmt.Fprintf(&b, " %s requests |", op)
		}
		b.WriteString("\n|---|---|---|---|---|---|" + strings.Repeat("---|", len(ops)) + "\n")
		for _, f := range s.Families {
			fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %d (%d) |", f.Family, f.Fences, orDash(f.DoneMedian), orDash(f.DoneP90), orDash(f.DoneMax), f.Attempts, f.Failures)
			for _, op := range ops {
				if c, ok := f.Calls[op]; ok {
					fmt.Fprintf(&b, " %.0f, %.2f |", c.Count, c.mean())
				} else {
					b.WriteString(" — |")
				}
			}
			b.WriteString("\n")
		}
		b.WriteString("\n")
	}
	return b.String()
}

// beforeAfter says how far before (positive) or after (negative) what a
// moment came.
func beforeAfter(v float64, what string) string {
	if v < 0 {
		return fmt.Sprintf("%.1f s after %s", -v, what)
	}
	return fmt.Sprintf("%.1f s before %s", v, what)
}

// orDash prints a figure, or "—" where an older run did not measure it.
func orDash(v float64) string {
	if v == 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f", v)
}

// growthSection is the steady state at each size measured, and the line
// fitted through the figures with where it leads.
func growthSection(growth []SteadyResult) string {
	var b strings.Builder
	var windows []string
	nice := 0
	for _, g := range growth {
		if !slices.Contains(windows, g.Window) {
			windows = append(windows, g.Window)
		}
		nice = max(nice, g.ControlPlaneNice)
	}
	fmt.Fprintf(&b, "## Growth: steady state by cluster size\n\nfenced idle (every node healthy, every node's array identities learned) "+
		"in one cluster of each size, CPU sampled over %s; each size is a run of its own (its own control plane, replicas and "+
		"simulators, torn down before the next). Identities learned: seconds from the replicas' start until the leader knew every "+
		"node's identities on every array (cold start); the window begins after it.%s\n\n", strings.Join(windows, " or "), niceNote(nice))
	b.WriteString("| Nodes | Lease renewed every (s) | leader CPU (% of a core) | leader RSS (MB) | follower CPU (% of a core) | follower RSS (MB) | identities learned (s) |\n" +
		"|---|---|---|---|---|---|---|\n")
	var failed []string
	for _, g := range growth {
		if g.Error != "" {
			fmt.Fprintf(&b, "| %d | %g | — | — | — | — | %s |\n", g.Nodes, g.Renewal(), orDash(g.Learned))
			failed = append(failed, fmt.Sprintf("- %d nodes (renewed every %g s) did not complete: %s\n", g.Nodes, g.Renewal(), g.Error))
			continue
		}
		fmt.Fprintf(&b, "| %d | %g | %.1f | %.0f | %.1f | %.0f | %.0f |\n", g.Nodes, g.Renewal(), g.Leader.CPUPercent, float64(g.Leader.RSSBytes)/1e6,
			g.Follower.CPUPercent, float64(g.Follower.RSSBytes)/1e6, g.Learned)
	}
	b.WriteString("\n")
	if len(failed) > 0 {
		b.WriteString(strings.Join(failed, "") + "\n")
	}
	b.WriteString(idleNotes(growth))
	fit := fitGrowth(growth)
	if fit == nil {
		b.WriteString("No growth fit: it takes two sizes or more that complete.\n\n")
		return b.String()
	}
	b.WriteString("The fitted growth, figure = intercept + slope × nodes (ordinary least squares):\n\n" +
		"| Figure | intercept | per 1,000 nodes | R² | projected at 2,000 nodes | projected at 10,000 nodes |\n|---|---|---|---|---|---|\n")
	for _, f := range fit.Figures {
		fmt.Fprintf(&b, "| %s | %.2f | %.2f | %.3f | %.1f | %.1f |\n", f.Figure, f.Intercept, f.SlopePer1000, f.R2, f.At2000, f.At10000)
	}
	fmt.Fprintf(&b, "\nThe projections are a linear extrapolation from the sizes measured, %s nodes%s: they hold only as far as "+
		"fenced's idle cost keeps growing in proportion to the nodes, which these runs do not show beyond %s nodes.\n\n",
		sizeList(fit.Sizes), twoSizes(fit.Sizes), thousands(fit.Sizes[len(fit.Sizes)-1]))
	for _, f := range fit.Figures {
		if f.SlopePer1000 < 0 {
			b.WriteString("A negative slope or projection is where a falling line leads, not a possible figure: that figure did not grow " +
				"over the sizes measured.\n\n")
			break
		}
	}
	return b.String()
}

// twoSizes warns that a line through two sizes fits them exactly.
func twoSizes(sizes []int) string {
	if len(sizes) == 2 {
		return " (with two sizes the line passes through both, so R² is 1 by construction)"
	}
	return ""
}

// sizeList names node counts in prose: "250, 500 and 1,000".
func sizeList(sizes []int) string {
	parts := make([]string, len(sizes))
	for i, n := range sizes {
		parts[i] = thousands(n)
	}
	if len(parts) < 2 {
		return strings.Join(parts, "")
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}

// thousands writes a whole number with a comma between thousands.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// multiClusterSection is one group idle over several clusters; fit, when
// there is one, gives the single-cluster line's value at the same total.
func multiClusterSection(m *MultiClusterResult, fit *GrowthFit) string {
	var b strings.Builder
	total := m.Clusters * m.NodesPerCluster
	fmt.Fprintf(&b, "## One group, %d clusters of %d nodes\n\nOne fenced group (three replicas) protecting %d test bed clusters of %d nodes "+
		"(%s nodes in all), each cluster with its own control plane (etcd, API server, controller manager, scheduler) and kwok, "+
		"over the same five array simulators; fenced idle over %s.", m.Clusters, m.NodesPerCluster, m.Clusters, m.NodesPerCluster,
		thousands(total), m.Window)
	if m.Learned > 0 {
		fmt.Fprintf(&b, " Cold start: the leader knew the identities of every node of every cluster %.0f s after the replicas started.", m.Learned)
	}
	b.WriteString(niceNote(m.ControlPlaneNice) + "\n\n")
	if m.Error != "" {
		fmt.Fprintf(&b, "Incomplete: %s\n\n", m.Error)
		if m.Leader.Replica == "" {
			return b.String()
		}
	}
	b.WriteString("| Replica | CPU (% of a core) | RSS (MB) |\n|---|---|---|\n")
	fmt.Fprintf(&b, "| leader (%s) | %.1f | %.0f |\n", m.Leader.Replica, m.Leader.CPUPercent, float64(m.Leader.RSSBytes)/1e6)
	fmt.Fprintf(&b, "| follower (%s) | %.1f | %.0f |\n\n", m.Follower.Replica, m.Follower.CPUPercent, float64(m.Follower.RSSBytes)/1e6)
	if fit != nil {
		fmt.Fprintf(&b, "For comparison, the single-cluster growth fit above gives the leader %.1f %% of a core and %.0f MB at %s nodes in one cluster.\n\n",
			fit.figure(figLeaderCPU).at(total), fit.figure(figLeaderRSS).at(total), thousands(total))
	}
	return b.String()
}
