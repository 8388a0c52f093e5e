package stonith

import (
	"slices"
	"sort"
	"time"

	"github.com/fenced-project/fenced/cluster/ledger"
)

// Status is the pipeline's section of /status. Fences and pause flags come
// from the ledger (the same on every replica); Blocked, NeedsReboot and
// DryRun are the leader's reports (empty on a follower).
type Status struct {
	// Leading is true on the replica that runs the pipeline.
	Leading bool `json:"leading"`
	// Paused is set while a pause of every cluster is in effect;
	// PausedClusters names the clusters with a pause of their own.
	Paused         bool     `json:"paused"`
	PausedClusters []string `json:"pausedClusters,omitempty"`
	// PausedBy is who holds the oldest pause of every cluster.
	PausedBy string `json:"pausedBy,omitempty"`
	// Pauses lists every pause in effect, oldest first: who, why, scope
	// and since when.
	Pauses []PauseHolder `json:"pauses,omitempty"`
	// Fences lists every open fence record with its steps and per-array results.
	Fences []FenceStatus `json:"fences"`
	// NeedsReboot lists fenced nodes that came back without a reboot.
	NeedsReboot []NodeNote `json:"needsReboot,omitempty"`
	// Held lists failed nodes not fenced because a guard holds, with why.
	Held []NodeNote `json:"held,omitempty"`
	// DryRun lists what dry-run clusters would have done.
	DryRun []DryRunStatus `json:"dryRun,omitempty"`
	// Unprotected lists the nodes whose footprint fenced cannot fully cut,
	// with every gap (this replica's view).
	Unprotected []Unprotected `json:"unprotected,omitempty"`
	// Unplaced lists the PersistentVolumes whose handle names an array,
	// access zone or metro partner no configured array holds, attached or
	// not: configuration drift (this replica's view).
	Unplaced []Unplaced `json:"unplaced,omitempty"`
}

// FenceStatus is one open fence record.
type FenceStatus struct {
	ID       string `json:"id"`
	Cluster  string `json:"cluster"`
	Node     string `json:"node"`
	Kind     string `json:"kind"`
	Origin   string `json:"origin"`
	Operator string `json:"operator,omitempty"`
	Reason   string `json:"reason"`
	// State is the last committed step.
	State      string    `json:"state"`
	FailReason string    `json:"failReason,omitempty"`
	OpenedAt   time.Time `json:"openedAt"`
	UpdatedAt  time.Time `json:"updatedAt"`
	BootID     string    `json:"bootID,omitempty"`
	// Steps are the states the record went through, with times and authors.
	Steps  []ledger.Step `json:"steps"`
	Arrays []ArrayStatus `json:"arrays"`
	// Blocked says why the fence cannot go on (the leader's view).
	Blocked      string    `json:"blocked,omitempty"`
	BlockedSince time.Time `json:"blockedSince,omitzero"`
	// NeedsReboot is set when the node came back with its fence-time boot ID.
	NeedsReboot string `json:"needsReboot,omitempty"`
	// Recovery says what the unfence of an evicted node waits for (the
	// node to come back, a reboot, the settle period, a detach).
	Recovery string `json:"recovery,omitempty"`
	// Regressions counts the times a held read-back found the node's
	// access again after the fence was verified; LastRegression is the
	// ledger note of the last one (what access, on which array).
	Regressions    int    `json:"regressions,omitempty"`
	LastRegression string `json:"lastRegression,omitempty"`
	// Confirmations are operators' attestations that the node cannot
	// write to an array (`fenced confirm`): those arrays count as cut for
	// this fence without a read-back.
	Confirmations []ledger.Confirmation `json:"confirmations,omitempty"`
}

// ArrayStatus is a fence's progress on one array.
type ArrayStatus struct {
	Array   string `json:"array"`
	Family  string `json:"family,omitempty"`
	Summary string `json:"summary,omitempty"`
	// Step is unplanned, planned, applied, verified, undone or restored;
	// confirmed-by-operator when an operator confirmed the node cannot
	// write there (Confirmed says who, when and why) and no read-back
	// verified it.
	Step      string    `json:"step"`
	Attempts  int       `json:"attempts"`
	Failures  int       `json:"failures"`
	LastError string    `json:"lastError,omitempty"`
	LastAt    time.Time `json:"lastAt,omitzero"`
	Confirmed string    `json:"confirmed,omitempty"`
	// Abandoned says who abandoned the array's restore, when and why
	// (`fenced unfence --abandon-array`); Step is then not-restored.
	Abandoned string `json:"abandoned,omitempty"`
}

// NodeNote is a line about one node.
type NodeNote struct {
	Cluster string    `json:"cluster"`
	Node    string    `json:"node"`
	FenceID string    `json:"fenceID,omitempty"`
	Note    string    `json:"note"`
	Since   time.Time `json:"since,omitzero"`
}

// DryRunStatus is a dry-run decision about one node.
type DryRunStatus struct {
	Cluster string       `json:"cluster"`
	Node    string       `json:"node"`
	Report  DryRunReport `json:"report"`
}

