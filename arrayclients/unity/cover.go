package unity

import "github.com/fenced-project/fenced/arrayclients"

// Cover: Unity LUNs lose the host's access; NFS file systems lose it from
// their shares' host lists.
func (a *UnityAdapter) Cover(_ arrayclients.Identity, v arrayclients.VolumeRef) (arrayclients.Cut, *arrayclients.Gap) {
	if v.Protocol == arrayclients.ProtocolNFS {
		return arrayclients.CutNFSShareHosts, nil
	}
	return arrayclients.CutLUNHostAccess, nil
}

// Holds reports whether a volume at loc is on this array.
func (a *UnityAdapter) Holds(loc arrayclients.VolumeLocation) bool { return a.cfg.Holds(loc) }
