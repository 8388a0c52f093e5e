package powermax

import "github.com/fenced-project/fenced/arrayclients"

// Cover: PowerMax block volumes lose the host's initiators; NFS exports
// are created open to every host (csi-powermax), and a shared vSphere host
// serves every node, so neither has a per-node cut.
func (a *PowerMaxAdapter) Cover(id arrayclients.Identity, v arrayclients.VolumeRef) (arrayclients.Cut, *arrayclients.Gap) {
	if g := arrayclients.NotFenceable(arrayclients.PowerMax, v); g != nil {
		return "", g
	}
	if id.Kind == PowerMaxKindSharedHost {
		return "", sharedHostGap(id, v)
	}
	return arrayclients.CutHostInitiators, nil
}

// Holds reports whether a volume at loc is on this array.
func (a *PowerMaxAdapter) Holds(loc arrayclients.VolumeLocation) bool { return a.cfg.Holds(loc) }
