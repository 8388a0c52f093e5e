package arrayclients

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// A node's storage footprint is every volume Kubernetes has attached or is
// attaching to it (VolumeAttachments, their PersistentVolumes, each CSI
// driver and volume handle), placed on the configured arrays by the array
// identifier the handle carries, plus whatever each array shows mapped or
// exported to the node's identity. A fence must cut the node's access to
// every footprint volume and prove each cut by reading the array back; a
// volume that cannot be cut is a Gap and makes the node unprotected
// (PRODUCT.md, invariants 1 and 7). docs/footprint.md describes the whole.

// Protocol is how a volume reaches a node.
type Protocol string

// Protocols.
const (
	// ProtocolBlock is a SCSI or NVMe volume: SDC or NVMe mappings, LUN host
	// access, host initiators.
	ProtocolBlock Protocol = "block"
	// ProtocolNFS is a file system exported over NFS: export or share host
	// lists.
	ProtocolNFS Protocol = "nfs"
)

// VolumeLocation is where a CSI volume handle places a volume, in the terms
// of the driver that wrote it (ParseVolumeHandle).
type VolumeLocation struct {
	Family Family `json:"family"`
	// ArrayID names the array as the driver wrote it into the handle:
	// PowerFlex system ID (or name), PowerStore global ID (or management
	// IP), PowerMax symmetrix ID, Unity array ID, PowerScale cluster name.
	// Empty for a handle that names no array: a volume of the driver's
	// default array (legacy handles).
	ArrayID string `json:"arrayID,omitempty"`
	// Zone is the PowerScale access zone.
	Zone string `json:"zone,omitempty"`
	// Object is the volume on the array: PowerFlex volume or file system
	// ID, PowerStore volume or file system UUID, PowerMax device ID (or file
	// system ID), Unity LUN or file system ID, PowerScale export ID.
	Object string `json:"object"`
	// Name is the volume's name where the handle carries one.
	Name string `json:"name,omitempty"`
	// Protocol is how the volume reaches nodes.
	Protocol Protocol `json:"protocol"`
	// Remote is the other half of a replicated volume the driver publishes
	// on both arrays (a PowerStore metro volume): fencing must cut both.
	Remote *VolumeLocation `json:"remote,omitempty"`
}

// String renders the location for messages.
func (l VolumeLocation) String() string {
	s := fmt.Sprintf("%s %s %s", l.Family, l.Protocol, l.Object)
	if l.ArrayID != "" {
		s += " on " + l.ArrayID
	} else {
		s += " on the driver's default array"
	}
	if l.Zone != "" {
		s += " zone " + l.Zone
	}
	return s
}

// ParseVolumeHandle parses a volume handle written by the family's Dell
// CSI driver (formats in docs/footprint.md, read from each
// driver's own parser). fsType is the PersistentVolume's spec.csi.fsType;
// it tells a legacy PowerStore handle's protocol. An error names the
// handle and what is wrong with it.
func ParseVolumeHandle(f Family, handle, fsType string) (VolumeLocation, error) {
	if handle == "" {
		return VolumeLocation{}, fmt.Errorf("%s volume handle is empty", f)
	}
	if strings.ContainsAny(handle, " \t\r\n") || len(handle) > 1024 {
		return VolumeLocation{}, fmt.Errorf("%s volume handle %.80q is not a handle the driver writes", f, handle)
	}
	var (
		loc VolumeLocation
		err error
	)
	switch f {
	case PowerFlex:
		loc, err = parsePowerFlexHandle(handle)
	case PowerStore:
		loc, err = parsePowerStoreHandle(handle, fsType)
	case PowerMax:
		loc, err = parsePowerMaxHandle(handle)
	case Unity:
		loc, err = parseUnityHandle(handle)
	case PowerScale:
		loc, err = parsePowerScaleHandle(handle)
	default:
		return VolumeLocation{}, fmt.Errorf("volume handle %q: unknown family %q", handle, f)
	}
	if err != nil {
		return VolumeLocation{}, fmt.Errorf("%s volume handle %q: %w", f, handle, err)
	}
	return loc, nil
}