// Status returns the pipeline's status section.
func (c *Controller) Status() Status {
	st := Status{Leading: c.leadership() != nil, Fences: []FenceStatus{}}
	c.cfg.Ledger.Read(func(s *ledger.State) {
		st.Pauses = PauseHolders(s.Holders())
		for _, h := range st.Pauses {
			if h.Scope == PauseScopeAll {
				if !st.Paused {
					st.PausedBy = h.Operator
				}
				st.Paused = true
			} else if !slices.Contains(st.PausedClusters, h.Scope) {
				st.PausedClusters = append(st.PausedClusters, h.Scope)
			}
		}
		for _, f := range s.OpenFences() {
			st.Fences = append(st.Fences, fenceStatus(f))
		}
	})
	sort.Strings(st.PausedClusters)
	st.Unprotected = c.unprotectedList()
	st.Unplaced = c.unplacedList()
	c.mu.Lock()
	reports := make([]nodeReport, 0, len(c.reports))
	for _, r := range c.reports {
		reports = append(reports, *r)
	}
	c.mu.Unlock()
	sort.Slice(reports, func(i, j int) bool {
		return nodeKey(reports[i].Cluster, reports[i].Node) < nodeKey(reports[j].Cluster, reports[j].Node)
	})
	for _, r := range reports {
		for i := range st.Fences {
			f := &st.Fences[i]
			if f.Cluster == r.Cluster && f.Node == r.Node && f.ID == r.FenceID {
				f.Blocked, f.BlockedSince, f.NeedsReboot = r.Blocked, r.BlockedSince, r.NeedsReboot
				if f.State == string(ledger.StateEvicted) {
					f.Recovery = r.Recovery
				}
			}
		}
		if r.NeedsReboot != "" {
			st.NeedsReboot = append(st.NeedsReboot, NodeNote{Cluster: r.Cluster, Node: r.Node, FenceID: r.FenceID,
				Note: "needs reboot: " + r.NeedsReboot, Since: r.UpdatedAt})
		}
		if r.Blocked != "" && r.FenceID == "" {
			st.Held = append(st.Held, NodeNote{Cluster: r.Cluster, Node: r.Node, Note: r.Blocked, Since: r.BlockedSince})
		}
		if r.DryRun != nil {
			st.DryRun = append(st.DryRun, DryRunStatus{Cluster: r.Cluster, Node: r.Node, Report: *r.DryRun})
		}
	}
	return st
}

// StepConfirmed is the ArrayStatus step of an array an operator confirmed
// the node cannot write to, without a verified read-back.
const StepConfirmed = "confirmed-by-operator"

// StepAbandoned is the ArrayStatus step of an array whose restore an
// operator abandoned: the unfence does not give access back there.
const StepAbandoned = "not-restored"

func fenceStatus(f *ledger.Fence) FenceStatus {
	fs := FenceStatus{
		ID: f.ID, Cluster: f.Cluster, Node: f.Node, Kind: string(f.Kind), Origin: string(f.Origin),
		Operator: f.Operator, Reason: f.Reason, State: string(f.State), FailReason: f.FailReason,
		OpenedAt: f.OpenedAt, UpdatedAt: f.UpdatedAt, BootID: f.BootID,
		Steps: append([]ledger.Step(nil), f.Steps...), Arrays: []ArrayStatus{},
		Confirmations: slices.Clone(f.Confirmations),
	}
	fs.Regressions, fs.LastRegression = Regressions(f)
	arrays := map[string]bool{}
	for a := range f.Identities {
		arrays[a] = true
	}
	for _, p := range f.Plans {
		arrays[p.Array] = true
	}
	for _, cf := range f.Confirmations {
		if cf.Array != "" {
			arrays[cf.Array] = true
		}
	}
	names := make([]string, 0, len(arrays))
	for a := range arrays {
		names = append(names, a)
	}
	sort.Strings(names)
	for _, a := range names {
		as := ArrayStatus{Array: a, Step: "unplanned"}
		if p, ok := planOf(f, a); ok {
			as.Family, as.Summary, as.Step = string(p.Family), p.Summary, "planned"
		}
		if r := f.Results[a]; r != nil {
			as.Attempts, as.Failures, as.LastError, as.LastAt = r.Attempts, r.Failures, r.LastError, r.LastAt
			switch {
			case r.RestoreVerified:
				as.Step = "restored"
			case r.Undone:
				as.Step = "undone"
			case r.Verified:
				as.Step = "verified"
			case r.Applied:
				as.Step = "applied"
			}
		}
		if cf, ok := f.Confirmed(a); ok {
			as.Confirmed = cf.Text()
			if as.Step != "verified" && as.Step != "undone" && as.Step != "restored" {
				as.Step = StepConfirmed
			}
		}
		if ab, ok := f.AbandonedRestore(a); ok {
			as.Abandoned, as.Step = ab.Text(), StepAbandoned
		}
		fs.Arrays = append(fs.Arrays, as)
	}
	return fs
}
