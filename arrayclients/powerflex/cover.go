package powerflex

import (
	"fmt"

	"github.com/fenced-project/fenced/arrayclients"
)

// Cover: PowerFlex block volumes are unmapped from the node's SDC (or
// NVMe host, nvme.go); NFS
// volumes' exports lose the node's IPs (nfs.go).
func (a *PowerFlexAdapter) Cover(id arrayclients.Identity, v arrayclients.VolumeRef) (arrayclients.Cut, *arrayclients.Gap) {
	if v.Protocol == arrayclients.ProtocolNFS {
		return a.coverNFS(id, v)
	}
	if id.Kind == PowerFlexKindNFSClient {
		return "", &arrayclients.Gap{Reason: arrayclients.GapIdentityNotFound, Detail: fmt.Sprintf("%s: the node has no SDC on PowerFlex array %s "+
			"(its csi-vxflexos node ID names none), so its access to a block volume cannot be cut", v.Volume, a.cfg.Name)}
	}
	if id.Kind == PowerFlexKindNVMeHost {
		return arrayclients.CutNVMeUnmap, nil
	}
	return arrayclients.CutSDCUnmap, nil
}

// Holds reports whether a volume at loc is on this array.
func (a *PowerFlexAdapter) Holds(loc arrayclients.VolumeLocation) bool { return a.cfg.Holds(loc) }
