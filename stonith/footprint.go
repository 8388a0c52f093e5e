package stonith

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/cluster/ledger"
)

// recordIdentities is what coverage knows of a record's node: the
// identities the record was opened with, and where none (or more than one
// candidate) was found as the ledger has it now.
func recordIdentities(f *ledger.Fence, v nodeView) identityView {
	return identityView{Identities: f.Identities, Known: f.IdentitiesKnown, NotFound: v.NotFound, Ambiguous: v.Ambiguous}
}

// grown returns the node's footprint volumes, placed, that the record does
// not hold yet: volumes Kubernetes attached since the fence opened, or the
// whole footprint of a record written before footprints.
func (c *Controller) grown(cl *clusterRuntime, f *ledger.Fence, v nodeView) ([]arrayclients.FootprintVolume, error) {
	kvols, err := cl.Footprints.Volumes(f.Node)
	if err != nil {
		return nil, fmt.Errorf("fence %s: footprint: %w", f.ID, err)
	}
	cv := cover(kvols, cl.Drivers, cl.arrays, recordIdentities(f, v))
	var add []arrayclients.FootprintVolume
	for _, fv := range cv.Footprint {
		if !slices.ContainsFunc(f.Footprint, func(old arrayclients.FootprintVolume) bool { return old.PV == fv.PV }) {
			add = append(add, fv)
		}
	}
	return add, nil
}

// amendFootprint adds to a record in intent or fencing the footprint
// volumes it does not hold yet (and marks a record written before
// footprints as having one). It reports whether it committed anything;
// the caller reconciles again, and amendPlans then plans the arrays of
// the new volumes.
func (c *Controller) amendFootprint(ctx context.Context, l Leadership, cl *clusterRuntime, f *ledger.Fence, v nodeView) (bool, error) {
	add, err := c.grown(cl, f, v)
	if err != nil {
		return false, err
	}
	if len(add) == 0 && f.FootprintRecorded {
		return false, nil
	}
	if err := c.commit(ctx, l, &ledger.AmendFence{Meta: c.meta(l), Cluster: f.Cluster, Node: f.Node, FenceID: f.ID,
		Expect: f.State, Footprint: add, FootprintRecorded: true}); err != nil {
		return false, fmt.Errorf("fence %s: record footprint: %w", f.ID, err)
	}
	if f.FootprintRecorded {
		c.log.Warn("footprint of a fenced node grew: planning its new volumes before the fence completes",
			"cluster", f.Cluster, "node", f.Node, "fenceID", f.ID, "volumes", pvNames(add))
	} else {
		c.log.Info("recorded the footprint of a fence written before footprints", "cluster", f.Cluster,
			"node", f.Node, "fenceID", f.ID, "volumes", len(add))
	}
	return true, nil
}

// refence takes a fenced, tainted or evicted record whose footprint grew
// back to fencing with its new volumes, so they are cut and read back
// before anything else happens (invariant 1 over the footprint as it is
// now): before the taint, before the eviction, and while the node stays
// fenced after it (a pod bound before the taint whose volume Kubernetes
// attached after it). It reports whether it did.
func (c *Controller) refence(ctx context.Context, l Leadership, cl *clusterRuntime, f *ledger.Fence) (bool, error) {
	add, err := c.grown(cl, f, c.readNode(cl.Name, f.Node))
	if err != nil || len(add) == 0 {
		return false, err
	}
	when := map[ledger.FenceState]string{ledger.StateFenced: "before the taint", ledger.StateTainted: "before the eviction",
		ledger.StateEvicted: "after the eviction"}[f.State]
	if g := c.groupVersion(); f.State != ledger.StateFenced && g < ledger.RefenceVersion {
		// Replicas of builds before the rule refuse this step: hold the
		// record (no eviction) until every voter applies it.
		c.log.Error("footprint of a fenced node grew "+when+", but the group runs ledger version "+
			fmt.Sprint(g)+" and a voter may not take the fence back to fencing: holding it until every replica is upgraded",
			"cluster", cl.Name, "node", f.Node, "fenceID", f.ID, "state", string(f.State), "volumes", pvNames(add))
		return false, fmt.Errorf("fence %s of %s/%s: %w: footprint grew %s; taking it back to fencing needs ledger version %d, the group runs %d",
			f.ID, f.Cluster, f.Node, ErrLedgerVersion, when, ledger.RefenceVersion, g)
	}
	c.log.Warn("footprint of a fenced node grew: cutting its new volumes again", "cluster", cl.Name, "node", f.Node,
		"fenceID", f.ID, "state", string(f.State), "volumes", pvNames(add))
	if err := c.step(ctx, l, f, ledger.StateFencing, "footprint grew "+when+": "+strings.Join(pvNames(add), ", ")); err != nil {
		return false, err
	}
	return true, nil
}

// restoreScope is, by array, what an unfence may give back besides the
// host-level identity: the record's footprint volumes Kubernetes still
// wants on the node (invariant 5).
func (c *Controller) restoreScope(cl *clusterRuntime, f *ledger.Fence) (map[string]arrayclients.RestoreScope, error) {
	wanted, err := cl.Footprints.Wanted(f.Node)
	if err != nil {
		return nil, fmt.Errorf("fence %s: volumes Kubernetes wants on %s: %w", f.ID, f.Node, err)
	}
	scope := map[string]arrayclients.RestoreScope{}
	for _, v := range f.Footprint {
		if !slices.Contains(wanted, v.PV) {
			continue
		}
		for _, pl := range v.Placements {
			sc := scope[pl.Array]
			sc.Wanted = append(sc.Wanted, v.PV)
			scope[pl.Array] = sc
		}
	}
	if len(scope) == 0 {
		return nil, nil
	}
	return scope, nil
}

// footprintLagWait is how long a taint waits for the footprint's
// informers to deliver an attachment the API server already shows.
const footprintLagWait = time.Second

// footprintLag names the PersistentVolumes the API server shows attached
// or attaching to the record's node now that neither the record nor the
// footprint's informers hold: an attachment made since the fence read the
// node's footprint, not delivered yet. The out-of-service taint lets
// Kubernetes detach the node's volumes without it, so it waits until the
// informers have the attachment and refence has cut it (invariant 1).
func (c *Controller) footprintLag(ctx context.Context, cl *clusterRuntime, f *ledger.Fence) ([]string, error) {
	kctx, cancel := context.WithTimeout(ctx, c.cfg.KubeTimeout)
	live, err := cl.Kube.AttachedPVs(kctx, f.Node)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("fence %s: %w", f.ID, err)
	}
	if len(live) == 0 {
		return nil, nil
	}
	cached, err := cl.Footprints.Volumes(f.Node)
	if err != nil {
		return nil, fmt.Errorf("fence %s: footprint: %w", f.ID, err)
	}
	var lag []string
	for _, pv := range live {
		known := slices.ContainsFunc(f.Footprint, func(v arrayclients.FootprintVolume) bool { return v.PV == pv }) ||
			slices.ContainsFunc(cached, func(v arrayclients.KubeVolume) bool { return v.PV == pv })
		if !known {
			lag = append(lag, pv)
		}
	}
	return lag, nil
}

func pvNames(vols []arrayclients.FootprintVolume) []string {
	out := make([]string, len(vols))
	for i, v := range vols {
		out[i] = v.PV
	}
	return out
}