// csi-vxflexos (service/service.go): a block volume is
// "<systemID or name>-<volumeID>", the volume ID being the last "-" token
// and the system everything before it only when there are exactly two
// tokens (otherwise the default system); no "-" is a bare volume ID on the
// default system. An NFS volume is "<systemID or name>/<filesystemID>".
func parsePowerFlexHandle(h string) (VolumeLocation, error) {
	loc := VolumeLocation{Family: PowerFlex, Protocol: ProtocolBlock}
	if strings.Contains(h, "/") {
		i := strings.LastIndex(h, "/")
		sys, fs := h[:i], h[i+1:]
		if sys == "" || fs == "" || strings.Count(h, "/") != 1 {
			return loc, fmt.Errorf("an NFS handle is <system>/<filesystem ID>")
		}
		loc.Protocol, loc.ArrayID, loc.Object = ProtocolNFS, sys, fs
		return loc, nil
	}
	tokens := strings.Split(h, "-")
	loc.Object = tokens[len(tokens)-1]
	if len(tokens) == 2 {
		loc.ArrayID = tokens[0]
	}
	if loc.Object == "" || (len(tokens) == 2 && loc.ArrayID == "") {
		return loc, fmt.Errorf("a block handle is <system>-<volume ID>")
	}
	return loc, nil
}

// csi-powerstore (pkg/array/array.go ParseVolumeID): "<uuid>/<global ID or
// IP>/<protocol>", with ":<remote uuid>/<remote global ID>" for a metro
// volume; a bare UUID is a legacy volume of the default array whose
// protocol the PersistentVolume's fsType tells ("nfs" or a block one).
func parsePowerStoreHandle(h, fsType string) (VolumeLocation, error) {
	local, remote, metro := strings.Cut(h, ":")
	parts := strings.Split(local, "/")
	loc := VolumeLocation{Family: PowerStore, Object: parts[0]}
	if loc.Object == "" {
		return loc, fmt.Errorf("the volume UUID is empty")
	}
	switch len(parts) {
	case 1:
		loc.Protocol = ProtocolBlock
		if strings.EqualFold(fsType, "nfs") {
			loc.Protocol = ProtocolNFS
		}
	case 3:
		loc.ArrayID = parts[1]
		switch strings.ToLower(parts[2]) {
		case "scsi":
			loc.Protocol = ProtocolBlock
		case "nfs":
			loc.Protocol = ProtocolNFS
		default:
			return loc, fmt.Errorf("protocol %q is neither scsi nor nfs", parts[2])
		}
		if loc.ArrayID == "" {
			return loc, fmt.Errorf("the array's global ID is empty")
		}
	default:
		return loc, fmt.Errorf("a handle is <volume UUID>/<array global ID>/<protocol>")
	}
	if metro {
		rp := strings.Split(remote, "/")
		if len(rp) != 2 || rp[0] == "" || rp[1] == "" || len(parts) != 3 {
			return loc, fmt.Errorf("a metro handle ends in :<remote volume UUID>/<remote array global ID>")
		}
		loc.Remote = &VolumeLocation{Family: PowerStore, ArrayID: rp[1], Object: rp[0], Protocol: loc.Protocol}
	}
	return loc, nil
}

// csi-powermax (service/controller.go parseCsiID): the last two "-" tokens
// are the symmetrix ID and the device ID; a file system's handle ends in a
// five-token UUID instead (a last token longer than 5 characters after a
// second-last shorter than 12); SRDF forms carry "<sym>:<remote sym>" and
// "<dev>:<remote dev>". The volume name is what comes before.
func parsePowerMaxHandle(h string) (VolumeLocation, error) {
	loc := VolumeLocation{Family: PowerMax, Protocol: ProtocolBlock}
	tokens := strings.Split(h, "-")
	n := len(tokens)
	if n < 3 {
		return loc, fmt.Errorf("a handle ends in -<symmetrix ID>-<device ID>")
	}
	dev, sym := tokens[n-1], tokens[n-2]
	if len(dev) > 5 && len(sym) < 12 {
		if n < 7 {
			return loc, fmt.Errorf("a file system handle ends in -<symmetrix ID>-<file system UUID>")
		}
		dev, sym = strings.Join(tokens[n-5:], "-"), tokens[n-6]
		loc.Protocol = ProtocolNFS
	}
	trailer := len(dev) + len(sym) + 2
	if len(h) <= trailer+2 {
		return loc, fmt.Errorf("the handle has no volume name before -<symmetrix ID>-<device ID>")
	}
	loc.Name = h[:len(h)-trailer]
	if s, rs, ok := strings.Cut(sym, ":"); ok {
		d, rd, ok := strings.Cut(dev, ":")
		if !ok || s == "" || rs == "" || d == "" || rd == "" {
			return loc, fmt.Errorf("an SRDF handle names <sym>:<remote sym> and <dev>:<remote dev>")
		}
		sym, dev = s, d
		loc.Remote = &VolumeLocation{Family: PowerMax, ArrayID: rs, Object: rd, Name: loc.Name, Protocol: loc.Protocol}
	}
	if sym == "" || dev == "" {
		return loc, fmt.Errorf("the symmetrix ID or device ID is empty")
	}
	loc.ArrayID, loc.Object = sym, dev
	return loc, nil
}

