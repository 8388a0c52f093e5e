package stonith

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/cluster/ledger"
)

// Unprotected is a node whose storage footprint fenced cannot fully cut
// (PRODUCT.md invariant 7): on a Failed verdict it is neither fenced,
// tainted nor evicted. /status lists it, fenced_nodes_unprotected counts
// it, and the leader records a Kubernetes Event on it and logs it when its
// gaps change.
type Unprotected struct {
	Cluster string      `json:"cluster"`
	Node    string      `json:"node"`
	Gaps    []VolumeGap `json:"gaps"`
	// Since is when this replica first saw the node unprotected.
	Since time.Time `json:"since"`
}

// protectionState is one node's last evaluation.
type protectionState struct {
	Unprotected
	// key identifies the gap set (the Event key).
	key string
	// reported is the key the leader last logged and recorded an Event for.
	reported string
}

// gapKey identifies a set of gaps, for Events and change detection.
func gapKey(gaps []VolumeGap) string {
	h := sha256.New()
	for _, g := range gaps {
		fmt.Fprintf(h, "%s\x00%s\x00%s\x00", g.Volume, g.Array, g.Reason)
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// WatchProtection evaluates, on every replica and until ctx ends, every
// node's protection once per resync interval: its footprint from the
// informers and its identities from the ledger, placed and covered
// without asking an array, plus, on the leader, the gaps the last plan
// read from the arrays found (scanGaps, which it runs for every cluster,
// reads them every GapScanPeriod). A node with an open fence is left to
// the pipeline. It also scans every PersistentVolume for configuration drift
// (scanDrift) each interval and whenever VolumesChanged is called. The
// daemon runs it next to FollowCluster.
func (c *Controller) WatchProtection(ctx context.Context) {
	var scans sync.WaitGroup
	defer scans.Wait()
	for _, name := range slices.Sorted(maps.Keys(c.clusters)) {
		scans.Go(func() { c.scanGaps(ctx, c.clusters[name]) })
	}
	t := c.clk.NewTicker(c.cfg.Resync)
	defer t.Stop()
	for {
		c.sweepProtection(ctx)
		c.scanDrift()
		for waiting := true; waiting; {
			select {
			case <-ctx.Done():
				return
			case <-c.driftKick:
				c.scanDrift()
			case <-t.C():
				waiting = false
			}
		}
	}
}

// sweepProtection evaluates every known node of every cluster once.
func (c *Controller) sweepProtection(ctx context.Context) {
	for _, name := range slices.Sorted(maps.Keys(c.clusters)) {
		cl := c.clusters[name]
		nodes := map[string]bool{}
		for _, n := range cl.Footprints.Nodes() {
			nodes[n] = true
		}
		c.cfg.Ledger.Read(func(s *ledger.State) {
			if cs := s.Clusters[cl.Name]; cs != nil {
				for n := range cs.Nodes {
					nodes[n] = true
				}
			}
		})
		c.mu.Lock()
		for k := range c.verdicts {
			if cn, n := splitKey(k); cn == cl.Name {
				nodes[n] = true
			}
		}
		for k := range c.protection {
			if cn, n := splitKey(k); cn == cl.Name {
				nodes[n] = true
			}
		}
		c.mu.Unlock()
		for _, n := range slices.Sorted(maps.Keys(nodes)) {
			if ctx.Err() != nil {
				return
			}
			c.evaluateProtection(ctx, cl, n)
		}
	}
	c.updateUnprotectedGauge()
}

// evaluateProtection covers one node and records the result.
func (c *Controller) evaluateProtection(ctx context.Context, cl *clusterRuntime, node string) {
	v := c.readNodeIdentities(cl.Name, node)
	var gaps []VolumeGap
	if !v.Fenced {
		kvols, err := cl.Footprints.Volumes(node)
		if err != nil {
			return // not synced yet: keep what is known
		}
		if _, known := c.verdict(cl.Name, node); !known && len(kvols) == 0 && !v.IdentitiesKnown {
			// A node this replica never saw and never learned: a node that
			// was deleted, or one not seen yet.
			gaps = nil
		} else {
			cv := cover(kvols, cl.Drivers, cl.arrays, v.identities())
			gaps = cv.Gaps
			if c.leadership() != nil {
				gaps = append(gaps, c.scans.gaps(nodeKey(cl.Name, node), cv.Vols)...)
			}
		}
		gaps = append(gaps, c.regressionGaps(cl.Name, node)...)
	} else {
		c.scans.drop(nodeKey(cl.Name, node))
	}
	c.setProtection(ctx, cl, node, gaps)
}

// holdUnprotected is the pipeline's word on a failed node it will not
// fence because of gaps (some only found reading the arrays): the node is
// reported held and unprotected.
func (c *Controller) holdUnprotected(ctx context.Context, cl *clusterRuntime, node string, gaps []VolumeGap) {
	reason := "not fencing: the node is unprotected: " + gapsText(gaps)
	if c.block(cl.Name, node, "", reason, nil) {
		c.log.Error("node failed but is unprotected: not fencing, tainting or evicting it", "cluster", cl.Name,
			"node", node, "gaps", gapsText(gaps))
	}
	c.recordGaps(cl.Name, node, gaps)
	c.setProtection(ctx, cl, node, gaps)
}

// setProtection records a node's gaps; on the leader a change is logged
// once and recorded as a Kubernetes Event on the node.
func (c *Controller) setProtection(ctx context.Context, cl *clusterRuntime, node string, gaps []VolumeGap) {
	sort.SliceStable(gaps, func(i, j int) bool {
		if gaps[i].Volume != gaps[j].Volume {
			return gaps[i].Volume < gaps[j].Volume
		}
		return gaps[i].Array < gaps[j].Array
	})
	k := nodeKey(cl.Name, node)
	key := gapKey(gaps)
	leading := c.leadership() != nil
	c.mu.Lock()
	st := c.protection[k]
	if len(gaps) == 0 {
		delete(c.protection, k)
		c.mu.Unlock()
		if st == nil {
			return
		}
		// The gauge follows the map at once, so /status and
		// /metrics never disagree for a whole sweep.
		c.updateUnprotectedGauge()
		if st.reported != "" && leading {
			c.log.Info("node is protected again: every volume of its footprint can be cut", "cluster", cl.Name, "node", node)
		}
		return
	}
	if st == nil {
		st = &protectionState{Unprotected: Unprotected{Cluster: cl.Name, Node: node, Since: c.clk.Now().UTC()}}
		c.protection[k] = st
	}
	changed := st.key != key
	st.key = key
	st.Gaps = slices.Clone(gaps)
	report := leading && st.reported != key
	if report {
		st.reported = key
	}
	c.mu.Unlock()
	if changed {
		c.updateUnprotectedGauge()
	}
	if !report {
		return
	}
	if len(blockingGaps(gaps)) == 0 {
		// Only volumes whose access keeps coming back: the node is
		// fenced, but its fence does not hold between held checks.
		c.log.Warn("node is unprotected: access to a volume keeps coming back after its fences; it is still fenced and the access cut again at each held check",
			"cluster", cl.Name, "node", node, "gaps", gapsText(gaps))
		c.nodeEvent(ctx, cl, node, corev1.EventTypeWarning, "FenceUnprotected", key,
			"fenced fences this node but its fence does not hold: "+gapsText(gaps))
		return
	}
	c.log.Warn("node is unprotected: a fence could not cut every volume of its footprint, so it will not be fenced, tainted or evicted",
		"cluster", cl.Name, "node", node, "gaps", gapsText(gaps))
	c.nodeEvent(ctx, cl, node, corev1.EventTypeWarning, "FenceUnprotected", key,
		"fenced cannot fence this node, so it will not restart its pods elsewhere if it fails: "+gapsText(gaps))
}

// unprotectedList returns the unprotected nodes, by cluster and node.
func (c *Controller) unprotectedList() []Unprotected {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Unprotected, 0, len(c.protection))
	for _, k := range slices.Sorted(maps.Keys(c.protection)) {
		u := c.protection[k].Unprotected
		u.Gaps = slices.Clone(u.Gaps)
		out = append(out, u)
	}
	return out
}

// updateUnprotectedGauge sets fenced_nodes_unprotected{cluster,reason}:
// the nodes with at least one gap of the reason. Every cluster and reason
// has a series (0 when none).
func (c *Controller) updateUnprotectedGauge() {
	counts := map[[2]string]int{}
	for name := range c.clusters {
		for _, r := range arrayclients.GapReasons() {
			counts[[2]string{name, string(r)}] = 0
		}
	}
	c.mu.Lock()
	for _, st := range c.protection {
		seen := map[arrayclients.GapReason]bool{}
		for _, g := range st.Gaps {
			if !seen[g.Reason] {
				seen[g.Reason] = true
				counts[[2]string{st.Cluster, string(g.Reason)}]++
			}
		}
	}
	c.mu.Unlock()
	for k, n := range counts {
		c.metrics.unprotected.WithLabelValues(k[0], k[1]).Set(float64(n))
	}
}
