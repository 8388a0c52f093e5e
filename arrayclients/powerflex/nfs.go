package powerflex

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	siotypes "github.com/dell/goscaleio/types/v1"

	"github.com/fenced-project/fenced/arrayclients"
)

// PowerFlex NFS (PowerFlex file, PowerFlex >= 4.0). csi-vxflexos publishes
// an NFS volume (handle "<system>/<file system ID>") by adding the node's
// IPs, as "<ip>/255.255.255.255", to the host lists of the file system's
// export, and unpublishes it by removing them (dell/csi-powerflex
// service/service.go exportFilesystem, unexportFilesystem). The IPs are
// the node's interface IPs from the driver's ConfigMap, else its SDC's
// IPs; a node without an SDC reports the Kubernetes Node UID as its node
// ID. So the node's NFS identity is its IPs: an SDC node's identity
// carries its SDC IPs and Kubernetes addresses in Keys, and a node with no
// SDC gets an identity of kind PowerFlexKindNFSClient whose Keys are its
// addresses.
//
// The cut (CutNFSExportHosts) removes, from each footprint volume's
// export, exactly the host entries that name one of the node's IPs (the
// plan records list and string); a read-back takes any entry whose
// address is a node IP, with or without a host mask, as access. The
// export is found as the driver finds it: the one whose file_system_id
// is the volume's, in the list of all exports (goscaleio GetNFSExport;
// GetNFSExportByIDName would report every failure as "not found"); the
// driver publishes on the last such export, but a node may mount the file
// system through any of them, so a plan, a cut and a read-back look at
// every export of the file system.

// PowerFlexKindNFSClient is the Identity.Kind of a PowerFlex node known by
// its IPs only: no SDC, NFS volumes only.
const PowerFlexKindNFSClient = "nfs-client"

// pflexDefaultNoAccess is the default access of an export that gives
// nothing to hosts not listed.
const pflexDefaultNoAccess = "No_Access"

// PowerFlex NFS export host lists, by their JSON names.
const (
	pflexListRO     = "read_only_hosts"
	pflexListRORoot = "read_only_root_hosts"
	pflexListRW     = "read_write_hosts"
	pflexListRWRoot = "read_write_root_hosts"
)

var pflexNFSLists = []string{pflexListRO, pflexListRORoot, pflexListRW, pflexListRWRoot}

// PowerFlexNFSExport is what a fence removes from one footprint volume's
// NFS export.
type PowerFlexNFSExport struct {
	// Volume is the footprint volume (PersistentVolume name).
	Volume       string `json:"volume"`
	FileSystemID string `json:"fileSystemID"`
	ExportID     string `json:"exportID"`
	ExportName   string `json:"exportName,omitempty"`
	// Entries are the host entries naming the node, exactly as listed.
	Entries []PowerFlexNFSHost `json:"entries"`
	// Others are the export's other host entries when the plan was read:
	// an entry listed at unfence that is not among them is a new holder.
	Others []string `json:"others"`
}

// PowerFlexNFSHost is one host entry of an export: the list it is in and
// its exact string.
type PowerFlexNFSHost struct {
	List  string `json:"list"`
	Value string `json:"value"`
}

func (h PowerFlexNFSHost) String() string { return h.List + " " + h.Value }

func (x PowerFlexNFSExport) label() string {
	return fmt.Sprintf("NFS export %s (%s) of file system %s", x.ExportName, x.ExportID, x.FileSystemID)
}

// pflexNodeIPs returns the IPs an identity names the node by on NFS
// exports: every key that is an IP (an SDC identity's first key is its
// GUID, which is none).
func pflexNodeIPs(id arrayclients.Identity) []net.IP {
	var out []net.IP
	for _, k := range id.Keys {
		ip := net.ParseIP(strings.TrimSpace(k))
		if ip != nil && !slices.ContainsFunc(out, ip.Equal) {
			out = append(out, ip)
		}
	}
	return out
}

