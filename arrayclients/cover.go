package arrayclients

import (
	"fmt"
	"strings"
)

// Cover implementations: which cut each family uses for a footprint
// volume, decided from the identity and the volume alone (no I/O). Plan
// then reads the volume to confirm the cut or find a gap (not on the
// array, given to another identity).

// Cover: PowerFlex block volumes are unmapped from the node's SDC (or
// NVMe host, powerflex_nvme.go); NFS
// volumes' exports lose the node's IPs (powerflex_nfs.go).
func (a *PowerFlexAdapter) Cover(id Identity, v VolumeRef) (Cut, *Gap) {
	if v.Protocol == ProtocolNFS {
		return a.coverNFS(id, v)
	}
	if id.Kind == PowerFlexKindNFSClient {
		return "", &Gap{Reason: GapIdentityNotFound, Detail: fmt.Sprintf("%s: the node has no SDC on PowerFlex array %s "+
			"(its csi-vxflexos node ID names none), so its access to a block volume cannot be cut", v.Volume, a.cfg.Name)}
	}
	if id.Kind == PowerFlexKindNVMeHost {
		return CutNVMeUnmap, nil
	}
	return CutSDCUnmap, nil
}

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

// NotFenceable returns the gap of a volume that no identity's access can
// be cut from on its family, whatever the node's identities there (it is
// decided before any identity is looked for, so a node with no identity
// on the array gets this gap, not identity-not-found), or nil. PowerMax
// NFS exports are created open to every host.
func NotFenceable(f Family, v VolumeRef) *Gap {
	if f == PowerMax && v.Protocol != ProtocolBlock {
		return &Gap{Reason: GapNotFenceable, Detail: fmt.Sprintf("%s: csi-powermax creates NFS exports open to every "+
			"host (DefaultAccess ReadWrite), so one node's access to them cannot be removed", v.Volume)}
	}
	return nil
}

// Cover: Unity LUNs lose the host's access; NFS file systems lose it from
// their shares' host lists.
func (a *UnityAdapter) Cover(_ Identity, v VolumeRef) (Cut, *Gap) {
	if v.Protocol == ProtocolNFS {
		return CutNFSShareHosts, nil
	}
	return CutLUNHostAccess, nil
}

// Holds: every family places volumes by its configuration (Config.Holds).

// Holds reports whether a volume at loc is on this array.
func (a *PowerFlexAdapter) Holds(loc VolumeLocation) bool { return a.cfg.Holds(loc) }

// Holds reports whether a volume at loc is on this array.
func (a *PowerStoreAdapter) Holds(loc VolumeLocation) bool { return a.cfg.Holds(loc) }

// Holds reports whether a volume at loc is on this array.
func (a *PowerMaxAdapter) Holds(loc VolumeLocation) bool { return a.cfg.Holds(loc) }

// Holds reports whether a volume at loc is on this array.
func (a *UnityAdapter) Holds(loc VolumeLocation) bool { return a.cfg.Holds(loc) }
