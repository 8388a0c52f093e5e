package powerstore

import (
	"context"
	"fmt"
	"net"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/dell/gopowerstore"

	"github.com/fenced-project/fenced/arrayclients"
)

// PowerStore NFS volumes. csi-powerstore publishes a file system by adding
// the node's IP to its NFS export's RWRootHosts; the array lists it as
// ip/255.255.255.255, and unpublish removes that form from whichever of
// the four access lists holds it (shared reference csi-drivers.md;
// dell/csi-powerstore pkg/controller/publisher.go NfsPublisher.Publish,
// pkg/controller/controller.go ControllerUnpublishVolume). A node with no
// block initiator has no host object on the array: its identity is then
// its IPs alone (PowerStoreKindNFSClient).
//
// A fence removes, from every NFS export of each footprint file system,
// exactly the entries that name one of the node's IPv4 addresses (in any
// form: a bare IP, ip/32, ip/255.255.255.255), recorded with their list
// before anything changes. An entry that may give the node access that
// removing its own entries cannot take away (a subnet holding its IP, a
// netgroup, a wildcard, or an export whose default_access lets unlisted
// hosts in) makes the volume not-fenceable.

// PowerStoreKindNFSClient is the Identity.Kind of a node that has no
// PowerStore host (no block initiator): it reaches the array only as an
// NFS client, by the IPs in Identity.Keys.
const PowerStoreKindNFSClient = "nfs-client"

// psNoAccess is the default_access under which an export lets in only the
// hosts its lists name (the array's default for a new export).
const psNoAccess = "No_Access"

// psNFSLists are the NFS export host lists that give access, in the API's
// field names.
var psNFSLists = []string{"read_only_hosts", "read_only_root_hosts", "read_write_hosts", "read_write_root_hosts"}

// psNFSExport is what a fence removes from one NFS export of a footprint
// file system.
type psNFSExport struct {
	ID           string `json:"id"`
	Name         string `json:"name"`
	FileSystemID string `json:"fileSystemID"`
	// Entries are the node's entries: the list and the exact string, as
	// the array listed them when the plan was read.
	Entries []psNFSEntry `json:"entries"`
	// Others are the export's other access entries when the plan was read
	// (evidence).
	Others []string `json:"others,omitempty"`
}

// psNFSEntry is one host entry of an NFS export's list.
type psNFSEntry struct {
	List  string `json:"list"`
	Value string `json:"value"`
}

func (en psNFSEntry) String() string { return en.Value + " in " + en.List }

// psIPv4Pattern finds IPv4 addresses in a CSI node ID the way
// csi-powerstore's common.GetIPListFromString does; NFS publish uses the
// first one it finds.
var psIPv4Pattern = regexp.MustCompile(`(?:(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])\.){3}(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])`)

