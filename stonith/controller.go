package stonith

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/cluster/ledger"
	"github.com/fenced-project/fenced/detector"
)

// Controller is the fencing pipeline. Every replica has one: it caches the
// detector's verdicts and serves status; only while it leads (Lead) does it
// reconcile and write.
type Controller struct {
	cfg      Config
	clusters map[string]*clusterRuntime
	log      *slog.Logger
	clk      clock.WithTicker
	metrics  *metrics
	// slots bounds the calls in flight to each array.
	slots *arraySlots

	mu       sync.Mutex
	lead     Leadership
	queue    workqueue.TypedRateLimitingInterface[string]
	verdicts map[string]verdictEntry
	reports  map[string]*nodeReport
	// protection holds the unprotected nodes (every replica's own view).
	protection map[string]*protectionState
	// scans holds, on the leader, the gaps plans read from the arrays.
	scans gapScans
	// drift holds, by cluster and PersistentVolume name, the volumes no
	// configured array holds (every replica's own view); driftKick asks
	// WatchProtection for a scan.
	drift     map[string]map[string]*Unplaced
	driftKick chan struct{}
	// held schedules the held checks of open fences, by fence ID (the
	// leader's; see held.go).
	held map[string]*heldEntry
	// heldRunning holds a token per held check running (heldCheckers of
	// the pipeline's workers at most).
	heldRunning chan struct{}
	// evictWaits is, by fence ID, when a fence last looked whether the
	// taint-eviction controller had deleted its node's pods (evict.go).
	evictWaits map[string]time.Time
	// lifted is when this leader removed an unfencing fence's
	// out-of-service taint, by fence ID (see liftOutOfService).
	lifted map[string]time.Time
	// keptScope is, by fence ID, the live restore scope this leader last
	// said it restores without because the group runs a ledger version
	// before ledger.RescopeVersion (see rescope), so it says so once.
	keptScope map[string]string
	// rebootSeen is, by fence ID, the fenced node's new boot ID and when
	// this leader first saw it (see settledSince).
	rebootSeen map[string]bootSighting
}

type clusterRuntime struct {
	ClusterConfig
	selector labels.Selector
	// arrays are the adapters of the cluster's arrays, by name order.
	arrays []Array
}

// verdictEntry is the latest verdict of a node with when this replica saw
// its state begin.
type verdictEntry struct {
	detector.Verdict
	// ObservedAt is when this replica first saw the current state.
	ObservedAt time.Time
}

// New checks the configuration and returns a Controller.
func New(cfg Config) (*Controller, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c := &Controller{
		cfg: cfg, clusters: map[string]*clusterRuntime{}, log: cfg.Logger.With("component", "stonith"),
		clk: cfg.Clock, verdicts: map[string]verdictEntry{}, reports: map[string]*nodeReport{},
		protection: map[string]*protectionState{},
		drift:      map[string]map[string]*Unplaced{}, driftKick: make(chan struct{}, 1),
		held: map[string]*heldEntry{}, lifted: map[string]time.Time{}, keptScope: map[string]string{},
		rebootSeen: map[string]bootSighting{}, heldRunning: make(chan struct{}, heldCheckers(cfg.Workers)),
		evictWaits: map[string]time.Time{},
	}
	for _, cl := range cfg.Clusters {
		sel := labels.Nothing()
		if cl.ProtectionSelector != "" {
			s, err := labels.Parse(cl.ProtectionSelector)
			if err != nil {
				return nil, fmt.Errorf("stonith: clusters[%s].protectionSelector: %w", cl.Name, err)
			}
			sel = s
		}
		rt := &clusterRuntime{ClusterConfig: cl, selector: sel}
		rt.Footprints = brokenFootprints(rt.Footprints) // itself outside the checker's broken test build
		rt.Kube = brokenKube(rt.Kube)                   // likewise
		names := cl.Arrays
		if len(names) == 0 {
			names = slices.Sorted(maps.Keys(cfg.Arrays))
		}
		for _, n := range names {
			rt.arrays = append(rt.arrays, cfg.Arrays[n])
		}
		if rt.Drivers == nil {
			rt.Drivers = arrayclients.DefaultDrivers()
		}
		c.clusters[cl.Name] = rt
	}
	m, err := newMetrics(cfg.Registry)
	if err != nil {
		return nil, err
	}
	c.metrics = m
	for name, rt := range c.clusters {
		m.initCluster(name)
		for _, a := range rt.arrays {
			for _, r := range []string{RegressionVolume, RegressionEntry, RegressionSession} {
				m.regressions.WithLabelValues(name, a.Name(), r)
			}
		}
	}
	limits := map[string]int{}
	for name := range cfg.Arrays {
		limits[name] = DefaultArrayCallLimit
		if n := cfg.ArrayCallLimits[name]; n > 0 {
			limits[name] = n
		}
	}
	for name := range limits {
		m.callsQueued.WithLabelValues(name)
	}
	c.slots = newArraySlots(limits, m.callQueued)
	return c, nil
}

