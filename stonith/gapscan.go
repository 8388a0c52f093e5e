package stonith

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/detector"
)

// DefaultGapScanPeriod is how often, by default, the leader reads from
// the arrays the plan of every healthy node with a storage footprint.
const DefaultGapScanPeriod = 5 * time.Minute

// gapScans holds, on the leader, the gaps only an array read finds (a
// volume the array does not have, a volume given to another host but not
// to the node): those the last plan of each node found, by array. The
// protection check (evaluateProtection) adds them to the gaps it finds
// without reading an array, so /status, fenced_nodes_unprotected, the
// Event and `fenced plan` agree while the node is healthy (PRODUCT.md
// invariant 7). The zero value is ready to use.
type gapScans struct {
	mu sync.Mutex
	// nodes maps a nodeKey to its gaps by array.
	nodes map[string]map[string]arrayRead
	// soon holds the nodes whose attachments changed, by nodeKey: their
	// plans are read before the round's next node (kickScan).
	soon map[string]bool
	// kick wakes each cluster's scan loop; lastSoon is when each node
	// was last read out of turn, so a burst of changes reads it once.
	kick     map[string]chan struct{}
	lastSoon map[string]time.Time
}

// soonGap is the least time between two out-of-turn reads of one node.
const soonGap = 5 * time.Second

// kickScan asks the leader's gap scan to read the node's plans out of
// turn: one of its VolumeAttachments changed, so a gap only an array read
// finds (a volume granted to another host, an export the driver will give
// back) may have appeared. It only signals.
func (s *gapScans) kickScan(cluster, node string) {
	s.mu.Lock()
	if s.soon == nil {
		s.soon = map[string]bool{}
	}
	s.soon[nodeKey(cluster, node)] = true
	k := s.kickCh(cluster)
	s.mu.Unlock()
	select {
	case k <- struct{}{}:
	default:
	}
}

// kickCh returns the cluster's wake-up channel; s.mu is held.
func (s *gapScans) kickCh(cluster string) chan struct{} {
	if s.kick == nil {
		s.kick = map[string]chan struct{}{}
	}
	if s.kick[cluster] == nil {
		s.kick[cluster] = make(chan struct{}, 1)
	}
	return s.kick[cluster]
}

// takeSoon returns the cluster's nodes due for an out-of-turn read now,
// and how long until the next one that is asked for but waits out soonGap.
func (s *gapScans) takeSoon(cluster string, now time.Time) ([]string, time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lastSoon == nil {
		s.lastSoon = map[string]time.Time{}
	}
	var due []string
	var wait time.Duration
	for key := range s.soon {
		c, node := splitKey(key)
		if c != cluster {
			continue
		}
		if at, ok := s.lastSoon[key]; ok && now.Sub(at) < soonGap {
			if w := soonGap - now.Sub(at); wait == 0 || w < wait {
				wait = w
			}
			continue
		}
		delete(s.soon, key)
		s.lastSoon[key] = now
		due = append(due, node)
	}
	for key, at := range s.lastSoon {
		if now.Sub(at) >= soonGap {
			delete(s.lastSoon, key)
		}
	}
	slices.Sort(due)
	return due, wait
}

// arrayRead is what one plan of a node on one array found.
type arrayRead struct {
	Gaps []VolumeGap
	At   time.Time
}

// set records the reads of a node's arrays; arrays not in reads keep
// what an earlier read found unless replace is set.
func (s *gapScans) set(key string, reads map[string]arrayRead, replace bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.nodes == nil {
		s.nodes = map[string]map[string]arrayRead{}
	}
	cur := s.nodes[key]
	if cur == nil || replace {
		cur = map[string]arrayRead{}
	}
	maps.Copy(cur, reads)
	s.nodes[key] = cur
}

// drop forgets a node.
func (s *gapScans) drop(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.nodes, key)
}

// forget drops every node of a cluster (leadership lost: the reads are
// no longer kept current).
func (s *gapScans) forget(cluster string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.nodes {
		if cn, _ := splitKey(k); cn == cluster {
			delete(s.nodes, k)
		}
	}
}

// retain forgets the nodes of a cluster not named (nodes without a
// footprint any more, deleted nodes).
func (s *gapScans) retain(cluster string, nodes []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.nodes {
		if cn, n := splitKey(k); cn == cluster && !sortedHas(nodes, n) {
			delete(s.nodes, k)
		}
	}
}

// gaps returns the array-read gaps of a node that still concern its
// footprint: those of volumes still placed on the array the read
// concerned (vols, as cover placed them). A volume that left the
// footprint, or that now has a gap needing no array read, is left out.
func (s *gapScans) gaps(key string, vols map[string][]arrayclients.VolumeRef) []VolumeGap {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []VolumeGap
	for _, array := range slices.Sorted(maps.Keys(s.nodes[key])) {
		for _, g := range s.nodes[key][array].Gaps {
			if slices.ContainsFunc(vols[g.Array], func(v arrayclients.VolumeRef) bool { return v.Volume == g.Volume }) {
				out = append(out, g)
			}
		}
	}
	return out
}

// recordReads keeps, on the leader, the gaps that plans read from the
// arrays found for a node without an open fence (a periodic scan, a
// `fenced plan`, the pipeline's decision on a failed node).
func (c *Controller) recordReads(cluster, node string, plans []arrayclients.Plan, replace bool) {
	if c.leadership() == nil {
		return
	}
	reads := map[string]arrayRead{}
	for _, p := range plans {
		reads[p.Array] = arrayRead{Gaps: planGaps(p), At: p.CreatedAt}
	}
	c.scans.set(nodeKey(cluster, node), reads, replace)
}

