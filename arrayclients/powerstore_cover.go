package arrayclients

import (
	"fmt"
	"strings"
)

// Cover: PowerStore block volumes lose the host's initiators (or are
// detached from the host in detach mode); NFS volumes lose the node's IPs
// from their export's host lists (powerstore_nfs.go). A node known only as
// an NFS client (no host) cannot lose a block volume.
func (a *PowerStoreAdapter) Cover(id Identity, v VolumeRef) (Cut, *Gap) {
	if v.Protocol == ProtocolNFS {
		return CutNFSExportHosts, nil
	}
	if id.Kind == PowerStoreKindNFSClient {
		return "", &Gap{Reason: GapIdentityNotFound, Detail: fmt.Sprintf("%s: PowerStore array %s has no host for the node "+
			"(known only as NFS client %s), so its access to block volume %s cannot be cut", v.Volume, a.cfg.Name,
			strings.Join(id.Keys, ", "), v.Object)}
	}
	if a.mode == PowerStoreModeDetach {
		return CutHostDetach, nil
	}
	return CutHostInitiators, nil
}

// Holds reports whether a volume at loc is on this array.
func (a *PowerStoreAdapter) Holds(loc VolumeLocation) bool { return a.cfg.Holds(loc) }