func nodeKey(cluster, node string) string { return cluster + "/" + node }

func splitKey(key string) (string, string) {
	cluster, node, _ := strings.Cut(key, "/")
	return cluster, node
}

// PublishVerdicts receives the detector's verdict changes (it implements
// detector.Publisher). It only records and enqueues.
func (c *Controller) PublishVerdicts(_ context.Context, changes []detector.Verdict) {
	now := c.clk.Now()
	c.mu.Lock()
	q := c.queue
	for _, v := range changes {
		k := nodeKey(v.Cluster, v.Node)
		old, ok := c.verdicts[k]
		e := verdictEntry{Verdict: v, ObservedAt: now}
		if ok && old.State == v.State {
			e.ObservedAt = old.ObservedAt
		}
		c.verdicts[k] = e
	}
	c.mu.Unlock()
	if q != nil {
		for _, v := range changes {
			if _, known := c.clusters[v.Cluster]; known {
				q.Add(nodeKey(v.Cluster, v.Node))
			}
		}
	}
}

func (c *Controller) verdict(cluster, node string) (verdictEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.verdicts[nodeKey(cluster, node)]
	return v, ok
}

// leadership returns the current leadership, or nil.
func (c *Controller) leadership() Leadership {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lead
}

// Enqueue asks the leader to reconcile a node now (no-op on a follower).
func (c *Controller) Enqueue(cluster, node string) {
	c.mu.Lock()
	q := c.queue
	c.mu.Unlock()
	if q != nil {
		q.Add(nodeKey(cluster, node))
	}
}

// FootprintChanged is told that a node's VolumeAttachments changed (the
// footprint informers' OnChange). A node with an open fence record is
// reconciled at once: its footprint may have grown, and a fenced, tainted
// or evicted record goes back to cut the new volume (refence). Other nodes
// wait for their next verdict or resync.
func (c *Controller) FootprintChanged(cluster, node string) {
	open := false
	c.cfg.Ledger.Read(func(s *ledger.State) {
		n := s.Node(cluster, node)
		open = n != nil && n.Fence != nil
	})
	if open {
		c.Enqueue(cluster, node)
		return
	}
	if c.leadership() != nil && c.clusters[cluster] != nil {
		// A gap only an array read finds may have come with the change.
		c.scans.kickScan(cluster, node)
	}
}