// csi-unity (service/service.go getVolumeIDFromVolumeContext and
// getProtocolFromVolumeContext): "<name>-<protocol>-<array ID>-<id>" with
// at least four "-" tokens, the id last, the array before it and the
// protocol (FC, iSCSI, NFS) before that; a single token is a v1.0/1.1 id
// on the default array (LUNs are sv_N, file systems fs_N).
func parseUnityHandle(h string) (VolumeLocation, error) {
	loc := VolumeLocation{Family: Unity}
	tokens := strings.Split(h, "-")
	n := len(tokens)
	var proto string
	switch {
	case n == 1:
		loc.Object = h
		switch {
		case strings.HasPrefix(h, "sv_"):
			loc.Protocol = ProtocolBlock
		case strings.HasPrefix(h, "fs_"):
			loc.Protocol = ProtocolNFS
		default:
			return loc, fmt.Errorf("a legacy handle is a LUN (sv_N) or file system (fs_N) ID")
		}
		return loc, nil
	case n >= 4:
		loc.Object, loc.ArrayID, proto = tokens[n-1], tokens[n-2], tokens[n-3]
		loc.Name = strings.Join(tokens[:n-3], "-")
	default:
		return loc, fmt.Errorf("a handle is <name>-<protocol>-<array ID>-<id>")
	}
	switch strings.ToUpper(proto) {
	case "FC", "ISCSI":
		loc.Protocol = ProtocolBlock
	case "NFS":
		loc.Protocol = ProtocolNFS
	default:
		return loc, fmt.Errorf("protocol %q is not FC, iSCSI or NFS", proto)
	}
	if loc.Object == "" || loc.ArrayID == "" {
		return loc, fmt.Errorf("the array ID or volume ID is empty")
	}
	return loc, nil
}

// csi-isilon (common/utils/identifiers/volume.go ParseNormalizedVolumeID):
// "<name>=_=_=<export ID>=_=_=<access zone>[=_=_=<cluster name>]"; without
// a cluster name the volume is on the default cluster.
func parsePowerScaleHandle(h string) (VolumeLocation, error) {
	loc := VolumeLocation{Family: PowerScale, Protocol: ProtocolNFS}
	tokens := strings.Split(h, "=_=_=")
	if len(tokens) < 3 {
		return loc, fmt.Errorf("a handle is <name>=_=_=<export ID>=_=_=<zone>=_=_=<cluster>")
	}
	loc.Name, loc.Object, loc.Zone = tokens[0], tokens[1], tokens[2]
	if len(tokens) > 3 {
		loc.ArrayID = tokens[3]
	}
	if loc.Object == "" || strings.Trim(loc.Object, "0123456789") != "" {
		return loc, fmt.Errorf("export ID %q is not a number", loc.Object)
	}
	if loc.Zone == "" {
		return loc, fmt.Errorf("the access zone is empty")
	}
	return loc, nil
}

// Holds reports whether a volume at loc is on the array this configuration
// describes: same family, the handle's array identifier is one of
// ArrayIDs (case-insensitive) or, for a handle that names none, the array
// is the driver's default (CSIDefault); for PowerScale also the same access
// zone. It does no I/O.
func (c Config) Holds(loc VolumeLocation) bool {
	if !c.HoldsArray(loc) {
		return false
	}
	if c.Family == PowerScale {
		zone := c.Zone
		if zone == "" {
			zone = "System"
		}
		return strings.EqualFold(zone, loc.Zone)
	}
	return true
}

