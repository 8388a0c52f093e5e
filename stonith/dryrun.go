package stonith

import (
	"sort"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/fenced-project/fenced/arrayclients"
)

// planSummary is one array's plan as /status shows it.
type planSummary struct {
	Array   string `json:"array"`
	Family  string `json:"family"`
	Summary string `json:"summary"`
}

// ledgerPlans collects plans read concurrently.
type ledgerPlans struct {
	mu   sync.Mutex
	list []arrayclients.Plan
}

func (lp *ledgerPlans) add(p arrayclients.Plan) {
	lp.mu.Lock()
	defer lp.mu.Unlock()
	lp.list = append(lp.list, p)
	sort.Slice(lp.list, func(i, j int) bool { return lp.list[i].Array < lp.list[j].Array })
}

func (lp *ledgerPlans) summaries() []planSummary {
	lp.mu.Lock()
	defer lp.mu.Unlock()
	out := make([]planSummary, 0, len(lp.list))
	for _, p := range lp.list {
		out = append(out, planSummary{Array: p.Array, Family: string(p.Family), Summary: p.Summary})
	}
	return out
}

// DryRunReport is what a dry-run decided for a failed node: the fence it
// would open, with the plans read from the arrays (read-only) and the pods
// it would force-delete. Nothing was written anywhere.
type DryRunReport struct {
	DecidedAt time.Time `json:"decidedAt"`
	// Verdict is the Failed verdict's reason.
	Verdict string `json:"verdict"`
	// Plans are what the fence would remove on each array.
	Plans []planSummary `json:"plans"`
	// Unplanned names arrays whose plan could not be read, with the error.
	Unplanned map[string]string `json:"unplanned,omitempty"`
	BootID    string            `json:"bootID,omitempty"`
	// WouldTaint are the taints it would put on the node.
	WouldTaint []string `json:"wouldTaint"`
	// WouldDelete are the pods (namespace/name) it would force-delete.
	WouldDelete []string `json:"wouldDelete"`
	// Unprotected lists the footprint volumes a fence could not cut: with
	// any, the node would not be fenced at all.
	Unprotected []VolumeGap `json:"unprotected,omitempty"`
}

// dryRun records (in memory, the log and a metric) what a fence would do.
// It is reported once per failure episode.
func (c *Controller) dryRun(cl *clusterRuntime, node string, ve verdictEntry, d decision) {
	rep := &DryRunReport{
		DecidedAt: c.clk.Now().UTC(), Verdict: string(ve.Reason), Plans: d.Plans, BootID: d.BootID,
		WouldTaint:  []string{TaintFenced + "=<fence id>:NoSchedule", TaintOutOfService + "=" + OutOfServiceValue + ":NoExecute"},
		WouldDelete: d.Evict,
	}
	if len(d.Missing) > 0 {
		rep.Unplanned = d.Missing
	}
	if len(d.Gaps) > 0 {
		rep.Unprotected, rep.WouldTaint, rep.WouldDelete = d.Gaps, nil, nil
	}
	first := false
	c.report(cl.Name, node, func(r *nodeReport) {
		first = r.DryRun == nil || r.FailedAt != ve.ObservedAt
		if first {
			r.DryRun, r.FailedAt = rep, ve.ObservedAt
		}
		r.Blocked = ""
	})
	if first {
		c.metrics.fence(cl.Name, ResultDryRun)
		c.log.Warn("dry-run: would fence node", "cluster", cl.Name, "node", node, "plans", len(d.Plans),
			"unplanned", len(d.Missing), "wouldDelete", len(d.Evict))
	}
}

func labelSet(m map[string]string) labels.Set { return labels.Set(m) }