// coverNFS: an NFS volume's export loses the node's IPs; an identity with
// no IP cannot be found on an export.
func (a *PowerFlexAdapter) coverNFS(id arrayclients.Identity, v arrayclients.VolumeRef) (arrayclients.Cut, *arrayclients.Gap) {
	if len(pflexNodeIPs(id)) == 0 {
		return "", &arrayclients.Gap{Reason: arrayclients.GapIdentityNotFound, Detail: fmt.Sprintf("%s: csi-vxflexos lists a node on a PowerFlex NFS "+
			"export by its IPs, and no IP of the node is known", v.Volume)}
	}
	return arrayclients.CutNFSExportHosts, nil
}

// pflexHostMatch tells what one host entry is to the node: exactly one of
// its IPs (a bare address or one with a host mask: node), a subnet
// holding one of them, or a name, netgroup or wildcard that may (hazard,
// with why), or another host.
func pflexHostMatch(entry string, ips []net.IP) (node bool, hazard string) {
	addr, mask, hasMask := strings.Cut(strings.TrimSpace(entry), "/")
	ip := net.ParseIP(addr)
	if ip == nil {
		if strings.HasPrefix(entry, "@") || strings.ContainsAny(entry, "*?[") {
			return false, "netgroup or wildcard " + entry + " may name the node"
		}
		return false, "host name " + entry + " may be the node"
	}
	bits := 8 * len(ip.To16())
	if ip.To4() != nil {
		ip, bits = ip.To4(), 32
	}
	ones := bits
	if hasMask {
		var err error
		if ones, err = strconv.Atoi(mask); err != nil {
			m := net.ParseIP(mask)
			if m == nil {
				return false, "entry " + entry + " has a mask fenced cannot read"
			}
			if m.To4() != nil {
				m = m.To4()
			}
			var sz int
			ones, sz = net.IPMask(m).Size()
			if sz == 0 {
				return false, "entry " + entry + " has a mask fenced cannot read"
			}
		}
		if ones < 0 || ones > bits {
			return false, "entry " + entry + " has a mask fenced cannot read"
		}
	}
	network := &net.IPNet{IP: ip.Mask(net.CIDRMask(ones, bits)), Mask: net.CIDRMask(ones, bits)}
	for _, n := range ips {
		switch {
		case ones == bits && n.Equal(ip):
			return true, ""
		case ones < bits && network.Contains(n):
			return false, "subnet " + entry + " contains the node's IP " + n.String()
		}
	}
	return false, ""
}

// pflexExportView is what one export as read shows of the node.
type pflexExportView struct {
	// mine are the entries naming the node; others the other entries;
	// hazards why the node may keep access its own entries do not give.
	mine    []PowerFlexNFSHost
	others  []string
	hazards []string
}

func pflexViewOf(x siotypes.NFSExport, ips []net.IP) pflexExportView {
	var v pflexExportView
	if x.DefaultAccess != pflexDefaultNoAccess {
		v.hazards = append(v.hazards, fmt.Sprintf("its default access is %q, not %s: every host may mount it",
			x.DefaultAccess, pflexDefaultNoAccess))
	}
	for _, list := range pflexNFSLists {
		for _, h := range pflexList(x, list) {
			node, hazard := pflexHostMatch(h, ips)
			switch {
			case node:
				v.mine = append(v.mine, PowerFlexNFSHost{List: list, Value: h})
			case hazard != "":
				v.hazards = append(v.hazards, list+": "+hazard)
				fallthrough
			default:
				if !slices.Contains(v.others, h) {
					v.others = append(v.others, h)
				}
			}
		}
	}
	return v
}

func pflexList(x siotypes.NFSExport, list string) []string {
	switch list {
	case pflexListRO:
		return x.ReadOnlyHosts
	case pflexListRORoot:
		return x.ReadOnlyRootHosts
	case pflexListRW:
		return x.ReadWriteHosts
	case pflexListRWRoot:
		return x.ReadWriteRootHosts
	}
	return nil
}

// pflexFile is the file API as read once per adapter call: every file
// system and export (each read at most once, on first use).
type pflexFile struct {
	k       powerFlexCall
	sys     *siotypes.System
	fss     []siotypes.FileSystem
	exports []siotypes.NFSExport
	read    bool
}