// HoldsArray is Holds without the PowerScale access zone: whether the
// handle names this array (or, naming none, this is the driver's default).
func (c Config) HoldsArray(loc VolumeLocation) bool {
	if loc.Family != c.Family {
		return false
	}
	if loc.ArrayID == "" {
		return c.CSIDefault
	}
	return slices.ContainsFunc(c.ArrayIDs, func(id string) bool { return strings.EqualFold(id, loc.ArrayID) })
}

// KubeVolume is one volume Kubernetes has attached or is attaching to a
// node, as its API objects show it: a VolumeAttachment and its
// PersistentVolume.
type KubeVolume struct {
	// PV is the PersistentVolume's name.
	PV string `json:"pv"`
	// Attachment is the VolumeAttachment's name ("" when the volume is
	// known from a pod only).
	Attachment string `json:"attachment,omitempty"`
	// Driver, Handle and FSType are the PV's spec.csi fields.
	Driver string `json:"driver"`
	Handle string `json:"handle"`
	FSType string `json:"fsType,omitempty"`
	// Attached is the VolumeAttachment's status.attached: false while the
	// attach is still in progress.
	Attached bool `json:"attached"`
	// MultiNode: the PV's access modes allow more than one node
	// (ReadWriteMany or ReadOnlyMany).
	MultiNode bool `json:"multiNode,omitempty"`
}

// FootprintVolume is one volume of a node's storage footprint as fenced
// placed it.
type FootprintVolume struct {
	KubeVolume
	// Placements are the configured arrays that hold the volume (two for a
	// metro volume) and what it is on each.
	Placements []Placement `json:"placements,omitempty"`
	// Gap, when set, is why the node's access to this volume cannot be cut.
	Gap *Gap `json:"gap,omitempty"`
}

// Placement is a footprint volume on one configured array.
type Placement struct {
	Array string `json:"array"`
	VolumeRef
}

// VolumeRef is a footprint volume as one array holds it: what Plan, Verify,
// Undo and VerifyRestore address.
type VolumeRef struct {
	// Volume names it in the footprint: the PersistentVolume's name.
	Volume string `json:"volume"`
	// Object, Protocol, Zone and Name come from the handle
	// (VolumeLocation).
	Object   string   `json:"object"`
	Protocol Protocol `json:"protocol"`
	Zone     string   `json:"zone,omitempty"`
	Name     string   `json:"name,omitempty"`
	// MultiNode and Attached come from Kubernetes (KubeVolume).
	MultiNode bool `json:"multiNode,omitempty"`
	Attached  bool `json:"attached"`
	// Unattached maps the identity keys (IPs) on this array of the
	// cluster's other nodes that have no VolumeAttachment to the volume
	// to their node names. The pipeline sets it, for the NFS volumes of
	// families whose driver may list nodes that do not use a volume
	// (csi-vxflexos with interfaceNames), before each Plan; nil means not
	// known. It is never recorded.
	Unattached map[string]string `json:"-"`
}

// Holder is what placing a volume needs of a configured array.
type Holder interface {
	Name() string
	Family() Family
	Holds(loc VolumeLocation) bool
}

