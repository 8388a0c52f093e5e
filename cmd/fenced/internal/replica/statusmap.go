package replica

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/fenced-project/fenced/cluster/ledger"
	"github.com/fenced-project/fenced/cmd/fenced/status"
	"github.com/fenced-project/fenced/detector"
	"github.com/fenced-project/fenced/stonith"
)

// recentFences is how long a closed or aborted fence stays in /status.
const recentFences = 24 * time.Hour

// statusProviders fills the clusters, fences and arrays sections of
// /status.
func (f *fencing) statusProviders() {
	f.d.AddStatusProvider(func(_ context.Context, st *status.Status) {
		var ps stonith.Status
		if f.ctrl != nil {
			ps = f.ctrl.Status()
		}
		var hist []*ledger.Fence
		paused := map[string][]status.Pause{}
		known := map[string]map[string]bool{}
		f.node.Ledger().Read(func(s *ledger.State) {
			cutoff := time.Now().Add(-recentFences)
			for _, c := range s.Clusters {
				for _, n := range c.Nodes {
					for _, h := range n.History {
						if h.UpdatedAt.After(cutoff) {
							hist = append(hist, &ledger.Fence{ID: h.ID, Cluster: h.Cluster, Node: h.Node, Kind: h.Kind,
								Origin: h.Origin, Operator: h.Operator, Reason: h.Reason, State: h.State,
								FailReason: h.FailReason, OpenedAt: h.OpenedAt, UpdatedAt: h.UpdatedAt,
								Steps: slices.Clone(h.Steps), Confirmations: slices.Clone(h.Confirmations)})
						}
					}
				}
			}
			for _, cr := range f.clusters {
				paused[cr.cfg.Name] = pauseOf(s, cr.cfg.Name)
				known[cr.cfg.Name] = identitiesKnown(cr, s.Clusters[cr.cfg.Name])
			}
		})
		for _, cr := range f.clusters {
			cs := f.clusterStatus(cr, ps, paused[cr.cfg.Name])
			if cs.Nodes != nil {
				cs.Nodes.Unprotected = unprotectedCount(cr, known[cr.cfg.Name], cs.Unprotected)
			}
			st.Clusters = append(st.Clusters, cs)
		}
		st.Fences = fenceStatuses(ps, hist)
		st.Arrays = f.checker.Status()
	})
}

// pauseOf is the pauses in effect for the cluster: its own and those of
// every cluster, oldest first; empty when fencing is not paused for it.
func pauseOf(s *ledger.State, cluster string) []status.Pause {
	return statusPauses(s.HoldersOf(cluster))
}

// identitiesKnown names the cluster's current nodes whose array
// identities the ledger holds.
func identitiesKnown(cr *clusterRuntime, c *ledger.ClusterState) map[string]bool {
	out := map[string]bool{}
	if cr.kube == nil || c == nil {
		return out
	}
	for name, rec := range c.Nodes {
		if _, ok := cr.kube.Node(name); ok && !rec.IdentitiesAt.IsZero() {
			out[name] = true
		}
	}
	return out
}

// unprotectedCount counts the cluster's nodes that cannot be fenced: the
// current nodes whose identities are not learned, and those with gaps.
func unprotectedCount(cr *clusterRuntime, known map[string]bool, gaps []status.UnprotectedNode) int {
	names := map[string]bool{}
	if cr.kube != nil {
		for _, n := range cr.kube.NodeNames() {
			if !known[n] {
				names[n] = true
			}
		}
	}
	for _, u := range gaps {
		names[u.Name] = true
	}
	return len(names)
}

