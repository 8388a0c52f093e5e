package powerflex

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	siotypes "github.com/dell/goscaleio/types/v1"

	"github.com/fenced-project/fenced/arrayclients"
)

// PowerFlex NVMe/TCP (PowerFlex >= 4.0). csi-vxflexos then reports as the
// node ID the name of an NVMe host: "<node IP>-<sha256(Node UID)>" cut to
// 31 characters, or the name of an existing NVMe host whose NQN is the
// node's (dell/csi-powerflex service/service.go setupNVMeHost). The MDM
// lists NVMe hosts among the SDCs with hostType NVMeHost (goscaleio
// GetAllNvmeHosts reads /api/instances/System::<id>/relationships/Sdc),
// the controller finds the node's with FindSdc("Name", nodeID)
// (service/service.go getHostIDAndType), publishes with MapVolumeNVMe
// (POST /api/instances/Volume::<id>/action/addMappedHost, hostId) and
// unpublishes with RemoveMappedHost (.../action/removeMappedHost,
// hostId) (service/publisher.go, service/controller.go). A volume's
// mappedSdcInfo lists its NVMe hosts with hostType NVMeHost, the host ID
// as sdcId; QoS limits of an NVMe mapping are set with setMappedSdcLimits
// and that host ID (service/controller.go setQoSParameters), so the
// mapping's limitIops and limitBwInMbps are recorded and restored like an
// SDC mapping's.
//
// Reading: the node's NVMe host by ID (GET /api/instances/Sdc::<id>, the
// path goscaleio GetNvmeHostByID reads), then every volume and snapshot
// of the gateway (GET /api/types/Volume/instances) filtered by the host ID
// in mappedSdcInfo: that is what the driver itself reads of a volume; no
// source shows that an NVMe host serves the SDC's Volume relationship.

// errPflexVolumeGone: a volume an unfence would map back is no longer on
// the array (read back after a failed map).
var errPflexVolumeGone = errors.New("volume no longer on the array")

// PowerFlexKindNVMeHost is the Identity.Kind of a PowerFlex node attached
// over NVMe/TCP: ObjectID is the NVMe host's ID, ObjectName its name (the
// node's csi-vxflexos node ID), Keys the node's IPs (what NFS exports name
// it by).
const PowerFlexKindNVMeHost = "nvme-host"

// pflexHostTypeNVMe is an NVMe host's hostType.
const pflexHostTypeNVMe = "NVMeHost"

// isNVMe reports whether the plan's host is an NVMe host.
func (e PowerFlexEntries) isNVMe() bool { return e.HostType == pflexHostTypeNVMe }

// hostLabel names the plan's host in messages: "SDC <id>" or "NVMe host
// <name> (<id>)".
func (e PowerFlexEntries) hostLabel() string {
	if e.isNVMe() {
		return "NVMe host " + e.HostName + " (" + e.SdcID + ")"
	}
	return "SDC " + e.SdcID
}

// pflexIdentityLabel names an identity's host in messages.
func pflexIdentityLabel(id arrayclients.Identity) string {
	if id.Kind == PowerFlexKindNVMeHost {
		return "NVMe host " + id.ObjectName + " (" + id.ObjectID + ")"
	}
	return "SDC " + id.ObjectName + " (" + id.ObjectID + ")"
}

// nvmeHostMatches reports whether s is an NVMe host named exactly key.
func nvmeHostMatches(s siotypes.Sdc, key string) bool {
	return s.HostType == pflexHostTypeNVMe && s.Name == key
}

// nvmeIdentity is the identity of a node whose node ID names an NVMe host.
func (a *PowerFlexAdapter) nvmeIdentity(node arrayclients.Node, s siotypes.Sdc) arrayclients.Identity {
	id := arrayclients.Identity{Array: a.cfg.Name, Family: arrayclients.PowerFlex, Node: node.Name, Kind: PowerFlexKindNVMeHost,
		ObjectID: s.ID, ObjectName: s.Name, Keys: nodeIPs(node)}
	return id
}

// planEntriesNVMe records every volume mapped to the identity's NVMe host
// with its access mode, limits and other holders, and returns the
// volumes it read (every volume of the system).
func (a *PowerFlexAdapter) planEntriesNVMe(k powerFlexCall, id arrayclients.Identity) (PowerFlexEntries, pflexListing, error) {
	sys, err := a.findSystem(k)
	if err != nil {
		return PowerFlexEntries{}, pflexListing{}, err
	}
	e := PowerFlexEntries{SystemID: sys.ID, SdcID: id.ObjectID, HostType: pflexHostTypeNVMe, HostName: id.ObjectName,
		HoldersRecorded: true}
	l, found, err := a.hostVolumes(k, e)
	if err != nil {
		return PowerFlexEntries{}, pflexListing{}, err
	}
	if !found {
		return PowerFlexEntries{}, pflexListing{}, fmt.Errorf("%w: %s no longer exists", arrayclients.ErrNoIdentity, e.hostLabel())
	}
	e.Mappings = l.mappings(e.SdcID)
	if e.Mappings == nil {
		e.Mappings = []PowerFlexMapping{}
	}
	return e, l, nil
}

