package invariants

import (
	"crypto/sha256"
	"fmt"
	"slices"
	"time"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/cluster/ledger"
)

// AttachmentName is the name Kubernetes gives the VolumeAttachment of a
// CSI volume to a node: "csi-" and the hex SHA-256 of the volume handle,
// the driver name and the node name, concatenated (the CSI attacher of
// the kubelet and the attach/detach controller, pkg/volume/csi).
func AttachmentName(handle, driver, node string) string {
	return fmt.Sprintf("csi-%x", sha256.Sum256([]byte(handle+driver+node)))
}

// attachedAt reports the node a VolumeAttachment was on at t, if it
// existed then.
func attachedAt(ps []Placement, name string, t time.Time) (string, bool) {
	var best *Placement
	for i := range ps {
		p := &ps[i]
		if p.Resource != "volumeattachments" || p.Name != name || p.Time.After(t) {
			continue
		}
		if best == nil || !p.Time.Before(best.Time) {
			best = p
		}
	}
	if best == nil || best.Deleted {
		return "", false
	}
	return best.Node, true
}

// fencedStep returns the record's last step into fenced.
func fencedStep(f *ledger.Fence) (ledger.Step, bool) {
	var out ledger.Step
	ok := false
	for _, s := range steps(f) {
		if s.To == ledger.StateFenced {
			out, ok = s, true
		}
	}
	return out, ok
}

// checkFootprintCovered is rule footprint-covered (see the package doc).
func (c *checker) checkFootprintCovered() {
	versions := map[string]*ledger.Fence{}
	for _, f := range c.h.AtFenced {
		versions[fmt.Sprintf("%s@%d", f.ID, lastIndex(f))] = f
	}
	checked := map[string]bool{}
	for _, k := range sortedKeys(versions) {
		f := versions[k]
		checked[f.ID] = true
		c.coveredAt(f, true)
	}
	// Records whose state at their fenced step is unknown: their last
	// version still holds the footprint and the plans, not the read-back.
	for _, f := range c.h.Fences {
		if _, ok := fencedStep(f); ok && !checked[f.ID] {
			c.coveredAt(f, false)
		}
	}
}

// coveredAt checks one record as of its fenced step; readBack says its
// read-backs are those of that step.
func (c *checker) coveredAt(f *ledger.Fence, readBack bool) {
	st, _ := fencedStep(f)
	subject := f.Cluster + "/" + f.Node
	c.count(RuleFootprintCovered, 1)
	if !f.FootprintRecorded {
		c.violate(RuleFootprintCovered, st.At, subject, "%s: fenced (index %d) without a recorded storage footprint", f.ID, st.Index)
		return
	}
	inFootprint := map[string]bool{}
	for _, v := range f.Footprint {
		if v.Attachment != "" {
			inFootprint[v.Attachment] = true
		}
		if v.Gap != nil {
			c.violate(RuleFootprintCovered, st.At, subject, "%s: fenced with volume %s unplaced: %s", f.ID, v.PV, v.Gap.Error())
			continue
		}
		if len(v.Placements) == 0 {
			c.violate(RuleFootprintCovered, st.At, subject, "%s: fenced with volume %s on no array", f.ID, v.PV)
			continue
		}
		for _, pl := range v.Placements {
			if problem := cutOf(f, pl, readBack); problem != "" {
				c.violate(RuleFootprintCovered, st.At, subject, "%s: fenced but volume %s on %s %s", f.ID, v.PV, pl.Array, problem)
			}
		}
	}
	// Every VolumeAttachment Kubernetes had to the node then must be in the
	// footprint: a volume left out was never cut.
	ps := c.in.Placements[f.Cluster]
	seen := map[string]bool{}
	for _, p := range ps {
		if p.Resource != "volumeattachments" || seen[p.Name] {
			continue
		}
		seen[p.Name] = true
		if n, ok := attachedAt(ps, p.Name, st.At); ok && n == f.Node && !inFootprint[p.Name] {
			c.violate(RuleFootprintCovered, st.At, subject, "%s: fenced while VolumeAttachment %s to the node was not in its footprint", f.ID, p.Name)
		}
	}
}

// cutOf says what is wrong with the cut of a placed footprint volume in
// the record ("" when its plan cuts it and, with readBack, the last
// read-back shows the node without access).
func cutOf(f *ledger.Fence, pl arrayclients.Placement, readBack bool) string {
	i := slices.IndexFunc(f.Plans, func(p arrayclients.Plan) bool { return p.Array == pl.Array })
	if i < 0 {
		return "has no plan"
	}
	j := slices.IndexFunc(f.Plans[i].Volumes, func(v arrayclients.VolumeCut) bool { return v.Volume == pl.Volume })
	switch {
	case j < 0:
		return "is not in the array's plan"
	case f.Plans[i].Volumes[j].Gap != nil:
		return "has a gap in the plan: " + f.Plans[i].Volumes[j].Gap.Error()
	case f.Plans[i].Volumes[j].Cut == "":
		return "has no cut in the plan"
	}
	if !readBack {
		return ""
	}
	r := f.Results[pl.Array]
	if r == nil || r.Verification == nil {
		return "has no read-back"
	}
	k := slices.IndexFunc(r.Verification.Volumes, func(v arrayclients.VolumeCheck) bool { return v.Volume == pl.Volume })
	switch {
	case k < 0:
		return "is not in the array's read-back"
	case r.Verification.Volumes[k].NodeAccess:
		return "still gives the node access in the read-back"
	}
	return ""
}