func (f *pflexFile) load() error {
	if f.read {
		return nil
	}
	f.k.client()
	fss, err := f.k.system(f.sys).GetAllFileSystems()
	if err != nil {
		return fmt.Errorf("list file systems: %w", err)
	}
	exports, err := f.k.client().GetNFSExport()
	if err != nil {
		return fmt.Errorf("list NFS exports: %w", err)
	}
	f.fss, f.exports, f.read = fss, exports, true
	return nil
}

// exportsOf returns every export of the file system, in the order the
// array lists them; fsFound is false when the file system does not exist.
// A node may mount the file system through any of them, so a cut and a
// read-back look at all.
func (f *pflexFile) exportsOf(fsID string) (xs []siotypes.NFSExport, fsFound bool, err error) {
	if err := f.load(); err != nil {
		return nil, false, err
	}
	fsFound = slices.ContainsFunc(f.fss, func(fs siotypes.FileSystem) bool { return fs.ID == fsID })
	for _, e := range f.exports {
		if e.FileSystemID == fsID {
			xs = append(xs, e)
		}
	}
	return xs, fsFound, nil
}

// exportOf returns the export csi-vxflexos publishes the file system on:
// the last of its exports the array lists (the driver's loop over every
// export keeps the last match, service/service.go). fsFound is false when
// the file system does not exist, found false when it has no export.
func (f *pflexFile) exportOf(fsID string) (x siotypes.NFSExport, fsFound, found bool, err error) {
	xs, fsFound, err := f.exportsOf(fsID)
	if err != nil || len(xs) == 0 {
		return x, fsFound, false, err
	}
	return xs[len(xs)-1], fsFound, true, nil
}

// exportByID returns the file system's export with the ID.
func (f *pflexFile) exportByID(fsID, exportID string) (x siotypes.NFSExport, found bool, err error) {
	xs, _, err := f.exportsOf(fsID)
	if err != nil {
		return x, false, err
	}
	i := slices.IndexFunc(xs, func(x siotypes.NFSExport) bool { return x.ID == exportID })
	if i < 0 {
		return x, false, nil
	}
	return xs[i], true, nil
}

func (a *PowerFlexAdapter) file(k powerFlexCall) (*pflexFile, error) {
	sys, err := a.findSystem(k)
	if err != nil {
		return nil, err
	}
	return &pflexFile{k: k, sys: sys}, nil
}

// planNFSVolume reads one NFS footprint volume's export and decides its
// cut: the node's entries (returned, to be removed), nothing to remove,
// or a gap.
func (a *PowerFlexAdapter) planNFSVolume(f *pflexFile, id arrayclients.Identity, v arrayclients.VolumeRef) (arrayclients.VolumeCut, *PowerFlexNFSExport, error) {
	vc := arrayclients.VolumeCut{VolumeRef: v}
	xs, fsFound, err := f.exportsOf(v.Object)
	if err != nil {
		return vc, nil, fmt.Errorf("read footprint volume %s (file system %s): %w", v.Volume, v.Object, err)
	}
	if !fsFound {
		vc.Gap = &arrayclients.Gap{Reason: arrayclients.GapVolumeNotFound, Detail: fmt.Sprintf("%s: PowerFlex array %s has no file system %s", v.Volume, a.cfg.Name, v.Object)}
		return vc, nil, nil
	}
	if len(xs) == 0 {
		vc.Cut = arrayclients.CutNotMapped // never published: the driver creates the export on first publish
		return vc, nil, nil
	}
	// Every export of the file system is read: the node may mount it
	// through any. The one recorded (and given back on unfence) is the
	// driver's, the last, unless only another lists the node.
	ips := pflexNodeIPs(id)
	var (
		view     pflexExportView
		recorded *siotypes.NFSExport
		mine     []PowerFlexNFSHost
	)
	for i := range xs {
		x := &xs[i]
		xv := pflexViewOf(*x, ips)
		for _, h := range xv.hazards {
			view.hazards = append(view.hazards, fmt.Sprintf("NFS export %s (%s): %s", x.Name, x.ID, h))
		}
		for _, h := range xv.others {
			if !slices.Contains(view.others, h) {
				view.others = append(view.others, h)
			}
		}
		view.mine = append(view.mine, xv.mine...)
		if len(xv.mine) > 0 && (recorded == nil || i == len(xs)-1) {
			recorded, mine = x, xv.mine
		}
	}
	vc.Holders = view.others
	switch {
	case len(view.hazards) > 0:
		vc.Gap = &arrayclients.Gap{Reason: arrayclients.GapNotFenceable, Detail: fmt.Sprintf("%s: %s", v.Volume, strings.Join(view.hazards, "; "))}
	case arrayclients.ExternalAccessGap(arrayclients.PowerFlex, a.cfg.Name, a.cfg.ExternalAccess, v, view.others) != nil:
		vc.Gap = arrayclients.ExternalAccessGap(arrayclients.PowerFlex, a.cfg.Name, a.cfg.ExternalAccess, v, view.others)
	case pflexRegrantGap(a.cfg.Name, v, view.others) != nil:
		vc.Gap = pflexRegrantGap(a.cfg.Name, v, view.others)
	case len(view.mine) > 0:
		vc.Cut = arrayclients.CutNFSExportHosts
		others := view.others
		if others == nil {
			others = []string{}
		}
		return vc, &PowerFlexNFSExport{Volume: v.Volume, FileSystemID: v.Object, ExportID: recorded.ID, ExportName: recorded.Name,
			Entries: mine, Others: others}, nil
	case len(view.others) > 0 && v.Attached:
		vc.Gap = arrayclients.OtherIdentityGap(arrayclients.PowerFlex, v, "IPs "+pflexIPList(ips), view.others)
	default:
		vc.Cut = arrayclients.CutNotMapped
	}
	return vc, nil, nil
}