// currentNVMe reads the volumes of the system, among which the NVMe
// host's mappings are. found is false when the host no longer exists; a
// host of that ID that is not an NVMe host or has another name is not the
// node's.
func (a *PowerFlexAdapter) currentNVMe(k powerFlexCall, e PowerFlexEntries) (vols []*siotypes.Volume, found bool, err error) {
	host, err := k.sdcByID(e.SdcID)
	if powerFlexIs(err, pflexMsgNoSdc) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read %s: %w", e.hostLabel(), err)
	}
	if host.Sdc.HostType != pflexHostTypeNVMe || host.Sdc.Name != e.HostName {
		return nil, false, fmt.Errorf("%w: host %s is now %s %q, not NVMe host %q", arrayclients.ErrNoIdentity, e.SdcID,
			host.Sdc.HostType, host.Sdc.Name, e.HostName)
	}
	vols, err = k.allVolumes()
	if err != nil {
		return nil, false, fmt.Errorf("list volumes for %s: %w", e.hostLabel(), err)
	}
	return vols, true, nil
}

// hostVolumes reads the plan's host's volumes: an SDC's mapped volumes
// (GET /api/instances/Sdc::<id>/relationships/Volume), or every volume of
// the system for an NVMe host (a complete listing). found is false when
// the host no longer exists.
func (a *PowerFlexAdapter) hostVolumes(k powerFlexCall, e PowerFlexEntries) (pflexListing, bool, error) {
	if e.isNVMe() {
		vols, found, err := a.currentNVMe(k, e)
		return newListing(vols, true), found, err
	}
	vols, found, err := a.current(k, e.SdcID, e.SdcGUID)
	return newListing(vols, false), found, err
}

// hostMappings reads the plan's host's volume mappings (SDC or NVMe host).
func (a *PowerFlexAdapter) hostMappings(k powerFlexCall, e PowerFlexEntries) ([]PowerFlexMapping, bool, error) {
	l, found, err := a.hostVolumes(k, e)
	return l.mappings(e.SdcID), found, err
}

// unmapHost unmaps a volume from the plan's host: UnmapVolumeSdc for an
// SDC, RemoveMappedHost for an NVMe host. For an NVMe host a failed call
// is judged by reading the volume back (whatever the MDM's message): the
// volume gone or no longer mapped to the host is done.
func (a *PowerFlexAdapter) unmapHost(k powerFlexCall, e PowerFlexEntries, volID string) error {
	if !e.isNVMe() {
		return k.unmap(volID, e.SdcID)
	}
	err := k.unmapNVMe(volID, e.SdcID)
	if err == nil {
		return nil
	}
	acc, rerr := k.volumeAccess(volID, e.SdcID)
	if rerr == nil && (!acc.found || acc.mapping == nil) {
		return nil
	}
	return err
}

// mapHost maps a volume to the plan's host with the access mode:
// MapVolumeSdc for an SDC, MapVolumeNVMe for an NVMe host. For an NVMe
// host a failed call is judged by reading the volume back: mapped to the
// host is done, and a volume that is gone is the MDM's "no volume".
func (a *PowerFlexAdapter) mapHost(k powerFlexCall, e PowerFlexEntries, volID, mode string, allowMultiple bool) error {
	if !e.isNVMe() {
		return k.mapVolume(volID, e.SdcID, mode, allowMultiple)
	}
	err := k.mapNVMe(volID, e.SdcID, mode, allowMultiple)
	if err == nil {
		return nil
	}
	acc, rerr := k.volumeAccess(volID, e.SdcID)
	switch {
	case rerr != nil:
	case !acc.found:
		return fmt.Errorf("map volume %s to %s: %w", volID, e.hostLabel(), errPflexVolumeGone)
	case acc.mapping != nil:
		return nil
	}
	return err
}

// unmapNVMe removes a volume's mapping to an NVMe host (goscaleio
// RemoveMappedHost, what csi-vxflexos' unpublish calls).
func (k powerFlexCall) unmapNVMe(volID, hostID string) error {
	return k.volume(volID).RemoveMappedHost(&siotypes.UnmapVolumeNVMeParam{HostID: hostID})
}

// mapNVMe maps a volume to an NVMe host (goscaleio MapVolumeNVMe, what
// csi-vxflexos' publish calls), with multiple mappings allowed only when
// asked, as csi-vxflexos does for multi-node access modes.
func (k powerFlexCall) mapNVMe(volID, hostID, mode string, allowMultiple bool) error {
	allow := "FALSE"
	if allowMultiple {
		allow = "TRUE"
	}
	return k.volume(volID).MapVolumeNVMe(&siotypes.MapVolumeNVMeParam{
		HostID: hostID, AllowMultipleMappings: allow, AccessMode: mode,
	})
}

// allVolumes lists every volume and snapshot of the gateway (goscaleio
// GetVolume lists either volumes or snapshots: both are read).
func (k powerFlexCall) allVolumes() ([]*siotypes.Volume, error) {
	vols, err := k.client().GetVolume("", "", "", "", false)
	if err != nil {
		return nil, err
	}
	snaps, err := k.client().GetVolume("", "", "", "", true)
	if err != nil {
		return nil, err
	}
	out := slices.Concat(vols, snaps)
	slices.SortFunc(out, func(x, y *siotypes.Volume) int { return strings.Compare(x.ID, y.ID) })
	return slices.CompactFunc(out, func(x, y *siotypes.Volume) bool { return x.ID == y.ID }), nil
}
