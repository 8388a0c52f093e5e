package arrayclients

// Cover: Unity LUNs lose the host's access; NFS file systems lose it from
// their shares' host lists.
func (a *UnityAdapter) Cover(_ Identity, v VolumeRef) (Cut, *Gap) {
	if v.Protocol == ProtocolNFS {
		return CutNFSShareHosts, nil
	}
	return CutLUNHostAccess, nil
}

// Holds reports whether a volume at loc is on this array.
func (a *UnityAdapter) Holds(loc VolumeLocation) bool { return a.cfg.Holds(loc) }