// Place places a volume Kubernetes attached to a node on the arrays that
// hold it. drivers maps a CSI driver name to its family (DefaultDrivers and
// the cluster's additions); arrays are the cluster's arrays. A volume of an
// unknown driver, with a handle that does not parse, or on an array (or
// metro partner) that no configured array holds is returned with a Gap
// saying so; a volume two configured arrays claim is a Gap too (the
// configuration is ambiguous).
func Place(v KubeVolume, drivers map[string]Family, arrays []Holder) FootprintVolume {
	fv := FootprintVolume{KubeVolume: v}
	if v.Handle == "" {
		fv.Gap = &Gap{Reason: GapBadHandle, Detail: fmt.Sprintf("%s (attachment %s, attacher %s) has no CSI volume handle: "+
			"its PersistentVolume was not found or is not a CSI volume", v.PV, v.Attachment, v.Driver)}
		return fv
	}
	fam, ok := drivers[v.Driver]
	if !ok {
		fv.Gap = &Gap{Reason: GapUnknownDriver, Detail: fmt.Sprintf("CSI driver %q is not one fenced can fence "+
			"(clusters[].drivers maps driver names to array families)", v.Driver)}
		return fv
	}
	loc, err := ParseVolumeHandle(fam, v.Handle, v.FSType)
	if err != nil {
		fv.Gap = &Gap{Reason: GapBadHandle, Detail: err.Error()}
		return fv
	}
	for l := &loc; l != nil; l = l.Remote {
		var names []string
		for _, a := range arrays {
			if a.Holds(*l) {
				names = append(names, a.Name())
			}
		}
		switch len(names) {
		case 0:
			what := "array"
			if l != &loc {
				what = remoteKind(fam)
			}
			fv.Gap = &Gap{Reason: GapArrayNotConfigured, Detail: fmt.Sprintf("the %s of %s (%s) is not one of the cluster's "+
				"arrays (arrays[].%s)", what, v.PV, l, arrayIDField(fam))}
			fv.Placements = nil
			return fv
		case 1:
			fv.Placements = append(fv.Placements, Placement{Array: names[0], VolumeRef: VolumeRef{
				Volume: v.PV, Object: l.Object, Protocol: l.Protocol, Zone: l.Zone, Name: l.Name,
				MultiNode: v.MultiNode, Attached: v.Attached}})
		default:
			fv.Gap = &Gap{Reason: GapArrayNotConfigured, Detail: fmt.Sprintf("%s (%s) is claimed by arrays %s: give them "+
				"distinct identifiers", v.PV, l, strings.Join(names, " and "))}
			fv.Placements = nil
			return fv
		}
	}
	return fv
}

// arrayIDField names the configuration field that tells which arrays a
// family's handles name.
func arrayIDField(f Family) string {
	switch f {
	case PowerFlex:
		return "powerflex.systemID"
	case PowerStore:
		return "powerstore.globalID"
	case PowerMax:
		return "powermax.symmetrixID"
	case Unity:
		return "unity.arrayID"
	case PowerScale:
		return "powerscale.clusterName and powerscale.zone"
	}
	return "family"
}

// DefaultDrivers maps the Dell CSI drivers' default names to their
// families.
func DefaultDrivers() map[string]Family {
	return map[string]Family{
		DriverPowerFlex:  PowerFlex,
		DriverPowerStore: PowerStore,
		DriverPowerScale: PowerScale,
		DriverPowerMax:   PowerMax,
		DriverUnity:      Unity,
	}
}

// DefaultDriver returns the default name of the family's Dell CSI driver:
// the key adapters read a node's CSINode ID under.
func DefaultDriver(f Family) string {
	for name, fam := range DefaultDrivers() {
		if fam == f {
			return name
		}
	}
	return ""
}

// ForInstance returns the node as an array of family f sees it when the
// array is served by the CSI driver instance whose names are drivers, in
// order of preference: the node ID the node reported for the first of them
// it has is filed under the family's default driver name, where adapters
// read it, and no ID is when the node reported none of them. Two
// instances of one family (two csi-powerstore installs with their own
// driver names and node name prefixes) each give the node its own node ID
// and register it on their own arrays; an array must be resolved with the
// node ID of its own instance, never another's. Other families' IDs are
// kept as they are.
func (n Node) ForInstance(f Family, drivers []string) Node {
	out := n
	out.CSINodeIDs = maps.Clone(n.CSINodeIDs)
	def := DefaultDriver(f)
	if def == "" {
		return out
	}
	if out.CSINodeIDs == nil {
		out.CSINodeIDs = map[string]string{}
	}
	delete(out.CSINodeIDs, def)
	for _, name := range drivers {
		if id := n.CSINodeIDs[name]; id != "" {
			out.CSINodeIDs[def] = id
			break
		}
	}
	if len(out.CSINodeIDs) == 0 {
		out.CSINodeIDs = nil
	}
	return out
}