// pflexRegrantGap is the gap of an NFS footprint volume whose exports
// list IPs of other nodes that have no VolumeAttachment to it
// (v.Unattached), or nil. csi-vxflexos with interfaceNames (its ConfigMap
// map of every node's interface IPs, needed by nodes whose node ID is no
// SDC GUID) adds the IPs of every node in the map to the export on each
// publish (service/controller.go findNetworkInterfaceIPs,
// service/service.go exportFilesystem): a fence that removes the node's
// IPs is undone by the next publish of the volume to any node.
func pflexRegrantGap(array string, v arrayclients.VolumeRef, entries []string) *arrayclients.Gap {
	if len(v.Unattached) == 0 {
		return nil
	}
	var found []string
	for _, e := range entries {
		for key, node := range v.Unattached {
			ip := net.ParseIP(strings.TrimSpace(key))
			if ip == nil {
				continue
			}
			if exact, _ := pflexHostMatch(e, []net.IP{ip}); exact {
				found = append(found, fmt.Sprintf("%s (node %s)", e, node))
				break
			}
		}
	}
	if len(found) == 0 {
		return nil
	}
	slices.Sort(found)
	return &arrayclients.Gap{Reason: arrayclients.GapDriverRegrant, Detail: fmt.Sprintf("%s: the NFS export on PowerFlex array %s lists %s, of nodes with no "+
		"VolumeAttachment to the volume: csi-vxflexos with interfaceNames adds every node's IPs on each publish, so the next "+
		"publish of the volume to any node would give a fenced node its access back", v.Volume, array, strings.Join(found, ", "))}
}

func pflexIPList(ips []net.IP) string {
	s := make([]string, len(ips))
	for i, ip := range ips {
		s[i] = ip.String()
	}
	return strings.Join(s, ", ")
}

// pflexNFSCuts are the plan's NFS footprint volumes that have a cut.
func pflexNFSCuts(p arrayclients.Plan) []arrayclients.VolumeCut {
	return slices.DeleteFunc(arrayclients.FootprintCuts(p), func(vc arrayclients.VolumeCut) bool { return vc.Protocol != arrayclients.ProtocolNFS })
}

// pflexBlockCuts are the plan's block footprint volumes that have a cut.
func pflexBlockCuts(p arrayclients.Plan) []arrayclients.VolumeCut {
	return slices.DeleteFunc(arrayclients.FootprintCuts(p), func(vc arrayclients.VolumeCut) bool { return vc.Protocol == arrayclients.ProtocolNFS })
}