// clusterStatus merges the API server probe, the detector and the
// pipeline's view of one cluster.
func (f *fencing) clusterStatus(cr *clusterRuntime, ps stonith.Status, pauses []status.Pause) status.Cluster {
	out := cr.probe.Status()
	out.Paused, out.Pauses = len(pauses) > 0, pauses
	for i, p := range pauses { // the cluster's own first, as before
		if p.Scope != status.PauseScopeAll {
			out.Pause = &pauses[i]
			break
		}
	}
	if out.Pause == nil && len(pauses) > 0 {
		out.Pause = &pauses[0]
	}
	if cr.err != nil {
		out.Ready, out.Error = false, cr.err.Error()
		return out
	}
	ds := cr.runner.Status()
	counts := &status.NodeCounts{Healthy: ds.Counts[detector.Healthy], Suspect: ds.Counts[detector.Suspect],
		Failed: ds.Counts[detector.Failed], Blocked: ds.Counts[detector.Blocked]}
	counts.Total = counts.Healthy + counts.Suspect + counts.Failed + counts.Blocked
	out.Nodes = counts
	if ds.Doubt != "" {
		out.Doubt = string(ds.Doubt)
		out.Ready = false
		if out.Error == "" {
			out.Error = "this replica doubts its view of the cluster: " + string(ds.Doubt)
		}
	}
	if ds.Storm.Active {
		s := &status.Storm{Limit: cr.cfg.StormLimit.String(), Allowed: ds.Storm.Limit, Unhealthy: ds.Storm.Unhealthy}
		if !ds.Storm.CooldownUntil.IsZero() {
			t := ds.Storm.CooldownUntil.UTC()
			s.CooldownUntil = &t
		}
		out.Storm = s
	}
	if lt := ds.LeaseTiming; lt != nil {
		out.LeaseTiming = lt.String()
	}
	for _, s := range ds.StorageStorm {
		if s.Active {
			out.StorageStorm = append(out.StorageStorm, status.StorageStorm{Array: s.Array, Reason: s.Reason,
				Disconnected: s.Disconnected, Allowed: s.Limit, Error: s.Error, Since: s.Since.UTC()})
		}
	}
	listed := map[string]bool{}
	for _, fs := range ps.Fences {
		if fs.Cluster != cr.cfg.Name {
			continue
		}
		if fs.Kind == string(ledger.KindFence) {
			counts.Fenced++
		}
		verdict, reason := "fenced", fs.ID+" "+fs.State
		if fs.NeedsReboot != "" {
			verdict, reason = "needs-reboot", fs.NeedsReboot
		} else if fs.Kind == string(ledger.KindUnfence) {
			verdict = "unfencing"
		}
		out.Unhealthy = append(out.Unhealthy, status.Node{Name: fs.Node, Verdict: verdict, Reason: reason, Since: fs.OpenedAt})
		listed[fs.Node] = true
	}
	held := map[string]string{}
	for _, h := range ps.Held {
		if h.Cluster == cr.cfg.Name {
			held[h.Node] = h.Note
		}
	}
	for _, v := range ds.Nodes {
		if listed[v.Node] {
			continue
		}
		reason := string(v.Reason)
		if v.Partitioned && v.Reason != detector.ReasonPartitioned {
			reason += " (partitioned)"
		}
		if note := held[v.Node]; note != "" && v.State == detector.Failed {
			// Why the leader does not fence it (a guard, a medik8s
			// remediator holding the node's Lease).
			reason += "; " + note
		}
		out.Unhealthy = append(out.Unhealthy, status.Node{Name: v.Node, Verdict: string(v.State), Reason: reason, Since: v.Since})
	}
	slices.SortFunc(out.Unhealthy, func(a, b status.Node) int { return strings.Compare(a.Name, b.Name) })
	for _, u := range ps.Unprotected {
		if u.Cluster != cr.cfg.Name {
			continue
		}
		n := status.UnprotectedNode{Name: u.Node, Since: u.Since}
		for _, g := range u.Gaps {
			n.Gaps = append(n.Gaps, status.Gap{Volume: g.Volume, Array: g.Array, Reason: string(g.Reason), Detail: g.Detail})
		}
		out.Unprotected = append(out.Unprotected, n)
	}
	for _, u := range ps.Unplaced {
		if u.Cluster == cr.cfg.Name {
			out.Unplaced = append(out.Unplaced, status.UnplacedVolume{PV: u.PV, Driver: u.Driver, Handle: u.Handle,
				Reason: string(u.Reason), Missing: u.Missing, Since: u.Since})
		}
	}
	if !ds.EvaluatedAt.IsZero() {
		t := ds.EvaluatedAt.UTC()
		out.CheckedAt = &t
	}
	return out
}

// fenceStatuses lists the open fence records (with the leader's notes) and
// the recently finished ones.
func fenceStatuses(ps stonith.Status, hist []*ledger.Fence) []status.Fence {
	var out []status.Fence
	for _, fs := range ps.Fences {
		e := status.Fence{ID: fs.ID, Cluster: fs.Cluster, Node: fs.Node, Kind: fs.Kind, Origin: fs.Origin,
			Operator: fs.Operator, Reason: fs.Reason, Phase: fs.State, StartedAt: fs.OpenedAt, UpdatedAt: fs.UpdatedAt,
			Error: fs.FailReason, Blocked: fs.Blocked, NeedsReboot: fs.NeedsReboot,
			Recovery: fs.Recovery, Regressions: fs.Regressions, LastRegression: fs.LastRegression}
		e.UnfenceOperator, e.ForcedUnfence = unfenceAskedBy(fs.Steps)
		for _, cf := range fs.Confirmations {
			e.Confirmations = append(e.Confirmations, cf.Text())
		}
		for _, a := range fs.Arrays {
			e.Arrays = append(e.Arrays, status.FenceArray{Array: a.Array, Step: a.Step, Summary: a.Summary, Error: a.LastError,
				Confirmed: a.Confirmed})
			if e.Error == "" && a.LastError != "" && a.Step != "verified" && a.Step != "restored" {
				e.Error = a.Array + ": " + a.LastError
			}
		}
		out = append(out, e)
	}
	slices.SortFunc(hist, func(a, b *ledger.Fence) int { return b.UpdatedAt.Compare(a.UpdatedAt) })
	for _, h := range hist {
		out = append(out, FinishedFence(h))
	}
	return out
}

// FinishedFence is a closed or aborted ledger record for /status and the
// history.
func FinishedFence(h *ledger.Fence) status.Fence {
	e := status.Fence{ID: h.ID, Cluster: h.Cluster, Node: h.Node, Kind: string(h.Kind),
		Origin: string(h.Origin), Operator: h.Operator, Reason: h.Reason, Phase: string(h.State),
		StartedAt: h.OpenedAt, UpdatedAt: h.UpdatedAt, Error: h.FailReason}
	e.UnfenceOperator, e.ForcedUnfence = unfenceAskedBy(h.Steps)
	e.Regressions, e.LastRegression = stonith.Regressions(h)
	for _, cf := range h.Confirmations {
		e.Confirmations = append(e.Confirmations, cf.Text())
	}
	return e
}

// unfenceAskedBy returns who asked for the record's unfence and whether
// it was forced, from its unfence-intent step.
func unfenceAskedBy(steps []ledger.Step) (string, bool) {
	for _, st := range slices.Backward(steps) {
		if st.To == ledger.StateUnfenceIntent {
			return st.Operator, st.Forced
		}
	}
	return "", false
}