// UnnamedInstance returns the driver names an array of family f is
// resolved with when its driver instance is not named (arrays[].driverName
// unset), in order of preference: the family's default name, then the
// other names drivers maps to f, sorted (a single driver installed under
// another name). The configuration refuses the cases where this would be
// ambiguous: two such names, or two such arrays beside one such name.
func UnnamedInstance(f Family, drivers map[string]Family) []string {
	def := DefaultDriver(f)
	out := []string{def}
	for _, name := range slices.Sorted(maps.Keys(drivers)) {
		if drivers[name] == f && name != def {
			out = append(out, name)
		}
	}
	return out
}

// Cut names how fenced removes a node's access to a volume.
type Cut string

// Cuts. Host-level cuts remove the node's identity (every volume the array
// gives that identity loses it at once); the others remove one volume's
// access.
const (
	// CutSDCUnmap unmaps the volume from the node's PowerFlex SDC.
	CutSDCUnmap Cut = "sdc-unmap"
	// CutNVMeUnmap unmaps the volume from the node's PowerFlex NVMe host.
	CutNVMeUnmap Cut = "nvme-unmap"
	// CutHostInitiators removes the initiators of the node's host
	// (PowerStore initiators mode, PowerMax): host-level.
	CutHostInitiators Cut = "host-initiators"
	// CutHostDetach detaches the volume from the node's PowerStore host.
	CutHostDetach Cut = "host-detach"
	// CutStorageGroup removes the volume from the node's PowerMax storage
	// group (what csi-powermax's unpublish does).
	CutStorageGroup Cut = "storage-group"
	// CutLUNHostAccess removes the node's host from the Unity LUN's host
	// access.
	CutLUNHostAccess Cut = "lun-host-access"
	// CutExportClients removes the node's client strings from the
	// PowerScale export's client lists.
	CutExportClients Cut = "export-clients"
	// CutNFSExportHosts removes the node's IPs from a PowerStore or
	// PowerFlex NFS export's host lists.
	CutNFSExportHosts Cut = "nfs-export-hosts"
	// CutNFSShareHosts removes the node's host from a Unity NFS share's
	// access lists.
	CutNFSShareHosts Cut = "nfs-share-hosts"
	// CutNotMapped: the array gives the volume to nobody (the attach has
	// not reached it yet, or it was already cut): nothing to remove, which
	// the read-back proves like any cut.
	CutNotMapped Cut = "not-mapped"
)

// HostLevel reports whether the cut removes the node's identity rather
// than one volume's access.
func (c Cut) HostLevel() bool { return c == CutHostInitiators }

// GapReason is why a node's access to a volume cannot be cut. The values
// are metric labels: few and stable.
type GapReason string

// Gap reasons.
const (
	// GapUnknownDriver: the volume's CSI driver is not mapped to a family.
	GapUnknownDriver GapReason = "unknown-driver"
	// GapBadHandle: the volume handle is not one the family's driver writes.
	GapBadHandle GapReason = "bad-handle"
	// GapArrayNotConfigured: the handle names an array, zone or metro
	// partner the cluster's configuration does not list (or two claim it).
	GapArrayNotConfigured GapReason = "array-not-configured"
	// GapIdentitiesNotLearned: the node's identities were never learned.
	GapIdentitiesNotLearned GapReason = "identities-not-learned"
	// GapIdentityNotFound: the node has footprint on the array but its
	// identity there was not found (an unknown node-ID or host-naming form).
	GapIdentityNotFound GapReason = "identity-not-found"
	// GapIdentityAmbiguous: more than one array object could be the node.
	GapIdentityAmbiguous GapReason = "identity-ambiguous"
	// GapCutUnsupported: this version of fenced cannot cut this kind of
	// volume or identity on this family.
	GapCutUnsupported GapReason = "cut-unsupported"
	// GapNotFenceable: the array cannot take this volume away from one node
	// (PowerMax NFS exports are open to every host; a vSphere host shared by
	// every node).
	GapNotFenceable GapReason = "not-fenceable"
	// GapVolumeNotFound: the array has no such volume.
	GapVolumeNotFound GapReason = "volume-not-found"
	// GapOtherIdentity: the array gives the volume to other hosts but not to
	// the identity fenced knows for the node, so the node may reach it
	// through an identity fenced does not know.
	GapOtherIdentity GapReason = "other-identity"
	// GapExternalAccess: the volume's NFS export lists an external (NAT)
	// access entry the array's configuration names (externalAccess): the
	// driver adds it on every publish and every node behind it can mount
	// the export, so the node's own entries are not all its access.
	GapExternalAccess GapReason = "external-access"
	// GapDriverRegrant: the driver will give the node its access back
	// after a fence: the volume's PowerFlex NFS export lists IPs of nodes
	// without a VolumeAttachment to it, the mark of csi-vxflexos with
	// interfaceNames, which adds every node's IPs on every publish.
	GapDriverRegrant GapReason = "driver-regrant"
	// GapRepeatedRegression: fenced's held checks found the node's access
	// to the volume on the array again, after fences had cut it, several
	// times in a short while: something keeps giving it back. Unlike the
	// other reasons it does not keep the node from being fenced (the
	// volume can be cut, and held checks cut it again); it reports that
	// between a re-grant and the next held check the fence does not hold.
	GapRepeatedRegression GapReason = "repeated-regression"
)