// modifyHosts removes or adds host entries of one export in one call.
func (k powerFlexCall) modifyHosts(exportID string, hosts []PowerFlexNFSHost, add bool) error {
	m := &siotypes.NFSExportModify{}
	for _, h := range hosts {
		var l *[]string
		switch h.List {
		case pflexListRO:
			l = &m.RemoveReadOnlyHosts
			if add {
				l = &m.AddReadOnlyHosts
			}
		case pflexListRORoot:
			l = &m.RemoveReadOnlyRootHosts
			if add {
				l = &m.AddReadOnlyRootHosts
			}
		case pflexListRW:
			l = &m.RemoveReadWriteHosts
			if add {
				l = &m.AddReadWriteHosts
			}
		case pflexListRWRoot:
			l = &m.RemoveReadWriteRootHosts
			if add {
				l = &m.AddReadWriteRootHosts
			}
		default:
			return fmt.Errorf("%w: host list %q", arrayclients.ErrPlanMismatch, h.List)
		}
		*l = append(*l, h.Value)
	}
	return k.client().ModifyNFSExport(m, exportID)
}

// pflexListed reports whether the export's list holds the host entry h,
// in its recorded form or another form of the same host: the array lists
// an address given back without a mask as "<ip>/255.255.255.255".
func pflexListed(x siotypes.NFSExport, h PowerFlexNFSHost) bool {
	l := pflexList(x, h.List)
	if slices.Contains(l, h.Value) {
		return true
	}
	addr, _, _ := strings.Cut(h.Value, "/")
	ip := net.ParseIP(addr)
	if ip == nil {
		return false
	}
	if node, _ := pflexHostMatch(h.Value, []net.IP{ip}); !node {
		return false
	}
	return slices.ContainsFunc(l, func(e string) bool {
		node, _ := pflexHostMatch(e, []net.IP{ip})
		return node
	})
}

// present returns the hosts still listed in their list, exactly as
// recorded (what a remove must name).
func pflexPresent(x siotypes.NFSExport, hosts []PowerFlexNFSHost) []PowerFlexNFSHost {
	var out []PowerFlexNFSHost
	for _, h := range hosts {
		if slices.Contains(pflexList(x, h.List), h.Value) {
			out = append(out, h)
		}
	}
	return out
}

// applyNFS removes from each planned export the planned entries still
// listed, and from each NFS footprint volume's export any entry naming the
// node that the driver added after the plan was read (as the block cut
// unmaps a footprint volume mapped since). An export with nothing to
// remove gets no write; one that is gone counts as done.
func (a *PowerFlexAdapter) applyNFS(k powerFlexCall, p arrayclients.Plan, e PowerFlexEntries) error {
	cuts := pflexNFSCuts(p)
	if len(cuts) == 0 && len(e.NFSExports) == 0 {
		return nil
	}
	f, err := a.file(k)
	if err != nil {
		return err
	}
	ips := pflexNodeIPs(p.Identity)
	for _, vc := range cuts {
		xs, _, err := f.exportsOf(vc.Object)
		if err != nil {
			return fmt.Errorf("read footprint volume %s (file system %s): %w", vc.Volume, vc.Object, err)
		}
		for _, x := range xs {
			remove := pflexViewOf(x, ips).mine
			for _, px := range e.NFSExports {
				if px.ExportID == x.ID {
					for _, h := range pflexPresent(x, px.Entries) {
						if !slices.Contains(remove, h) {
							remove = append(remove, h)
						}
					}
				}
			}
			if len(remove) == 0 {
				continue
			}
			if err := k.modifyHosts(x.ID, remove, false); err != nil {
				return fmt.Errorf("remove %s from NFS export %s (%s): %w", pflexHostsString(remove), x.Name, x.ID, err)
			}
		}
	}
	return nil
}

func pflexHostsString(hs []PowerFlexNFSHost) string {
	s := make([]string, len(hs))
	for i, h := range hs {
		s[i] = h.String()
	}
	return strings.Join(s, ", ")
}

