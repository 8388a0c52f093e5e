package stonith

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/cluster/ledger"
)

// VolumeGap is one reason a node is unprotected: a footprint volume whose
// access fenced cannot cut (or, with no Volume, the whole node: its
// identities were never learned), with the reason and what was found.
type VolumeGap struct {
	// Volume is the PersistentVolume's name; empty for a node-wide gap.
	Volume string `json:"volume,omitempty"`
	// Array is the configured array concerned, when there is one.
	Array  string                 `json:"array,omitempty"`
	Reason arrayclients.GapReason `json:"reason"`
	Detail string                 `json:"detail"`
}

// String renders the gap for messages.
func (g VolumeGap) String() string {
	where := g.Volume
	if g.Array != "" {
		where += " on " + g.Array
	}
	if where == "" {
		where = "node"
	}
	return fmt.Sprintf("%s: %s (%s)", where, g.Reason, g.Detail)
}

// gapsText joins gaps for a message, at most a few in full.
func gapsText(gaps []VolumeGap) string {
	const most = 5
	parts := make([]string, 0, min(len(gaps), most))
	for i, g := range gaps {
		if i == most {
			parts = append(parts, fmt.Sprintf("and %d more", len(gaps)-most))
			break
		}
		parts = append(parts, g.String())
	}
	return strings.Join(parts, "; ")
}

// identityView is what the ledger knows of a node's identities.
type identityView struct {
	Identities map[string]arrayclients.Identity
	Known      bool
	NotFound   map[string]string
	Ambiguous  map[string]string
}

// coverage is a node's storage footprint placed on the cluster's arrays,
// with every gap that can be found without asking an array.
type coverage struct {
	// Footprint is what a fence records (every volume, placed or a gap).
	Footprint []arrayclients.FootprintVolume
	// Gaps lists every footprint volume fenced cannot cut.
	Gaps []VolumeGap
	// Vols are the footprint volumes by array, as Plan takes them.
	Vols map[string][]arrayclients.VolumeRef
}

// cover places a node's volumes (as Kubernetes shows them) on the
// cluster's arrays and finds the gaps that need no array read (PRODUCT.md
// invariant 7): an unknown driver or handle, an array or zone not
// configured, no identity (or an ambiguous one) on an array holding a
// footprint volume, a protocol or identity the family cannot cut. A node
// whose identities were never learned is a node-wide gap. It is a pure
// function.
func cover(kvols []arrayclients.KubeVolume, drivers map[string]arrayclients.Family, arrays []Array, ids identityView) coverage {
	cv := coverage{Vols: map[string][]arrayclients.VolumeRef{}}
	if !ids.Known {
		cv.Gaps = append(cv.Gaps, VolumeGap{Reason: arrayclients.GapIdentitiesNotLearned,
			Detail: "the node's identities on the arrays were never learned (it has not been healthy with the arrays reachable since fenced started watching it)"})
	}
	holders := make([]arrayclients.Holder, len(arrays))
	byName := map[string]Array{}
	for i, a := range arrays {
		holders[i] = a
		byName[a.Name()] = a
	}
	for _, kv := range kvols {
		fv := arrayclients.Place(kv, drivers, holders)
		cv.Footprint = append(cv.Footprint, fv)
		if fv.Gap != nil {
			cv.Gaps = append(cv.Gaps, VolumeGap{Volume: kv.PV, Reason: fv.Gap.Reason, Detail: fv.Gap.Detail})
			continue
		}
		for _, pl := range fv.Placements {
			if g := placementGap(pl, byName[pl.Array], ids); g != nil {
				cv.Gaps = append(cv.Gaps, *g)
				continue
			}
			cv.Vols[pl.Array] = append(cv.Vols[pl.Array], pl.VolumeRef)
		}
	}
	return cv
}