// Lead runs the pipeline for one leadership and returns when its context
// ends. The daemon calls it each time this replica becomes leader, after
// the leadership's barrier, and never twice at once.
func (c *Controller) Lead(l Leadership) error {
	ctx := l.Context()
	q := workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](c.cfg.RetryBase, c.cfg.RetryMax),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "fenced-stonith"},
	)
	c.mu.Lock()
	if c.lead != nil {
		c.mu.Unlock()
		q.ShutDown()
		return errors.New("stonith: already leading")
	}
	c.lead, c.queue = l, q
	c.mu.Unlock()
	c.log.Info("leading the fencing pipeline", "term", l.Term())
	defer func() {
		c.mu.Lock()
		c.lead, c.queue = nil, nil
		clear(c.held)   // the next leadership schedules its own checks
		clear(c.lifted) // and waits out its own out-of-service settle
		clear(c.keptScope)
		c.mu.Unlock()
		c.log.Info("stopped leading the fencing pipeline", "term", l.Term())
	}()

	var wg sync.WaitGroup
	for range c.cfg.Workers {
		wg.Go(func() { c.worker(ctx, l, q) })
	}
	c.resync(q)
	t := c.clk.NewTicker(c.cfg.Resync)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			q.ShutDown()
			wg.Wait()
			return nil
		case <-t.C():
			c.resync(q)
		}
	}
}

// resync enqueues every node with an open record, a failed verdict or a
// report to refresh.
func (c *Controller) resync(q workqueue.TypedRateLimitingInterface[string]) {
	keys := map[string]bool{}
	c.cfg.Ledger.Read(func(s *ledger.State) {
		for _, f := range s.OpenFences() {
			keys[nodeKey(f.Cluster, f.Node)] = true
		}
	})
	for name, cl := range c.clusters {
		// A new leader takes up NodeHealthCheck's requests at once.
		if cl.Remediations != nil && cl.Remediations.Synced() {
			for _, n := range cl.Remediations.Nodes() {
				keys[nodeKey(name, n)] = true
			}
		}
	}
	c.mu.Lock()
	for k, v := range c.verdicts {
		if v.State == detector.Failed {
			keys[k] = true
		}
	}
	for k := range c.reports {
		keys[k] = true
	}
	c.mu.Unlock()
	for k := range keys {
		if cluster, _ := splitKey(k); c.clusters[cluster] != nil {
			q.Add(k)
		}
	}
}

func (c *Controller) worker(ctx context.Context, l Leadership, q workqueue.TypedRateLimitingInterface[string]) {
	for {
		key, quit := q.Get()
		if quit {
			return
		}
		func() {
			defer q.Done(key)
			cluster, node := splitKey(key)
			cl := c.clusters[cluster]
			if cl == nil {
				q.Forget(key)
				return
			}
			res, err := c.reconcile(ctx, l, cl, node)
			serr := errors.Join(c.syncRemediations(ctx, cl, node), c.syncNodeLease(ctx, cl, node))
			if serr != nil && ctx.Err() == nil {
				c.log.Warn("update NodeHealthCheck remediation or node Lease", "cluster", cluster, "node", node, "error", serr)
				if err == nil && !res.again && (res.after == 0 || res.after > c.cfg.RetryMax) {
					res.after = c.cfg.RetryMax
				}
			}
			switch {
			case ctx.Err() != nil || errors.Is(err, errStopped):
				return
			case errors.Is(err, errBlocked):
				q.AddRateLimited(key)
			case err != nil:
				level := slog.LevelWarn
				if op := (*arrayclients.OpError)(nil); errors.As(err, &op) {
					// The array call's failure is logged where it
					// happened, once (arrayclients' decorator).
					level = slog.LevelDebug
				}
				c.log.Log(ctx, level, "reconcile", "cluster", cluster, "node", node, "error", err)
				q.AddRateLimited(key)
			case res.again:
				q.Forget(key)
				q.Add(key)
			case res.after > 0:
				q.Forget(key)
				q.AddAfter(key, res.after)
			default:
				q.Forget(key)
			}
		}()
	}
}

// result says when to reconcile a node again.
type result struct {
	// again: at once (a step was committed and the next one is due).
	again bool
	// after: no sooner than this (waiting on time or an outside change).
	after time.Duration
}

var (
	next = result{again: true}
	done = result{}
)

func waitFor(d time.Duration) result { return result{after: max(d, time.Millisecond)} }
