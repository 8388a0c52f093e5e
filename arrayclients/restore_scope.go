package arrayclients

import (
	"fmt"
	"strings"
)

// Shared rules of the unfence reconciliation (docs/footprint.md,
// "Unfence") for the families whose adapters read each footprint volume
// back: which volumes may be given back, and the note of one left as it
// was.

// KeepOnRestore reports whether an unfence may leave (or give back) the
// node's access to a footprint volume: Kubernetes still wants it on the
// node and no other identity holds it now, unless it is multi-node.
func KeepOnRestore(v VolumeRef, scope RestoreScope, holders []string) bool {
	if BrokenRegrant() {
		return true
	}
	return scope.Wants(v.Volume) && (len(holders) == 0 || v.MultiNode)
}

// LeftAsItWasNote says why an unfence leaves a footprint volume without
// the node's access: it moved to other holders, or Kubernetes no longer
// wants it on the node.
func LeftAsItWasNote(v VolumeRef, scope RestoreScope, holders []string) string {
	if len(holders) > 0 && !v.MultiNode {
		return "moved to " + strings.Join(holders, ", ")
	}
	if !scope.Wants(v.Volume) {
		return "not wanted by Kubernetes on the node"
	}
	return ""
}

// FootprintCuts returns the footprint volumes of a plan that have a cut
// (those with a gap were never fenced and are not read back).
func FootprintCuts(p Plan) []VolumeCut {
	var out []VolumeCut
	for _, v := range p.Volumes {
		if v.Gap == nil && v.Cut != "" {
			out = append(out, v)
		}
	}
	return out
}

// OtherIdentityGap is the gap of a volume the array gives to other
// identities but not to the node's while Kubernetes says it is attached to
// the node.
func OtherIdentityGap(f Family, v VolumeRef, mine string, holders []string) *Gap {
	return &Gap{Reason: GapOtherIdentity, Detail: fmt.Sprintf("%s: Kubernetes has %s volume %s attached to the node, but the "+
		"array gives it to %s and not to %s: the node may reach it through an identity fenced does not know",
		v.Volume, f, v.Object, strings.Join(holders, ", "), mine)}
}

// VolumeNotFoundGap is the gap of a footprint volume the array does not
// have.
func VolumeNotFoundGap(f Family, array string, v VolumeRef) *Gap {
	return &Gap{Reason: GapVolumeNotFound, Detail: fmt.Sprintf("%s: %s array %s has no volume %s", v.Volume, f, array, v.Object)}
}

// FootprintSummary counts the cuts and gaps of a plan's footprint volumes,
// for the summary of a plan or a read-back.
func FootprintSummary(cuts []VolumeCut) string {
	var n, gaps int
	for _, vc := range cuts {
		if vc.Gap != nil {
			gaps++
		} else {
			n++
		}
	}
	return fmt.Sprintf("footprint: %d volumes cut, %d gaps", n, gaps)
}