// GapReasons lists every reason (metric series are initialised from it).
func GapReasons() []GapReason {
	return []GapReason{GapUnknownDriver, GapBadHandle, GapArrayNotConfigured, GapIdentitiesNotLearned,
		GapIdentityNotFound, GapIdentityAmbiguous, GapCutUnsupported, GapNotFenceable, GapVolumeNotFound,
		GapOtherIdentity, GapExternalAccess, GapDriverRegrant, GapRepeatedRegression}
}

// Blocking reports whether a gap of this reason keeps a node from being
// fenced on a verdict (invariant 7): every reason but
// GapRepeatedRegression, which is a report on a volume that can be cut.
func (r GapReason) Blocking() bool { return r != GapRepeatedRegression }

// Gap is why a node's access to one volume cannot be cut.
type Gap struct {
	Reason GapReason `json:"reason"`
	// Detail says what was looked for and what was found, for status, logs
	// and Events.
	Detail string `json:"detail"`
}

// Error lets a Gap travel as an error.
func (g *Gap) Error() string { return string(g.Reason) + ": " + g.Detail }

// VolumeCut is the plan for one footprint volume on one array: the cut
// that removes the node's access, or the gap.
type VolumeCut struct {
	VolumeRef
	// Cut is how the node's access is removed; empty when Gap is set.
	Cut Cut `json:"cut,omitempty"`
	// Holders are the other identities (hosts, SDCs, export clients) the
	// array gave the volume to when the plan was read: evidence.
	Holders []string `json:"holders,omitempty"`
	Gap     *Gap     `json:"gap,omitempty"`
}

// VolumeCheck is what a read-back shows of one footprint volume.
type VolumeCheck struct {
	// Volume and Object name it (VolumeRef).
	Volume string `json:"volume"`
	Object string `json:"object"`
	// NodeAccess: the array gives the node's identity access to it.
	NodeAccess bool `json:"nodeAccess"`
	// Holders are the other identities the array gives it to.
	Holders []string `json:"holders,omitempty"`
	// Note explains a volume left as it was on restore ("moved to host X",
	// "not wanted by Kubernetes on the node").
	Note string `json:"note,omitempty"`
}

// RestoreScope is what an unfence may give back besides the host-level
// identity it removed: per-volume access only for the footprint volumes
// Kubernetes still wants on the node (a VolumeAttachment to it that is not
// being deleted), and only where no other node holds them (unless the
// volume is multi-node). Volumes that moved stay with their new node.
type RestoreScope struct {
	// Wanted names footprint volumes (VolumeRef.Volume) Kubernetes still
	// wants on the node.
	Wanted []string `json:"wanted,omitempty"`
	// Learned is the node's identity on the array as last learned while
	// it was healthy (resolved from its current Node and CSINode), when
	// known. The controller sets it before each undo and read-back; it is
	// never recorded. A node back with a new name for its array object
	// (a PowerStore node back with a new IP registers a new host) is
	// recognised by it.
	Learned *Identity `json:"-"`
}

// Wants reports whether Kubernetes still wants the volume on the node.
func (s RestoreScope) Wants(volume string) bool { return slices.Contains(s.Wanted, volume) }

// remoteKind names the second array of a replicated volume as its family
// calls it: PowerMax's SRDF partner, PowerStore's metro partner.
func remoteKind(f Family) string {
	if f == PowerMax {
		return "SRDF partner"
	}
	return "metro partner"
}