// verifyNFS reads each NFS footprint volume's export back into v: the
// node is fenced only when no list of any of them names one of its IPs
// and nothing else (default access, a subnet) lets it mount one; Restored
// needs every planned entry listed again.
func (a *PowerFlexAdapter) verifyNFS(k powerFlexCall, p arrayclients.Plan, e PowerFlexEntries, v *arrayclients.Verification) error {
	cuts := pflexNFSCuts(p)
	if len(cuts) == 0 {
		return nil
	}
	f, err := a.file(k)
	if err != nil {
		return err
	}
	ips := pflexNodeIPs(p.Identity)
	for _, vc := range cuts {
		xs, _, err := f.exportsOf(vc.Object)
		if err != nil {
			return fmt.Errorf("read footprint volume %s (file system %s): %w", vc.Volume, vc.Object, err)
		}
		chk := arrayclients.VolumeCheck{Volume: vc.Volume, Object: vc.Object}
		for _, x := range xs {
			view := pflexViewOf(x, ips)
			for _, h := range view.others {
				if !slices.Contains(chk.Holders, h) {
					chk.Holders = append(chk.Holders, h)
				}
			}
			chk.NodeAccess = chk.NodeAccess || len(view.mine) > 0 || len(view.hazards) > 0
			for _, h := range view.mine {
				v.Remaining = append(v.Remaining, fmt.Sprintf("NFS export %s (%s) of volume %s lists %s", x.Name, x.ID, vc.Volume, h))
			}
			for _, h := range view.hazards {
				v.Remaining = append(v.Remaining, fmt.Sprintf("NFS export %s (%s) of volume %s: %s", x.Name, x.ID, vc.Volume, h))
			}
		}
		if len(xs) == 0 {
			chk.Note = "the file system has no NFS export"
		}
		if chk.NodeAccess {
			v.Fenced = false
		}
		v.Volumes = append(v.Volumes, chk)
	}
	for _, px := range e.NFSExports {
		x, found, err := f.exportByID(px.FileSystemID, px.ExportID)
		if err != nil {
			return fmt.Errorf("read %s: %w", px.label(), err)
		}
		for _, h := range px.Entries {
			if !found || !pflexListed(x, h) {
				v.Missing = append(v.Missing, px.label()+": "+h.String())
				v.Restored = false
			}
		}
	}
	return nil
}

// pflexNFSRestore is what an unfence does with one NFS footprint volume.
type pflexNFSRestore struct {
	vc arrayclients.VolumeCut
	// x is the export as read now (found: it exists); px the plan's
	// record of it (nil when the fence removed nothing).
	x     siotypes.NFSExport
	found bool
	px    *PowerFlexNFSExport
	// give: put px's entries back; forbidden: the node may not keep
	// access; note: why it is left as it is.
	give, forbidden bool
	note            string
	holders         []string
}

// reconcileNFS applies docs/footprint.md "Unfence" to each NFS footprint
// volume from its export as read now: the node's entries come back only
// when Kubernetes still wants the volume on the node and no host listed
// now was absent when the plan was read (it moved), unless the volume is
// multi-node.
func (a *PowerFlexAdapter) reconcileNFS(k powerFlexCall, p arrayclients.Plan, e PowerFlexEntries, scope arrayclients.RestoreScope) ([]pflexNFSRestore, error) {
	cuts := pflexNFSCuts(p)
	if len(cuts) == 0 {
		return nil, nil
	}
	f, err := a.file(k)
	if err != nil {
		return nil, err
	}
	ips := pflexNodeIPs(p.Identity)
	var out []pflexNFSRestore
	for _, vc := range cuts {
		x, _, found, err := f.exportOf(vc.Object)
		if err != nil {
			return nil, fmt.Errorf("read footprint volume %s (file system %s): %w", vc.Volume, vc.Object, err)
		}
		r := pflexNFSRestore{vc: vc, x: x, found: found}
		for i := range e.NFSExports {
			if e.NFSExports[i].FileSystemID == vc.Object {
				r.px = &e.NFSExports[i]
			}
		}
		if r.px != nil {
			// The entries go back to the export they were removed from.
			if r.x, r.found, err = f.exportByID(vc.Object, r.px.ExportID); err != nil {
				return nil, fmt.Errorf("read footprint volume %s (file system %s): %w", vc.Volume, vc.Object, err)
			}
		}
		if !found {
			r.note = "the file system has no NFS export"
			out = append(out, r)
			continue
		}
		before := vc.Holders
		if r.px != nil {
			before = r.px.Others
		}
		for _, h := range pflexViewOf(x, ips).others {
			if !slices.Contains(before, h) {
				r.holders = append(r.holders, h)
			}
		}
		switch {
		case !arrayclients.KeepOnRestore(vc.VolumeRef, scope, r.holders):
			r.forbidden, r.note = true, arrayclients.LeftAsItWasNote(vc.VolumeRef, scope, r.holders)
		case r.px == nil:
			r.note = "not exported to the node when fenced: the CSI driver exports it when a pod needs it"
		default:
			r.give = true
		}
		out = append(out, r)
	}
	return out, nil
}

