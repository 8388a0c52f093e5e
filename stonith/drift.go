package stonith

import (
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/fenced-project/fenced/arrayclients"
)

// Unplaced is a PersistentVolume of a Dell CSI driver whose handle names
// an array, PowerScale access zone or metro partner that the cluster's
// configured arrays do not hold: configuration drift (docs/footprint.md).
// Attached to nobody it harms nothing yet; attached to a node it makes the
// node unprotected (GapArrayNotConfigured).
type Unplaced struct {
	Cluster string `json:"cluster"`
	arrayclients.Drift
	// Since is when this replica first saw the volume unplaced.
	Since time.Time `json:"since"`
}

// VolumesChanged is told that the cluster's PersistentVolumes changed, or
// that its informers have synced: the drift scan runs soon (WatchProtection).
// It only signals; it never blocks.
func (c *Controller) VolumesChanged() {
	select {
	case c.driftKick <- struct{}{}:
	default:
	}
}

// scanDrift lists every PersistentVolume of every cluster from the
// informers and records those no configured array holds. Every replica
// scans with its own configuration and informers, and logs each volume at
// warning when it becomes unplaced (or what is missing changes), at info
// when it is placed again or deleted: the configuration is each replica's
// own file, so each reports its own drift. A cluster whose informers have
// not synced keeps what was known.
func (c *Controller) scanDrift() {
	for _, name := range slices.Sorted(maps.Keys(c.clusters)) {
		cl := c.clusters[name]
		pvs, err := cl.Footprints.PersistentVolumes()
		if err != nil {
			continue
		}
		holders := make([]arrayclients.Holder, len(cl.arrays))
		for i, a := range cl.arrays {
			holders[i] = a
		}
		found := arrayclients.FindDrift(pvs, cl.Drivers, holders)
		now := c.clk.Now().UTC()
		c.mu.Lock()
		old := c.drift[name]
		cur := make(map[string]*Unplaced, len(found))
		var added, gone []Unplaced
		for _, d := range found {
			u := &Unplaced{Cluster: name, Drift: d, Since: now}
			if prev := old[d.PV]; prev != nil {
				u.Since = prev.Since
				if prev.Drift == d {
					cur[d.PV] = u
					continue
				}
			}
			cur[d.PV] = u
			added = append(added, *u)
		}
		for pv, prev := range old {
			if cur[pv] == nil {
				gone = append(gone, *prev)
			}
		}
		c.drift[name] = cur
		c.mu.Unlock()
		for _, u := range added {
			c.log.Warn("persistent volume is on no configured array (configuration drift): a node it is attached to "+
				"will be unprotected", "cluster", name, "pv", u.PV, "driver", u.Driver, "handle", u.Handle,
				"reason", string(u.Reason), "missing", u.Missing)
		}
		slices.SortFunc(gone, func(a, b Unplaced) int { return strings.Compare(a.PV, b.PV) })
		for _, u := range gone {
			c.log.Info("persistent volume is no longer unplaced: deleted, or its array is now configured",
				"cluster", name, "pv", u.PV)
		}
	}
	c.updateDriftGauge()
}

// unplacedList returns the unplaced volumes, by cluster and name.
func (c *Controller) unplacedList() []Unplaced {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Unplaced
	for _, cl := range slices.Sorted(maps.Keys(c.drift)) {
		for _, pv := range slices.Sorted(maps.Keys(c.drift[cl])) {
			out = append(out, *c.drift[cl][pv])
		}
	}
	return out
}

// clusterDrift returns the cluster's unplaced volumes read from its
// informers now (fenced plan), or nil while they have not synced.
func (c *Controller) clusterDrift(cl *clusterRuntime) []arrayclients.Drift {
	pvs, err := cl.Footprints.PersistentVolumes()
	if err != nil {
		return nil
	}
	holders := make([]arrayclients.Holder, len(cl.arrays))
	for i, a := range cl.arrays {
		holders[i] = a
	}
	return arrayclients.FindDrift(pvs, cl.Drivers, holders)
}

// updateDriftGauge sets fenced_volumes_unplaced{cluster,reason}. Every
// cluster and reason has a series (0 when none).
func (c *Controller) updateDriftGauge() {
	counts := map[[2]string]int{}
	for name := range c.clusters {
		for _, r := range arrayclients.DriftReasons() {
			counts[[2]string{name, string(r)}] = 0
		}
	}
	c.mu.Lock()
	for cl, vols := range c.drift {
		for _, u := range vols {
			counts[[2]string{cl, string(u.Reason)}]++
		}
	}
	c.mu.Unlock()
	for k, n := range counts {
		c.metrics.unplaced.WithLabelValues(k[0], k[1]).Set(float64(n))
	}
}
