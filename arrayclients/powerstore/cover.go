package powerstore

import (
	"fmt"
	"strings"

	"github.com/fenced-project/fenced/arrayclients"
)

// Cover: PowerStore block volumes lose the host's initiators (or are
// detached from the host in detach mode); NFS volumes lose the node's IPs
// from their export's host lists (nfs.go). A node known only as
// an NFS client (no host) cannot lose a block volume.
func (a *PowerStoreAdapter) Cover(id arrayclients.Identity, v arrayclients.VolumeRef) (arrayclients.Cut, *arrayclients.Gap) {
	if v.Protocol == arrayclients.ProtocolNFS {
		return arrayclients.CutNFSExportHosts, nil
	}
	if id.Kind == PowerStoreKindNFSClient {
		return "", &arrayclients.Gap{Reason: arrayclients.GapIdentityNotFound, Detail: fmt.Sprintf("%s: PowerStore array %s has no host for the node "+
			"(known only as NFS client %s), so its access to block volume %s cannot be cut", v.Volume, a.cfg.Name,
			strings.Join(id.Keys, ", "), v.Object)}
	}
	if a.mode == arrayclients.PowerStoreModeDetach {
		return arrayclients.CutHostDetach, nil
	}
	return arrayclients.CutHostInitiators, nil
}

// Holds reports whether a volume at loc is on this array.
func (a *PowerStoreAdapter) Holds(loc arrayclients.VolumeLocation) bool { return a.cfg.Holds(loc) }