// recordGaps keeps, on the leader, gaps of a failed node the pipeline
// found (holdUnprotected): they replace what was read of the node. Gaps
// that need no array read are kept too but never shown twice: only those
// of volumes cover places on an array are added back (gapScans.gaps).
func (c *Controller) recordGaps(cluster, node string, gaps []VolumeGap) {
	if c.leadership() == nil {
		return
	}
	reads := map[string]arrayRead{}
	now := c.clk.Now().UTC()
	for _, g := range gaps {
		if g.Array == "" || g.Volume == "" {
			continue
		}
		r := reads[g.Array]
		r.Gaps, r.At = append(r.Gaps, g), now
		reads[g.Array] = r
	}
	c.scans.set(nodeKey(cluster, node), reads, true)
}

// scanRank is the rank of a scan's plans among the calls waiting for an
// array's slots (arraySlots): after every fence and unfence, whatever
// their age.
func scanRank() time.Time { return time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC) }

// scanGaps reads, while this replica leads and until ctx ends, the plan
// of every healthy node of the cluster with a storage footprint once per
// GapScanPeriod, the nodes spread over the period, and adds the gaps the
// plans find to the protection check. Plans only read (Adapter.Plan),
// take the arrays' call slots after every fence (scanRank), one node at a
// time; an array that fails a plan is not asked again in the same round
// (its nodes keep what was last read there). A follower reads no array
// and drops what it read while it led.
func (c *Controller) scanGaps(ctx context.Context, cl *clusterRuntime) {
	for ctx.Err() == nil {
		if c.leadership() == nil {
			c.scans.forget(cl.Name)
			if c.sleep(ctx, c.cfg.Resync) != nil {
				return
			}
			continue
		}
		start := c.clk.Now()
		nodes := c.scanCandidates(cl)
		c.scans.retain(cl.Name, nodes)
		pace := cl.GapScanPeriod / time.Duration(max(1, len(nodes)))
		down := map[string]bool{}
		for i, n := range nodes {
			if ctx.Err() != nil || c.leadership() == nil {
				break
			}
			c.scanNode(ctx, cl, n, down)
			if !c.waitScanning(ctx, cl, start.Add(time.Duration(i+1)*pace), down) {
				break
			}
		}
		if len(nodes) == 0 {
			c.waitScanning(ctx, cl, start.Add(cl.GapScanPeriod), down)
		}
	}
}

// waitScanning waits until the time (false when ctx ends or leadership is
// lost first) and reads, meanwhile, the plans of the
// nodes whose attachments changed (kickScan).
func (c *Controller) waitScanning(ctx context.Context, cl *clusterRuntime, until time.Time, down map[string]bool) bool {
	c.scans.mu.Lock()
	kick := c.scans.kickCh(cl.Name)
	c.scans.mu.Unlock()
	for {
		due, later := c.scans.takeSoon(cl.Name, c.clk.Now())
		for _, n := range due {
			if ctx.Err() != nil || c.leadership() == nil {
				return false
			}
			c.scanNode(ctx, cl, n, down)
		}
		d := until.Sub(c.clk.Now())
		if d <= 0 {
			return true
		}
		wait := min(d, c.cfg.Resync)
		if later > 0 {
			wait = min(wait, later)
		}
		t := c.clk.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-kick:
			t.Stop()
		case <-t.C():
		}
		if c.leadership() == nil {
			return false
		}
	}
}

// scanCandidates lists the cluster's nodes with a storage footprint, by
// name. Whether each is scanned is decided when its turn comes.
func (c *Controller) scanCandidates(cl *clusterRuntime) []string {
	nodes := slices.Clone(cl.Footprints.Nodes())
	slices.Sort(nodes)
	return slices.Compact(nodes)
}

// scanNode reads the plan of one node on each array holding a volume of
// its footprint (where it has an identity there) and re-evaluates its
// protection. A node with an open fence, or failed (the pipeline reads
// its plans), is not read; a node without a footprint on any array is
// forgotten. Arrays in down are skipped; an array whose plan fails is
// added to it.
func (c *Controller) scanNode(ctx context.Context, cl *clusterRuntime, node string, down map[string]bool) {
	k := nodeKey(cl.Name, node)
	v := c.readNode(cl.Name, node)
	if v.Fence != nil {
		c.scans.drop(k)
		return
	}
	if ve, ok := c.verdict(cl.Name, node); ok && ve.State == detector.Failed {
		return
	}
	kvols, err := cl.Footprints.Volumes(node)
	if err != nil {
		return
	}
	cv := cover(kvols, cl.Drivers, cl.arrays, v.identities())
	var arrays []string
	for a := range cv.Vols {
		if _, ok := v.Identities[a]; ok && !down[a] {
			arrays = append(arrays, a)
		}
	}
	slices.Sort(arrays)
	c.withUnattached(cl, node, cv.Vols)
	var (
		mu    sync.Mutex
		plans []arrayclients.Plan
	)
	errs := c.forEachArray(ctx, arrays, func(ctx context.Context, array string) error {
		p, err := c.planArray(ctx, cl.Name, scanRank(), v.Identities[array], cv.Vols[array])
		if err != nil {
			return err
		}
		mu.Lock()
		plans = append(plans, p)
		mu.Unlock()
		return nil
	})
	for a, err := range errs {
		if ctx.Err() != nil {
			return
		}
		down[a] = true
		c.log.Debug("gap scan: plan not read; the node keeps what was last read there", "cluster", cl.Name,
			"node", node, "array", a, "error", err)
	}
	if len(cv.Vols) == 0 {
		c.scans.drop(k)
	} else {
		c.recordReads(cl.Name, node, plans, false)
	}
	c.evaluateProtection(ctx, cl, node)
}

// sortedHas reports whether the sorted list holds s.
func sortedHas(sorted []string, s string) bool {
	_, ok := slices.BinarySearch(sorted, s)
	return ok
}