// psNodeIPs are the IPv4 addresses an NFS export may name the node by:
// those in its csi-powerstore node ID (what the driver's publish adds) and
// its InternalIP/ExternalIP addresses. csi-powerstore only ever exports to
// IPv4 addresses (it finds them with an IPv4 pattern).
func psNodeIPs(node arrayclients.Node) []string {
	var cands []string
	if id := node.CSINodeIDs[arrayclients.DriverPowerStore]; id != "" {
		cands = append(cands, psIPv4Pattern.FindAllString(id, -1)...)
	}
	cands = append(cands, node.Addresses...)
	var out []string
	for _, s := range cands {
		ip := net.ParseIP(strings.TrimSpace(s))
		if ip == nil || ip.To4() == nil || ip.IsUnspecified() {
			continue
		}
		if v := ip.To4().String(); !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	sort.Strings(out)
	return out
}

// psKeyIPs returns the IPv4 addresses among an identity's keys (initiator
// port names never parse as dotted IPv4).
func psKeyIPs(keys []string) []net.IP {
	var out []net.IP
	for _, k := range keys {
		if !strings.Contains(k, ".") {
			continue
		}
		if ip := net.ParseIP(k); ip != nil && ip.To4() != nil {
			out = append(out, ip.To4())
		}
	}
	return out
}

// psNFSMatch is how one export entry relates to the node.
type psNFSMatch int

const (
	psOther  psNFSMatch = iota // another host
	psMine                     // exactly one of the node's IPs
	psHazard                   // may give the node access, but is not its own entry
)

// classifyNFSEntry tells whether an export host entry is one of the
// node's IPs (a bare IP or one with a full-length netmask), an entry that
// may cover the node without being its own (a subnet holding one of its
// IPs, a netgroup, a wildcard, an unreadable netmask), or another host.
func classifyNFSEntry(entry string, ips []net.IP) (psNFSMatch, string) {
	e := strings.TrimSpace(entry)
	if strings.HasPrefix(e, "@") {
		return psHazard, "netgroup " + e + " may contain the node"
	}
	if strings.ContainsAny(e, "*?[") {
		return psHazard, "wildcard " + e + " may match the node"
	}
	addr, mask, hasMask := strings.Cut(e, "/")
	ip := net.ParseIP(addr)
	if ip == nil {
		return psOther, "" // a host name: another host (csi-powerstore adds IPs only)
	}
	contains := func(f func(net.IP) bool) bool { return slices.ContainsFunc(ips, f) }
	if !hasMask {
		if contains(ip.Equal) {
			return psMine, ""
		}
		return psOther, ""
	}
	bits := 128
	if ip.To4() != nil {
		ip, bits = ip.To4(), 32
	}
	var m net.IPMask
	if d := net.ParseIP(mask); d != nil && strings.Contains(mask, ".") && bits == 32 {
		m = net.IPMask(d.To4())
	} else if n, err := strconv.Atoi(mask); err == nil && n >= 0 && n <= bits {
		m = net.CIDRMask(n, bits)
	}
	ones, size := m.Size()
	if m == nil || size == 0 {
		if contains(ip.Equal) {
			return psHazard, "entry " + e + " names the node's IP with an unreadable netmask"
		}
		return psOther, ""
	}
	if ones == size {
		if contains(ip.Equal) {
			return psMine, ""
		}
		return psOther, ""
	}
	network := ip.Mask(m)
	for _, k := range ips {
		if k4 := k.To4(); k4 != nil && bits == 32 && k4.Mask(m).Equal(network) {
			return psHazard, "subnet " + e + " contains the node's IP " + k4.String()
		}
	}
	return psOther, ""
}

// psExportLists returns an export's access lists by API field name.
func psExportLists(x gopowerstore.NFSExport) map[string][]string {
	return map[string][]string{"read_only_hosts": x.ROHosts, "read_only_root_hosts": x.RORootHosts,
		"read_write_hosts": x.RWHosts, "read_write_root_hosts": x.RWRootHosts}
}

// psExportView is what one export as read shows of the node.
type psExportView struct {
	mine    []psNFSEntry
	hazards []string
	others  []string
}

func viewNFSExport(x gopowerstore.NFSExport, ips []net.IP) psExportView {
	var v psExportView
	if x.DefaultAccess != "" && string(x.DefaultAccess) != psNoAccess {
		v.hazards = append(v.hazards, fmt.Sprintf("NFS export %s lets every host it does not list in (default_access %s)",
			x.Name, x.DefaultAccess))
	}
	lists := psExportLists(x)
	for _, l := range psNFSLists {
		for _, en := range lists[l] {
			switch kind, why := classifyNFSEntry(en, ips); kind {
			case psMine:
				v.mine = append(v.mine, psNFSEntry{List: l, Value: en})
			case psHazard:
				v.hazards = append(v.hazards, fmt.Sprintf("NFS export %s %s: %s", x.Name, l, why))
			default:
				if !slices.Contains(v.others, en) {
					v.others = append(v.others, en)
				}
			}
		}
	}
	return v
}

// psFSAccess is what the array shows of one footprint file system.
type psFSAccess struct {
	found   bool
	exports []gopowerstore.NFSExport
	// mine are the node's entries, per export ID.
	mine    map[string][]psNFSEntry
	hazards []string
	// holders are the other hosts the exports list.
	holders []string
}

// nodeAccess: an export lists the node, or may let it in.
func (f psFSAccess) nodeAccess() bool {
	if len(f.hazards) > 0 {
		return true
	}
	for _, m := range f.mine {
		if len(m) > 0 {
			return true
		}
	}
	return false
}

// fsAccess reads a file system (GET file_system/<id>) and every NFS export
// of it (GET nfs_export?file_system_id=eq.<id>: csi-powerstore creates
// one, an operator may add more).
func (a *PowerStoreAdapter) fsAccess(ctx context.Context, c gopowerstore.Client, fsID string, ips []net.IP) (psFSAccess, error) {
	acc := psFSAccess{mine: map[string][]psNFSEntry{}}
	rctx, cancel := a.reqCtx(ctx)
	fs, err := c.GetFS(rctx, fsID)
	cancel()
	if err != nil {
		if psStatus(err) == 404 {
			return acc, nil
		}
		return acc, fmt.Errorf("read file system %s: %w", fsID, err)
	}
	if fs.ID != fsID {
		return acc, fmt.Errorf("read file system %s: the array answered with file system %q", fsID, fs.ID)
	}
	acc.found = true
	rctx, cancel = context.WithTimeout(ctx, 4*a.timeout)
	xs, err := c.GetNFSExportByFilter(rctx, map[string]string{"file_system_id": "eq." + fsID})
	cancel()
	if err != nil {
		return acc, fmt.Errorf("read NFS exports of file system %s: %w", fsID, err)
	}
	for _, x := range xs {
		if x.FileSystemID != fsID || x.ID == "" {
			return acc, fmt.Errorf("read NFS exports of file system %s: the array returned export %q of %q", fsID, x.ID, x.FileSystemID)
		}
		v := viewNFSExport(x, ips)
		acc.mine[x.ID] = v.mine
		acc.hazards = append(acc.hazards, v.hazards...)
		for _, o := range v.others {
			if !slices.Contains(acc.holders, o) {
				acc.holders = append(acc.holders, o)
			}
		}
	}
	sort.Slice(xs, func(i, j int) bool { return xs[i].ID < xs[j].ID })
	acc.exports = xs
	sort.Strings(acc.holders)
	return acc, nil
}

// planNFSVolume reads one NFS footprint volume's file system and exports:
// entries naming the node are the cut (recorded in e); an entry that may
// let the node in without being its own is not-fenceable; exports listing
// only other hosts while Kubernetes says the volume is attached to the
// node is other-identity; listing nobody (or only others while the attach
// is pending) is not-mapped.
func (a *PowerStoreAdapter) planNFSVolume(ctx context.Context, c gopowerstore.Client, id arrayclients.Identity, e *psEntries, v arrayclients.VolumeRef) (arrayclients.VolumeCut, error) {
	vc := arrayclients.VolumeCut{VolumeRef: v}
	cut, gap := a.Cover(id, v)
	if gap != nil {
		vc.Gap = gap
		return vc, nil
	}
	ips := psKeyIPs(e.NFSIPs)
	if len(ips) == 0 {
		vc.Gap = &arrayclients.Gap{Reason: arrayclients.GapIdentityNotFound, Detail: fmt.Sprintf("%s: no IPv4 address of the node is known "+
			"(none in its %s node ID or its addresses), so its NFS export entries cannot be told", v.Volume, arrayclients.DriverPowerStore)}
		return vc, nil
	}
	acc, err := a.fsAccess(ctx, c, v.Object, ips)
	if err != nil {
		return vc, err
	}
	if !acc.found {
		vc.Gap = &arrayclients.Gap{Reason: arrayclients.GapVolumeNotFound, Detail: fmt.Sprintf("%s: PowerStore array %s has no file system %s",
			v.Volume, a.cfg.Name, v.Object)}
		return vc, nil
	}
	vc.Holders = acc.holders
	mine := 0
	for _, x := range acc.exports {
		mine += len(acc.mine[x.ID])
	}
	switch {
	case len(acc.hazards) > 0:
		vc.Holders = nil
		vc.Gap = &arrayclients.Gap{Reason: arrayclients.GapNotFenceable, Detail: fmt.Sprintf("%s: %s", v.Volume, strings.Join(acc.hazards, "; "))}
	case arrayclients.ExternalAccessGap(arrayclients.PowerStore, a.cfg.Name, a.cfg.ExternalAccess, v, acc.holders) != nil:
		vc.Gap = arrayclients.ExternalAccessGap(arrayclients.PowerStore, a.cfg.Name, a.cfg.ExternalAccess, v, acc.holders)
	case mine > 0:
		vc.Cut = cut
		for _, x := range acc.exports {
			if len(acc.mine[x.ID]) == 0 || slices.ContainsFunc(e.NFSExports, func(p psNFSExport) bool { return p.ID == x.ID }) {
				continue
			}
			v := viewNFSExport(x, ips)
			e.NFSExports = append(e.NFSExports, psNFSExport{ID: x.ID, Name: x.Name, FileSystemID: x.FileSystemID,
				Entries: v.mine, Others: v.others})
		}
		sort.Slice(e.NFSExports, func(i, j int) bool { return e.NFSExports[i].ID < e.NFSExports[j].ID })
	case len(acc.holders) > 0 && v.Attached:
		vc.Gap = arrayclients.OtherIdentityGap(arrayclients.PowerStore, v, "NFS client "+strings.Join(e.NFSIPs, ", "), acc.holders)
	default:
		vc.Cut = arrayclients.CutNotMapped
	}
	return vc, nil
}

// nfsSummary describes what a plan removes from NFS exports.
func (e psEntries) nfsSummary() string {
	n := 0
	for _, x := range e.NFSExports {
		n += len(x.Entries)
	}
	return fmt.Sprintf("remove %d entries of %s from %d NFS exports", n, strings.Join(e.NFSIPs, ", "), len(e.NFSExports))
}

// checkNFSEntries checks that a decoded plan's NFS entries are the node's.
func (e psEntries) checkNFSEntries() error {
	ips := psKeyIPs(e.NFSIPs)
	for _, x := range e.NFSExports {
		if x.ID == "" {
			return fmt.Errorf("%w: an NFS export without an id", arrayclients.ErrPlanMismatch)
		}
		for _, en := range x.Entries {
			if kind, _ := classifyNFSEntry(en.Value, ips); kind != psMine || !slices.Contains(psNFSLists, en.List) {
				return fmt.Errorf("%w: entry %q in %s of NFS export %s is not the node's", arrayclients.ErrPlanMismatch, en.Value, en.List, x.Name)
			}
		}
	}
	return nil
}

// patchExport changes an export's host lists: add and remove map a list
// to entries. It sends only those lists through gopowerstore's REST layer
// (PATCH nfs_export/<id>): the client's ModifyNFSExport also always sends
// is_no_SUID, which would reset the export's no-SUID setting.
func (a *PowerStoreAdapter) patchExport(ctx context.Context, c gopowerstore.Client, id string, add, remove map[string][]string) error {
	body := map[string][]string{}
	for l, v := range add {
		if len(v) > 0 {
			body["add_"+l] = v
		}
	}
	for l, v := range remove {
		if len(v) > 0 {
			body["remove_"+l] = v
		}
	}
	if len(body) == 0 {
		return nil
	}
	rctx, cancel := a.reqCtx(ctx)
	defer cancel()
	// A response value is required: with a nil one the library's Query
	// returns no error whatever the status.
	var resp gopowerstore.CreateResponse
	_, err := c.APIClient().Query(rctx, gopowerstore.RequestConfig{Method: "PATCH", Endpoint: "nfs_export", ID: id, Body: body}, &resp)
	return gopowerstore.WrapErr(err)
}

// getExport reads one export; a 404 is found=false.
func (a *PowerStoreAdapter) getExport(ctx context.Context, c gopowerstore.Client, id string) (gopowerstore.NFSExport, bool, error) {
	rctx, cancel := a.reqCtx(ctx)
	defer cancel()
	x, err := c.GetNFSExport(rctx, id)
	if err != nil {
		if psStatus(err) == 404 {
			return x, false, nil
		}
		return x, false, fmt.Errorf("read NFS export %s: %w", id, err)
	}
	if x.ID != id {
		return x, false, fmt.Errorf("read NFS export %s: the array answered with export %q", id, x.ID)
	}
	return x, true, nil
}

// presentEntries returns which of entries an export lists now, by list.
func presentEntries(x gopowerstore.NFSExport, entries []psNFSEntry) map[string][]string {
	lists := psExportLists(x)
	out := map[string][]string{}
	for _, en := range entries {
		if slices.Contains(lists[en.List], en.Value) {
			out[en.List] = append(out[en.List], en.Value)
		}
	}
	return out
}

// applyNFS removes the plan's entries each export still lists: one PATCH
// per export that has some; a gone export, or one without them, gets no
// write. A refused PATCH (the array's 400 when an entry went meanwhile) is
// read again: it is an error only while a planned entry is still listed.
func (a *PowerStoreAdapter) applyNFS(ctx context.Context, c gopowerstore.Client, e psEntries) error {
	for _, pe := range e.NFSExports {
		x, ok, err := a.getExport(ctx, c, pe.ID)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		remove := presentEntries(x, pe.Entries)
		if len(remove) == 0 {
			continue
		}
		err = a.patchExport(ctx, c, pe.ID, nil, remove)
		if err == nil {
			continue
		}
		if psStatus(err) == 400 {
			if x, ok, rerr := a.getExport(ctx, c, pe.ID); rerr == nil && (!ok || len(presentEntries(x, pe.Entries)) == 0) {
				continue
			}
		}
		return fmt.Errorf("remove %s from NFS export %s: %w", strings.Join(entryStrings(pe.Entries), ", "), pe.Name, err)
	}
	return nil
}

func entryStrings(entries []psNFSEntry) []string {
	out := make([]string, 0, len(entries))
	for _, en := range entries {
		out = append(out, en.String())
	}
	return out
}

// nfsCuts are the plan's NFS footprint volumes with a cut; blockCuts the
// others (psBlockCuts).
func nfsCuts(p arrayclients.Plan) []arrayclients.VolumeCut {
	var out []arrayclients.VolumeCut
	for _, vc := range arrayclients.FootprintCuts(p) {
		if vc.Protocol == arrayclients.ProtocolNFS {
			out = append(out, vc)
		}
	}
	return out
}

// psBlockCuts are the plan's block footprint volumes with a cut: those the
// host path reads back.
func psBlockCuts(p arrayclients.Plan) []arrayclients.VolumeCut {
	var out []arrayclients.VolumeCut
	for _, vc := range arrayclients.FootprintCuts(p) {
		if vc.Protocol != arrayclients.ProtocolNFS {
			out = append(out, vc)
		}
	}
	return out
}

// nfsCheck is what a read of a footprint file system shows.
func nfsCheck(vc arrayclients.VolumeCut, acc psFSAccess) arrayclients.VolumeCheck {
	chk := arrayclients.VolumeCheck{Volume: vc.Volume, Object: vc.Object, Holders: acc.holders, NodeAccess: acc.nodeAccess()}
	if !acc.found {
		chk.Note = "the file system is no longer on the array"
	}
	return chk
}

// verifyNFS reads each NFS footprint volume back: the node is fenced when
// no export of any of them names one of its IPs in any form or may let it
// in otherwise. A planned entry still listed is Remaining; one gone is
// Missing (for Restored).
func (a *PowerStoreAdapter) verifyNFS(ctx context.Context, c gopowerstore.Client, plan arrayclients.Plan, e psEntries, v *arrayclients.Verification) (bool, error) {
	ips := psKeyIPs(e.NFSIPs)
	access := false
	for _, vc := range nfsCuts(plan) {
		acc, err := a.fsAccess(ctx, c, vc.Object, ips)
		if err != nil {
			return false, fmt.Errorf("footprint volume %s: %w", vc.Volume, err)
		}
		chk := nfsCheck(vc, acc)
		if chk.NodeAccess {
			access = true
			for _, x := range acc.exports {
				for _, en := range acc.mine[x.ID] {
					v.Remaining = append(v.Remaining, fmt.Sprintf("NFS export %s (volume %s) lists %s", x.Name, vc.Volume, en))
				}
			}
			for _, h := range acc.hazards {
				v.Remaining = append(v.Remaining, fmt.Sprintf("volume %s: %s", vc.Volume, h))
			}
		}
		v.Volumes = append(v.Volumes, chk)
		a.missingNFS(e, vc, acc, v)
	}
	return access, nil
}

// missingNFS lists the plan's entries of a footprint file system's
// exports that are not listed now (exports gone are not missing: nothing
// can be given back to them).
func (a *PowerStoreAdapter) missingNFS(e psEntries, vc arrayclients.VolumeCut, acc psFSAccess, v *arrayclients.Verification) {
	for _, pe := range e.NFSExports {
		if pe.FileSystemID != vc.Object {
			continue
		}
		i := slices.IndexFunc(acc.exports, func(x gopowerstore.NFSExport) bool { return x.ID == pe.ID })
		if i < 0 {
			continue
		}
		lists := psExportLists(acc.exports[i])
		for _, en := range pe.Entries {
			if !slices.Contains(lists[en.List], en.Value) {
				v.Missing = append(v.Missing, fmt.Sprintf("NFS export %s: %s", pe.Name, en))
			}
		}
	}
}

// undoNFS reconciles each NFS footprint volume (docs/footprint.md,
// "Unfence"), as the block path does with attachments: the plan's entries
// go back into exactly the lists they were in only when Kubernetes still
// wants the volume on the node and no other host is listed now (unless
// the volume is multi-node); otherwise the node's entries are taken out
// of the exports, as csi-powerstore's unpublish would, so the volume stays
// with its new node. One PATCH per export that needs one.
func (a *PowerStoreAdapter) undoNFS(ctx context.Context, c gopowerstore.Client, plan arrayclients.Plan, e psEntries, scope arrayclients.RestoreScope) error {
	ips := psKeyIPs(e.NFSIPs)
	for _, vc := range nfsCuts(plan) {
		acc, err := a.fsAccess(ctx, c, vc.Object, ips)
		if err != nil {
			return fmt.Errorf("footprint volume %s: %w", vc.Volume, err)
		}
		if !acc.found {
			continue
		}
		keep := arrayclients.KeepOnRestore(vc.VolumeRef, scope, acc.holders)
		for _, x := range acc.exports {
			add, remove := map[string][]string{}, map[string][]string{}
			if !keep {
				for _, en := range acc.mine[x.ID] {
					remove[en.List] = append(remove[en.List], en.Value)
				}
			} else if i := slices.IndexFunc(e.NFSExports, func(p psNFSExport) bool { return p.ID == x.ID }); i >= 0 {
				lists := psExportLists(x)
				for _, en := range e.NFSExports[i].Entries {
					if !slices.ContainsFunc(psNFSLists, func(l string) bool { return slices.Contains(lists[l], en.Value) }) {
						add[en.List] = append(add[en.List], en.Value)
					}
				}
			}
			if len(add) == 0 && len(remove) == 0 {
				continue
			}
			if err := a.patchExport(ctx, c, x.ID, add, remove); err != nil {
				what := "give the node's entries back to"
				if !keep {
					what = fmt.Sprintf("take the node's entries out of (%s)", arrayclients.LeftAsItWasNote(vc.VolumeRef, scope, acc.holders))
				}
				return fmt.Errorf("%s NFS export %s (volume %s): %w", what, x.Name, vc.Volume, err)
			}
			if !keep {
				a.logger.Info("took the node out of an NFS export it may not keep", "array", a.cfg.Name, "node", plan.Identity.Node,
					"volume", vc.Volume, "export", x.Name, "reason", arrayclients.LeftAsItWasNote(vc.VolumeRef, scope, acc.holders))
			}
		}
	}
	return nil
}

// verifyRestoreNFS reads each NFS footprint volume back after Undo: what
// Undo gives back must be listed again (Missing otherwise), and a volume
// the node may not keep must not let it in (a violation). It reports
// whether the node has access to some volume and whether a violation was
// found.
func (a *PowerStoreAdapter) verifyRestoreNFS(ctx context.Context, c gopowerstore.Client, plan arrayclients.Plan, e psEntries, scope arrayclients.RestoreScope,
	v *arrayclients.Verification) (access, violation bool, err error) {
	ips := psKeyIPs(e.NFSIPs)
	for _, vc := range nfsCuts(plan) {
		acc, err := a.fsAccess(ctx, c, vc.Object, ips)
		if err != nil {
			return false, false, fmt.Errorf("footprint volume %s: %w", vc.Volume, err)
		}
		chk := nfsCheck(vc, acc)
		access = access || chk.NodeAccess
		switch {
		case !acc.found:
		case arrayclients.KeepOnRestore(vc.VolumeRef, scope, acc.holders):
			a.missingNFS(e, vc, acc, v)
		default:
			chk.Note = arrayclients.LeftAsItWasNote(vc.VolumeRef, scope, acc.holders)
			if chk.NodeAccess {
				violation = true
				v.Remaining = append(v.Remaining, fmt.Sprintf("footprint volume %s (file system %s) lets NFS client %s in but is %s",
					vc.Volume, vc.Object, strings.Join(e.NFSIPs, ", "), chk.Note))
			}
		}
		v.Volumes = append(v.Volumes, chk)
	}
	return access, violation, nil
}