// undoNFS gives back the planned entries reconcileNFS allows, in exactly
// their lists and form, and removes the node's entries from footprint
// exports it may not keep. Entries present are left alone, so a repeat
// writes nothing.
func (a *PowerFlexAdapter) undoNFS(k powerFlexCall, p arrayclients.Plan, e PowerFlexEntries, scope arrayclients.RestoreScope) error {
	plan, err := a.reconcileNFS(k, p, e, scope)
	if err != nil {
		return err
	}
	ips := pflexNodeIPs(p.Identity)
	for _, r := range plan {
		switch {
		case r.give:
			var add []PowerFlexNFSHost
			for _, h := range r.px.Entries {
				if !pflexListed(r.x, h) {
					add = append(add, h)
				}
			}
			if len(add) == 0 {
				continue
			}
			if err := k.modifyHosts(r.x.ID, add, true); err != nil {
				return fmt.Errorf("give back %s on NFS export %s (%s): %w", pflexHostsString(add), r.x.Name, r.x.ID, err)
			}
		case r.forbidden:
			mine := pflexViewOf(r.x, ips).mine
			if len(mine) == 0 {
				a.logger.Info("left an NFS export as it was", "node", p.Identity.Node, "volume", r.vc.Volume, "reason", r.note)
				continue
			}
			if err := k.modifyHosts(r.x.ID, mine, false); err != nil {
				return fmt.Errorf("remove %s from NFS export %s (%s), %s: %w", pflexHostsString(mine), r.x.Name, r.x.ID, r.note, err)
			}
			a.logger.Info("removed the node from an NFS export it may not keep", "node", p.Identity.Node,
				"volume", r.vc.Volume, "reason", r.note)
		default:
			a.logger.Info("left an NFS export as it was", "node", p.Identity.Node, "volume", r.vc.Volume, "reason", r.note)
		}
	}
	return nil
}

// verifyRestoreNFS reads the NFS footprint exports back into v: Restored
// only when every entry Undo gives back is listed and no export the node
// may not keep names it (or lets it mount otherwise).
func (a *PowerFlexAdapter) verifyRestoreNFS(k powerFlexCall, p arrayclients.Plan, e PowerFlexEntries, scope arrayclients.RestoreScope, v *arrayclients.Verification) error {
	plan, err := a.reconcileNFS(k, p, e, scope)
	if err != nil {
		return err
	}
	ips := pflexNodeIPs(p.Identity)
	for _, r := range plan {
		chk := arrayclients.VolumeCheck{Volume: r.vc.Volume, Object: r.vc.Object, Note: r.note}
		if r.found {
			view := pflexViewOf(r.x, ips)
			chk.Holders = view.others
			chk.NodeAccess = len(view.mine) > 0 || len(view.hazards) > 0
		}
		if r.give {
			for _, h := range r.px.Entries {
				if !pflexListed(r.x, h) {
					v.Missing = append(v.Missing, r.px.label()+": "+h.String())
					v.Restored = false
				}
			}
		}
		if r.forbidden && chk.NodeAccess {
			v.Restored = false
			v.Remaining = append(v.Remaining, fmt.Sprintf("NFS export %s (%s) of volume %s lets the node mount it but is %s",
				r.x.Name, r.x.ID, r.vc.Volume, r.note))
		}
		if chk.NodeAccess {
			v.Fenced = false
		}
		v.Volumes = append(v.Volumes, chk)
	}
	return nil
}

// pflexNFSEntryCount counts the host entries a plan removes.
func pflexNFSEntryCount(e PowerFlexEntries) int {
	n := 0
	for _, x := range e.NFSExports {
		n += len(x.Entries)
	}
	return n
}
