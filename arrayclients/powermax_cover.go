package arrayclients

// Cover: PowerMax block volumes lose the host's initiators; NFS exports
// are created open to every host (csi-powermax), and a shared vSphere host
// serves every node, so neither has a per-node cut.
func (a *PowerMaxAdapter) Cover(id Identity, v VolumeRef) (Cut, *Gap) {
	if g := NotFenceable(PowerMax, v); g != nil {
		return "", g
	}
	if id.Kind == PowerMaxKindSharedHost {
		return "", sharedHostGap(id, v)
	}
	return CutHostInitiators, nil
}

// Holds reports whether a volume at loc is on this array.
func (a *PowerMaxAdapter) Holds(loc VolumeLocation) bool { return a.cfg.Holds(loc) }
