package detector

import (
	"maps"
	"slices"
	"time"

	"github.com/fenced-project/fenced/arrayclients"
)

// StoragePathEvidence is what a storage path verdict rests on.
type StoragePathEvidence struct {
	// Protected names the arrays holding the node's protected volumes.
	Protected []string `json:"protected,omitempty"`
	// LostSince holds, per array, the start of the current run of samples
	// reporting the node disconnected with no I/O.
	LostSince map[string]time.Time `json:"lostSince,omitempty"`
	// LostOn names the arrays where the run covers the grace.
	LostOn []string `json:"lostOn,omitempty"`
	// StormArrays names the arrays whose storage storm guard blocks.
	StormArrays []string  `json:"stormArrays,omitempty"`
	FailedAt    time.Time `json:"failedAt,omitzero"`
}

// Merge evaluates the storage path loss path at now and merges it into the
// main machine's result res: a node whose main verdict is Healthy (fresh
// heartbeat) gets a storage path verdict when an array holding one of its
// protected volumes has reported it disconnected with no I/O — Suspect
// (storage-path-degraded) during the grace, Failed (storage-path-lost)
// after it, or Blocked (storage-storm, no-quorum, paused,
// identity-ambiguous) when a guard holds. Any other main verdict stands.
// Counts and Changes are recomputed against what Merge gave last. It
// returns the merged result and every array's storage storm guard.
func (pm *PathMachine) Merge(res Result, self Self, now time.Time) (Result, []StorageStormState) {
	p := pm.policy
	storms := pm.updateStorms(len(res.Verdicts), now)
	out := res
	out.Verdicts = make([]Verdict, 0, len(res.Verdicts))
	out.Changes = nil
	out.Counts = map[State]int{}
	seen := map[string]bool{}
	for _, v := range res.Verdicts {
		seen[v.Node] = true
		if n := pm.nodes[v.Node]; n != nil {
			if v.State == Healthy && res.Doubt == ReasonNone {
				pm.judge(n, &v, self, now)
			} else {
				n.failed, n.lostOn = false, nil
			}
		}
		prev, ok := pm.published[v.Node]
		if !ok || prev.State != v.State || prev.Reason != v.Reason {
			v.Since = now
			out.Changes = append(out.Changes, v)
		} else {
			v.Since = prev.Since
		}
		pm.published[v.Node] = Verdict{State: v.State, Reason: v.Reason, Since: v.Since}
		out.Counts[v.State]++
		out.Verdicts = append(out.Verdicts, v)
	}
	for name := range pm.published {
		if !seen[name] {
			pm.Forget(name)
		}
	}
	if next := now.Add(p.SampleInterval); out.NextCheck.IsZero() || next.Before(out.NextCheck) {
		out.NextCheck = next
	}
	return out, storms
}

// judge gives a node with a fresh heartbeat its storage path verdict.
func (pm *PathMachine) judge(n *pathNode, v *Verdict, self Self, now time.Time) {
	p := pm.policy
	ev := StoragePathEvidence{Protected: slices.Clone(n.protected), FailedAt: n.failedAt}
	protectedFresh := !n.protAt.IsZero() && now.Sub(n.protAt) <= 2*p.SampleMaxAge
	var degraded bool
	for _, a := range n.protected {
		since, ok := n.lostSince[a]
		if !ok || !pm.fresh(n.samples[a], now) {
			continue
		}
		if ev.LostSince == nil {
			ev.LostSince = map[string]time.Time{}
		}
		ev.LostSince[a] = since
		degraded = true
		if now.Sub(since) >= p.Grace {
			ev.LostOn = append(ev.LostOn, a)
		}
	}
	if n.failed {
		// Sticky: Failed until every array it was lost on shows the path
		// back (a fresh sample that is not lost).
		back := true
		for _, a := range n.lostOn {
			s, ok := n.samples[a]
			back = back && ok && pm.fresh(s, now) && !lost(s)
		}
		if !back {
			ev.LostOn = slices.Clone(n.lostOn)
			ev.FailedAt = n.failedAt
			v.State, v.Reason = Failed, ReasonStoragePathLost
			v.Evidence.StoragePath = &ev
			v.Evidence.CorroboratedBy = []string{"storage-path"}
			return
		}
		n.failed, n.lostOn, n.failedAt = false, nil, time.Time{}
		ev.FailedAt = time.Time{}
	}
	if !degraded || !protectedFresh {
		return
	}
	v.Evidence.StoragePath = &ev
	if len(ev.LostOn) == 0 {
		v.State, v.Reason = Suspect, ReasonStoragePathDegraded
		return
	}
	for _, a := range ev.LostOn {
		if pm.arrays[a] != nil && pm.arrays[a].storm.Active {
			ev.StormArrays = append(ev.StormArrays, a)
		}
	}
	block := ReasonNone
	switch {
	case len(ev.StormArrays) > 0:
		block = ReasonStorageStorm
	case !self.Quorum:
		block = ReasonNoQuorum
	case self.Paused:
		block = ReasonPaused
	case len(v.Evidence.AmbiguousArrays) > 0:
		block = ReasonIdentityAmbiguous
	}
	if block != ReasonNone {
		v.State, v.Reason = Blocked, block
		v.Evidence.WouldFail = true
		return
	}
	n.failed, n.failedAt, n.lostOn = true, now, slices.Clone(ev.LostOn)
	ev.FailedAt = now
	v.State, v.Reason = Failed, ReasonStoragePathLost
	v.Evidence.CorroboratedBy = []string{"storage-path"}
}

// updateStorms computes every array's storage storm guard: active while
// more of the cluster's nodes than the limit are reported disconnected by
// the array (fresh samples), or while the array's last sampling round
// failed or had errors. A node lost on such an array is Blocked
// (storage-storm), never Failed; when the guard clears every lost run on
// its array is dropped, so a node must then be lost for a full grace
// again: an array outage never turns into fences.
func (pm *PathMachine) updateStorms(total int, now time.Time) []StorageStormState {
	limit := pm.policy.MaxDisconnected.Of(total)
	names := map[string]bool{}
	for a := range pm.arrays {
		names[a] = true
	}
	count := map[string]int{}
	for _, n := range pm.nodes {
		for a, s := range n.samples {
			names[a] = true
			if s.Err == "" && s.Health.Connectivity == arrayclients.Disconnected && pm.fresh(s, now) {
				count[a]++
			}
		}
	}
	out := make([]StorageStormState, 0, len(names))
	for _, name := range slices.Sorted(maps.Keys(names)) {
		a := pm.array(name)
		st := StorageStormState{Array: name, Disconnected: count[name], Limit: limit, Nodes: total}
		switch {
		case a.sweep.Err != "":
			st.Active, st.Reason, st.Error = true, "api-error", a.sweep.Err
		case a.sweep.Errors > 0:
			st.Active, st.Reason = true, "api-error"
			st.Error = "health calls failed for some nodes in the last sampling round"
		case count[name] > limit:
			st.Active, st.Reason = true, "disconnected"
		}
		if st.Active {
			st.Since = a.storm.Since
			if !a.storm.Active {
				st.Since = now
			}
		} else if a.storm.Active {
			for _, n := range pm.nodes {
				delete(n.lostSince, name)
			}
		}
		a.storm = st
		out = append(out, st)
	}
	return out
}
