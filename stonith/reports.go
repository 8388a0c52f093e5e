package stonith

import (
	"time"
)

// nodeReport is what the leader knows about a node beyond the ledger: why
// its pipeline is held up, what a dry-run would do, whether it needs a
// reboot. It feeds /status, the blocked gauge and the logs; it is memory
// only and rebuilt by the next leader's reconciles.
type nodeReport struct {
	Cluster string
	Node    string
	FenceID string
	// Blocked says why the pipeline cannot go on (an array that cannot be
	// fenced or restored, a guard). BlockedArrays names the arrays.
	Blocked       string
	BlockedArrays []string
	BlockedSince  time.Time
	// NeedsReboot is set when the node came back with its fence-time boot ID.
	NeedsReboot string
	// Recovery says what the recovery of an evicted node waits for.
	Recovery string
	// DryRun is what a dry-run decided.
	DryRun *DryRunReport
	// FailedAt is when the Failed verdict that opened the fence was seen.
	FailedAt  time.Time
	UpdatedAt time.Time
}

func (c *Controller) report(cluster, node string, fn func(r *nodeReport)) {
	now := c.clk.Now()
	c.mu.Lock()
	k := nodeKey(cluster, node)
	r := c.reports[k]
	if r == nil {
		r = &nodeReport{Cluster: cluster, Node: node}
		c.reports[k] = r
	}
	wasBlocked := r.Blocked != ""
	fn(r)
	if r.Blocked != "" && !wasBlocked {
		r.BlockedSince = now
	}
	if r.Blocked == "" {
		r.BlockedSince, r.BlockedArrays = time.Time{}, nil
	}
	r.UpdatedAt = now
	c.mu.Unlock()
	c.updateBlockedGauge()
}

// block marks the node's pipeline as held up; it returns true the first
// time (for this reason) so the caller logs and records an Event once.
func (c *Controller) block(cluster, node, fenceID, reason string, arrays []string) bool {
	first := false
	c.report(cluster, node, func(r *nodeReport) {
		first = r.Blocked != reason || r.FenceID != fenceID
		r.FenceID, r.Blocked, r.BlockedArrays = fenceID, reason, arrays
	})
	return first
}

func (c *Controller) unblock(cluster, node string) {
	c.mu.Lock()
	r := c.reports[nodeKey(cluster, node)]
	c.mu.Unlock()
	if r == nil {
		return
	}
	c.report(cluster, node, func(r *nodeReport) { r.Blocked = "" })
}

func (c *Controller) clearReport(cluster, node string) {
	c.mu.Lock()
	delete(c.reports, nodeKey(cluster, node))
	c.mu.Unlock()
	c.updateBlockedGauge()
}

func (c *Controller) reportOf(cluster, node string) (nodeReport, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.reports[nodeKey(cluster, node)]
	if r == nil {
		return nodeReport{}, false
	}
	return *r, true
}

func (c *Controller) updateBlockedGauge() {
	counts, reboot := map[string]int{}, map[string]int{}
	c.mu.Lock()
	for _, r := range c.reports {
		if r.Blocked != "" && r.FenceID != "" {
			counts[r.Cluster]++
		}
		if r.NeedsReboot != "" {
			reboot[r.Cluster]++
		}
	}
	c.mu.Unlock()
	for name := range c.clusters {
		c.metrics.setBlocked(name, counts[name])
		c.metrics.setAwaitingReboot(name, reboot[name])
	}
}
