package main

import (
	"fmt"
	"sort"
	"strings"
)

// targets writes the targets section: each target, what was measured, and
// for a missed one why and what would fix it. The explanations describe
// the mechanisms the figures come from in this version; they are printed
// only when the figures show the effect.
func targets(r *Results) string {
	var b strings.Builder
	b.WriteString("## Targets\n\n")
	if r.Single != nil {
		good := ok(r.Single.Trials)
		det := summarize(field(good, func(t Trial) float64 { return t.DetectionOverhead }))
		del := summarize(field(good, func(t Trial) float64 { return t.GraceToEvicted }))
		by := map[string]int{}
		for _, t := range good {
			by[t.Corroboration]++
		}
		var parts []string
		for k, v := range by {
			parts = append(parts, fmt.Sprintf("%d by %q", v, k))
		}
		sort.Strings(parts)
		fmt.Fprintf(&b, "- **Detection overhead ≤ 1 s median**: %s (median %.2f s). Verdicts were corroborated: %s.\n",
			met(det.n > 0 && det.med <= 1), det.med, strings.Join(parts, ", "))
		if det.n > 0 && det.med > 1 {
			if by["array"] > 0 {
				b.WriteString("  Why: the verdict waited for the arrays to corroborate. A node's array health is sampled only once the node is late " +
					"(probeAfter, half the grace: 20 s after the last renewal), and the arrays count as quiet only after `ioWindow` " +
					"(default 30 s) of quiet samples, so array corroboration arrives about 50 s after the last renewal, plus up to one poll " +
					"interval — 10–12 s after the grace. The kubelet-majority corroboration, which would hold at the grace, did not count: " +
					"the leader's verdicts report no majority of fresh unreachable kubelet probes at that moment (under the e2e scenarios' fast " +
					"timings it does count — `corroborated by kubelet` — so the gap is in how follower probes age under the default 2 s poll " +
					"interval; to be investigated in the detector's vantage sharing).\n" +
					"  Fix: sample every node's array health continuously (so the quiet window starts at the death, not at probeAfter), or " +
					"default `ioWindow` to at most grace − probeAfter; and make the kubelet-majority evidence hold at the grace.\n")
			} else {
				b.WriteString("  Why: the probe results that complete the evidence at the grace are evaluated at the next poll tick " +
					"(detector/probe.go enqueues them without a re-evaluation), so the verdict lands up to one poll interval (2 s) after the grace.\n" +
					"  Fix: re-evaluate a stale node as soon as its probes complete.\n")
			}
		}
		fmt.Fprintf(&b, "- **Heartbeat loss (past grace) → all pods force-deleted ≤ 2 s median**: %s (median %.2f s). ", met(del.n > 0 && del.med <= 2), del.med)
		fenceMed := summarize(field(good, func(t Trial) float64 { return t.FenceTime })).med
		evictMed := summarize(field(good, func(t Trial) float64 { return t.EvictionTime })).med
		fmt.Fprintf(&b, "Of it, fencing five arrays and reading them back takes %.2f s and tainting plus force-deleting %d pods %.2f s (medians); the rest is the detection overhead above.\n",
			fenceMed, r.Params.Pods, evictMed)
	}
	for _, sr := range []*SingleResults{r.Single, r.SingleEarly} {
		if sr == nil {
			continue
		}
		good := ok(sr.Trials)
		rec := summarize(present(field(good, func(t Trial) float64 { return t.fromPowerOff().Running })))
		if rec.n == 0 {
			continue
		}
		mode := "early verdicts off"
		if sr.Early {
			mode = "early verdicts on"
		}
		if !sr.Early {
			fmt.Fprintf(&b, "- **Power-off → all replacements Running ≤ 15 s median** (%s): %s (median %.2f s, p90 %.2f s over %d trials).", mode,
				met(rec.med <= 15), rec.med, rec.p90, rec.n)
			if rec.med > 15 {
				b.WriteString(" Why: the verdict waits for the heartbeat grace (40 s after the last renewal) even when every witness agrees; early verdicts (`earlyVerdict`) are what shortens it.")
			}
			b.WriteString("\n")
			continue
		}
		fmt.Fprintf(&b, "- **Power-off → all replacements Running ≤ 10 s median, p90 ≤ 13 s** (%s, the default configuration): %s (median %.2f s, p90 %.2f s over %d trials).", mode,
			met(rec.med <= 10 && rec.p90 <= 13), rec.med, rec.p90, rec.n)
		if rec.med > 10 || rec.p90 > 13 {
			verdict := summarize(present(field(good, func(t Trial) float64 { return t.fromPowerOff().Verdict })))
			fromRenewal := summarize(present(field(good, func(t Trial) float64 { return t.fromRenewal().Verdict })))
			fence := summarize(field(good, func(t Trial) float64 { return t.FenceTime }))
			evict := summarize(field(good, func(t Trial) float64 { return t.EvictionTime }))
			fmt.Fprintf(&b, " Why: the early verdict comes %.2f s after the power-off and %.2f s after the last renewal (medians; never before `after`, 12 s, "+
				"and only after the arrays have shown the node gone with no I/O for `ioWindow`, 6 s, counted from the sweep that first showed it gone); "+
				"then the fence takes %.2f s and the eviction %.2f s (which waits for Kubernetes' taint-eviction controller to delete the pods before "+
				"force-deleting them), and the replacements start. The load average at the start of the run is in the header: on a busy 2-core machine the steps "+
				"after the verdict stretch.",
				verdict.med, fromRenewal.med, fence.med, evict.med)
		}
		b.WriteString("\n")
	}
	if r.Failover != nil {
		good := ok(r.Failover.Trials)
		fo := summarize(field(good, func(t Trial) float64 { return t.KillToComplete }))
		if fo.n == 0 {
			b.WriteString("- **Failover during a fence ≤ 5 s**: not measured: no trial completed (see the failures above).\n")
		} else {
			fmt.Fprintf(&b, "- **Failover during a fence ≤ 5 s**: %s (median %.2f s, max %.2f s over %d trials). "+
				"It covers the Raft election (1 s heartbeat and election timeouts in these configurations, stretched by the load of the machine) "+
				"and the new leader resuming the fence from the ledger: re-reading the arrays, applying what is missing, reading back, tainting and evicting.\n",
				met(fo.med <= 5), fo.med, fo.max, fo.n)
		}
	}
	if r.Steady != nil {
		s := r.Steady
		const target = 2000
		fmt.Fprintf(&b, "- **Leader at 2,000 nodes ≤ 3 %% of a core and ≤ 150 MB RSS**: ")
		if s.Nodes < target {
			fmt.Fprintf(&b, "not measured at 2,000 nodes; at %d nodes %s (%.1f %%, %.0f MB). ", s.Nodes,
				within(s.Leader.CPUPercent <= 3 && s.Leader.RSSBytes <= 150e6), s.Leader.CPUPercent, float64(s.Leader.RSSBytes)/1e6)
			if fit := fitGrowth(r.Growth); fit != nil {
				cpu, rss := fit.figure(figLeaderCPU).At2000, fit.figure(figLeaderRSS).At2000
				fmt.Fprintf(&b, "The growth fit over %s nodes projects %.1f %% and %.0f MB at 2,000 nodes, %s (a linear extrapolation, "+
					"not a measurement). ", sizeList(fit.Sizes), cpu, rss, within(cpu <= 3 && rss <= 150))
			}
			b.WriteString("This machine cannot hold 2,000 kwok nodes beside the control plane, three replicas and five simulators on two cores " +
				"(see the notes below: in the attempts so far either the Lease renewals lagged and healthy nodes turned suspect, or, with the " +
				"control plane favoured, the replicas starved and Raft elections repeated), so the bench never reached its measurement window " +
				"there. The leader's idle work " +
				"grows with the nodes it watches (informers, one verdict and one identity set per node, resyncs that walk them), so the " +
				"figures at 2,000 will be higher; whether they stay within the bound this run does not show. A machine with more cores " +
				"would measure it (`-steady-nodes 2000`).\n")
		} else {
			fmt.Fprintf(&b, "CPU %s (%.1f %%), memory %s (%.0f MB); follower %.1f %% and %.0f MB.", met(s.Leader.CPUPercent <= 3), s.Leader.CPUPercent,
				met(s.Leader.RSSBytes <= 150e6), float64(s.Leader.RSSBytes)/1e6, s.Follower.CPUPercent, float64(s.Follower.RSSBytes)/1e6)
			for _, g := range r.Growth {
				if g.Error == "" && g.Nodes > s.Nodes {
					fmt.Fprintf(&b, " At %d nodes renewed every %g s: leader %.1f %% and %.0f MB, follower %.1f %% and %.0f MB.", g.Nodes, g.Renewal(),
						g.Leader.CPUPercent, float64(g.Leader.RSSBytes)/1e6, g.Follower.CPUPercent, float64(g.Follower.RSSBytes)/1e6)
				}
			}
			b.WriteString("\n")
		}
	} else {
		b.WriteString("- **Leader at 2,000 nodes ≤ 3 % of a core and ≤ 150 MB RSS**: not measured in this run (`-steady-nodes 2000`).\n")
	}
	if s := r.Storm; s == nil {
		b.WriteString("- **100 of 1,000 nodes fenced and evicted within 30 s of the last renewal**: not measured in this run (`-storm-nodes 1000`).\n")
	} else {
		const bound = 30 // seconds after the last renewal of the dying nodes' Leases
		done := s.Error == "" && s.AllEvicted > 0
		fmt.Fprintf(&b, "- **%d of %d nodes fenced and evicted within %d s of the last renewal**: %s (all fenced %.0f s, all evicted %.0f s",
			s.Dying, s.Nodes, bound, met(done && s.AllEvicted <= bound), s.AllFenced, s.AllEvicted)
		if off := s.fromPowerOff(); off.AllEvicted != 0 {
			fmt.Fprintf(&b, "; from power-off %.0f s and %.0f s", off.AllFenced, off.AllEvicted)
		}
		for _, st := range s.Steps {
			if strings.HasPrefix(st.Step, "evicted") {
				fmt.Fprintf(&b, "; first to last eviction %.0f s", st.Spread)
			}
		}
		b.WriteString(").")
		if !done || s.AllEvicted > bound {
			b.WriteString(stormPace(s, r.Host.CPUs))
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
	return b.String()
}

// stormPace says, from the storm's own figures, what set its pace: how
// busy the machine was (every process's CPU time over the window) and the
// array family done last, with the time its fencing calls held their
// call slots (plans, writes and read-backs: count × mean, over the
// default maxConcurrentCalls of 8).
func stormPace(s *StormResult, cpus int) string {
	var b strings.Builder
	var cpu, window float64
	for _, p := range s.ProcessCPU {
		cpu += p.CPUSeconds
		window = p.WindowSeconds
	}
	if window > 0 {
		fmt.Fprintf(&b, " Over the profiled window (%.0f s) every process of the run together used %.2f of the machine's %d cores",
			window, cpu/window, cpus)
		for i, p := range s.ProcessCPU {
			if i == 3 {
				break
			}
			fmt.Fprintf(&b, "; %s %.2f", p.Command, p.Share)
		}
		b.WriteString(".")
	}
	var pace *FamilyTime
	for i := range s.Families {
		if f := &s.Families[i]; pace == nil || f.DoneMedian > pace.DoneMedian {
			pace = f
		}
	}
	if pace != nil && pace.Calls != nil {
		var held float64
		for _, op := range []string{"plan", "apply", "verify"} {
			held += pace.Calls[op].Seconds
		}
		fmt.Fprintf(&b, " The family done last was %s (%.1f s after the intent in the median): its plans, writes and read-backs "+
			"held call slots for %.0f s in all, %.0f s spread over 8 slots (`maxConcurrentCalls`), waiting in fenced and in the "+
			"machine's scheduler as much as in the array (see the family table and the notes).", pace.Family, pace.DoneMedian, held, held/8)
	}
	b.WriteString(" What would help: a machine with more cores, to tell fenced's limits from the shared CPU, and fewer requests " +
		"per fence on the array that sets the pace.")
	return b.String()
}

// within says whether a figure measured short of the target's size is
// inside the target's bound.
func within(ok bool) string {
	if ok {
		return "within the bound"
	}
	return "over the bound"
}

func met(ok bool) string {
	if ok {
		return "met"
	}
	return "missed"
}