// placementGap is why the node's access to a placed volume cannot be cut
// on that array without reading it, or nil.
func placementGap(pl arrayclients.Placement, a Array, ids identityView) *VolumeGap {
	gap := func(r arrayclients.GapReason, detail string) *VolumeGap {
		return &VolumeGap{Volume: pl.Volume, Array: pl.Array, Reason: r, Detail: detail}
	}
	if a != nil {
		if g := arrayclients.NotFenceable(a.Family(), pl.VolumeRef); g != nil {
			return gap(g.Reason, g.Detail)
		}
	}
	if !ids.Known {
		return nil // the node-wide gap says it
	}
	id, ok := ids.Identities[pl.Array]
	switch {
	case ok:
	case ids.Ambiguous[pl.Array] != "":
		return gap(arrayclients.GapIdentityAmbiguous, fmt.Sprintf("more than one object on %s could be the node: %s "+
			"(set a per-node override in clusters[].nodes)", pl.Array, ids.Ambiguous[pl.Array]))
	case ids.NotFound[pl.Array] != "":
		return gap(arrayclients.GapIdentityNotFound, fmt.Sprintf("the node has no identity on %s: %s", pl.Array, ids.NotFound[pl.Array]))
	default:
		return gap(arrayclients.GapIdentityNotFound, fmt.Sprintf("no identity of the node on %s was learned", pl.Array))
	}
	if a == nil {
		return gap(arrayclients.GapArrayNotConfigured, fmt.Sprintf("array %s is not configured on this replica", pl.Array))
	}
	if _, g := a.Cover(id, pl.VolumeRef); g != nil {
		return gap(g.Reason, g.Detail)
	}
	return nil
}

// planGaps lists the gaps a plan found by reading the footprint volumes.
func planGaps(p arrayclients.Plan) []VolumeGap {
	var out []VolumeGap
	for _, vc := range p.Volumes {
		if vc.Gap != nil {
			out = append(out, VolumeGap{Volume: vc.Volume, Array: p.Array, Reason: vc.Gap.Reason, Detail: vc.Gap.Detail})
		} else if vc.Cut == "" {
			out = append(out, VolumeGap{Volume: vc.Volume, Array: p.Array, Reason: arrayclients.GapCutUnsupported,
				Detail: "the plan names no cut for it"})
		}
	}
	return out
}

// footprintVols returns a fence record's footprint volumes on one array.
func footprintVols(f *ledger.Fence, array string) []arrayclients.VolumeRef {
	var out []arrayclients.VolumeRef
	for _, v := range f.Footprint {
		for _, pl := range v.Placements {
			if pl.Array == array {
				out = append(out, pl.VolumeRef)
			}
		}
	}
	return out
}

// footprintArrays lists the arrays a record must plan: its identity
// arrays and every array holding a footprint volume.
func footprintArrays(f *ledger.Fence) []string {
	arrays := slices.Collect(maps.Keys(f.Identities))
	for _, v := range f.Footprint {
		for _, pl := range v.Placements {
			arrays = append(arrays, pl.Array)
		}
	}
	sort.Strings(arrays)
	return slices.Compact(arrays)
}

// uncut lists the record's footprint volumes not yet shown cut: the
// ledger's own rule for the fenced step (footprintCut), as text for
// reports. A record without a footprint has none.
func uncut(f *ledger.Fence) []VolumeGap {
	var out []VolumeGap
	for _, v := range f.Footprint {
		if v.Gap != nil {
			out = append(out, VolumeGap{Volume: v.PV, Reason: v.Gap.Reason, Detail: v.Gap.Detail})
			continue
		}
		for _, pl := range v.Placements {
			if _, ok := f.Confirmed(pl.Array); ok {
				continue // an operator confirmed the node cannot write there
			}
			p, ok := planOf(f, pl.Array)
			if !ok {
				continue // reported as an unplanned array
			}
			i := slices.IndexFunc(p.Volumes, func(c arrayclients.VolumeCut) bool { return c.Volume == v.PV })
			switch {
			case i < 0:
				out = append(out, VolumeGap{Volume: v.PV, Array: pl.Array, Reason: arrayclients.GapCutUnsupported,
					Detail: "the array's plan has no cut for it"})
			case p.Volumes[i].Gap != nil:
				g := p.Volumes[i].Gap
				out = append(out, VolumeGap{Volume: v.PV, Array: pl.Array, Reason: g.Reason, Detail: g.Detail})
			}
		}
	}
	return out
}

// WitnessArrays names the arrays that hold part of the node's storage
// footprint as the informers show it now: the arrays whose view of the
// node an early verdict needs (detector.FootprintSource). complete is
// false when the footprint cannot be read or has a gap (a volume not
// placed, or without an identity to cut on its array): such a node waits
// for its full grace.
func (c *Controller) WitnessArrays(cluster, node string) (arrays []string, complete bool) {
	cl, err := c.cluster(cluster)
	if err != nil {
		return nil, false
	}
	kvols, err := cl.Footprints.Volumes(node)
	if err != nil {
		return nil, false
	}
	cv := cover(kvols, cl.Drivers, cl.arrays, c.readNodeIdentities(cl.Name, node).identities())
	if len(cv.Gaps) > 0 {
		return nil, false
	}
	return slices.Sorted(maps.Keys(cv.Vols)), true
}
