package unity

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"

	unitytypes "github.com/dell/gounity/apitypes"

	"github.com/fenced-project/fenced/arrayclients"
)

// Unity fences per LUN: the cut of a footprint LUN is taking the node's
// host out of the LUN's host access (CutLUNHostAccess), which is also what
// csi-unity's ControllerUnpublishVolume does (dell/csi-unity
// service/controller.go, with gounity's ModifyVolumeExport). The host's LUNs come from its hostLUN
// objects, one call; each LUN is then read by ID.

// unityHostLUNTypeLUN is HostLUNTypeEnum LUN; 2 (LUN_Snap) is a snapshot
// attached to the host, which csi-unity never does and fenced does not cut.
const unityHostLUNTypeLUN = 1

// unityHostLUN is a hostLUN object of the Unity REST API: one LUN (or
// snapshot) a host has access to, at an HLU.
type unityHostLUN struct {
	ID   string `json:"id"`
	Type int    `json:"type"`
	HLU  int    `json:"hlu"`
	Host struct {
		ID string `json:"id"`
	} `json:"host"`
	LUN struct {
		ID string `json:"id"`
	} `json:"lun"`
}

// unityQuery encodes Unity query parameters; spaces as %20, as the
// array's filter examples send them.
func unityQuery(v url.Values) string { return strings.ReplaceAll(v.Encode(), "+", "%20") }

// hostLUNs lists the LUNs the host has production access to, from its
// hostLUN objects (GET /api/types/hostLUN/instances?filter=host.id eq
// "<id>"), paging from 1. Snapshot entries are skipped.
func (a *UnityAdapter) hostLUNs(ctx context.Context, hostID string) ([]unityHostLUN, error) {
	var out []unityHostLUN
	seen := map[string]bool{}
	for page := 1; page <= unityMaxPages; page++ {
		var body struct {
			Entries []struct {
				Content unityHostLUN `json:"content"`
			} `json:"entries"`
		}
		uri := "/api/types/hostLUN/instances?" + unityQuery(url.Values{
			"fields": {"id,host,type,hlu,lun"}, "filter": {`host.id eq "` + hostID + `"`},
			"per_page": {fmt.Sprint(unityPageSize)}, "page": {fmt.Sprint(page)},
		})
		if err := a.pool.get(ctx, uri, &body); err != nil {
			return nil, fmt.Errorf("list the hostLUNs of host %s, page %d: %w", hostID, page, err)
		}
		for _, e := range body.Entries {
			hl := e.Content
			switch {
			case hl.Host.ID != hostID:
				return nil, fmt.Errorf("list the hostLUNs of host %s: the array answered hostLUN %q of host %q", hostID, hl.ID, hl.Host.ID)
			case seen[hl.ID]:
				return nil, fmt.Errorf("list the hostLUNs of host %s, page %d: hostLUN %q listed twice", hostID, page, hl.ID)
			case hl.Type != unityHostLUNTypeLUN:
				continue
			case !unityIDRE.MatchString(hl.LUN.ID) || hl.HLU < 0:
				return nil, fmt.Errorf("list the hostLUNs of host %s: hostLUN %q names LUN %q at hlu %d", hostID, hl.ID, hl.LUN.ID, hl.HLU)
			}
			seen[hl.ID] = true
			out = append(out, hl)
		}
		if len(body.Entries) < unityPageSize {
			return out, nil
		}
	}
	return nil, fmt.Errorf("list the hostLUNs of host %s: more than %d pages", hostID, unityMaxPages)
}

// readLUNs reads each LUN by ID once; a LUN that does not exist maps to nil.
func (a *UnityAdapter) readLUNs(ctx context.Context, ids []string) (map[string]*unitytypes.Volume, error) {
	out := make(map[string]*unitytypes.Volume, len(ids))
	for _, id := range ids {
		if _, done := out[id]; done {
			continue
		}
		v, found, err := a.readLUN(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("read LUN %s: %w", id, err)
		}
		if !found {
			v = nil
		}
		out[id] = v
	}
	return out, nil
}

// unityFootprint returns the plan's block footprint volumes that have a
// cut, by LUN ID (NFS ones: unityNFSFootprint).
func unityFootprint(p arrayclients.Plan) map[string]arrayclients.VolumeCut {
	out := map[string]arrayclients.VolumeCut{}
	for _, vc := range p.Volumes {
		if vc.Cut != "" && vc.Gap == nil && vc.Protocol != arrayclients.ProtocolNFS {
			out[vc.Object] = vc
		}
	}
	return out
}

// Plan lists what fencing the host removes: every LUN its hostLUN objects
// name, each read by ID for its HLU and other hosts, plus, for each
// footprint volume, the cut or the gap found by reading that LUN (or, for
// NFS, that file system and its shares: nfs.go).
func (a *UnityAdapter) Plan(ctx context.Context, id arrayclients.Identity, vols []arrayclients.VolumeRef) (arrayclients.Plan, error) {
	if err := a.checkIdentity(id); err != nil {
		return arrayclients.Plan{}, a.errf("plan", id.Node, err)
	}
	hls, err := a.hostLUNs(ctx, id.ObjectID)
	if err != nil {
		return arrayclients.Plan{}, a.errf("plan", id.Node, err)
	}
	var ids []string
	for _, hl := range hls {
		ids = append(ids, hl.LUN.ID)
	}
	for _, v := range vols {
		if _, gap := a.Cover(id, v); gap == nil && v.Protocol != arrayclients.ProtocolNFS && unityIDRE.MatchString(v.Object) {
			ids = append(ids, v.Object)
		}
	}
	luns, err := a.readLUNs(ctx, ids)
	if err != nil {
		return arrayclients.Plan{}, a.errf("plan", id.Node, err)
	}
	e := UnityEntries{HostID: id.ObjectID, HostName: id.ObjectName, LUNs: []UnityLUNAccess{}}
	planned := map[string]bool{}
	add := func(lun string) {
		v := luns[lun]
		if v == nil || planned[lun] {
			return // gone since the hostLUN list, or planned already
		}
		if hlu, has, others := unityAccessOf(*v, id.ObjectID); has {
			planned[lun] = true
			e.LUNs = append(e.LUNs, UnityLUNAccess{LUN: lun, Name: v.VolumeContent.Name, HLU: hlu, AccessMask: "1", OtherHosts: others})
		}
	}
	for _, hl := range hls {
		add(hl.LUN.ID)
	}
	var cuts []arrayclients.VolumeCut
	nfs := a.nfsReader()
	for _, v := range vols {
		if v.Protocol == arrayclients.ProtocolNFS {
			vc, shares, err := a.planNFSVolume(ctx, nfs, id, v)
			if err != nil {
				return arrayclients.Plan{}, a.errf("plan", id.Node, err)
			}
			for _, s := range shares {
				if !slices.ContainsFunc(e.Shares, func(o UnityShareAccess) bool { return o.Share == s.Share }) {
					e.Shares = append(e.Shares, s)
				}
			}
			cuts = append(cuts, vc)
			continue
		}
		vc := a.planVolume(id, v, luns)
		if vc.Cut == arrayclients.CutLUNHostAccess {
			add(v.Object) // what Apply removes, even if the hostLUN list missed it
		}
		cuts = append(cuts, vc)
	}
	slices.SortStableFunc(e.LUNs, func(x, y UnityLUNAccess) int { return cmp.Compare(x.HLU, y.HLU) })
	raw, err := json.Marshal(e)
	if err != nil {
		return arrayclients.Plan{}, a.errf("plan", id.Node, err)
	}
	names := make([]string, 0, len(e.LUNs))
	for _, l := range e.LUNs {
		names = append(names, fmt.Sprintf("%s(hlu %d)", l.LUN, l.HLU))
	}
	summary := fmt.Sprintf("remove host %s (%s) from %d LUN(s): %s", id.ObjectID, id.ObjectName, len(e.LUNs), strings.Join(names, ", "))
	if len(e.Shares) > 0 {
		var shares []string
		for _, s := range e.Shares {
			shares = append(shares, fmt.Sprintf("%s(%s %s)", s.Share, s.Filesystem, strings.Join(s.Lists, "+")))
		}
		summary += fmt.Sprintf("; and from %d NFS share(s): %s", len(e.Shares), strings.Join(shares, ", "))
	}
	return arrayclients.Plan{
		Array: a.cfg.Name, Family: arrayclients.Unity, Identity: id, Entries: raw, Volumes: cuts,
		Summary:   summary,
		CreatedAt: a.now().UTC(),
	}, nil
}

// planVolume decides the cut of one footprint volume from its LUN as read.
func (a *UnityAdapter) planVolume(id arrayclients.Identity, v arrayclients.VolumeRef, luns map[string]*unitytypes.Volume) arrayclients.VolumeCut {
	vc := arrayclients.VolumeCut{VolumeRef: v}
	if _, gap := a.Cover(id, v); gap != nil {
		vc.Gap = gap
		return vc
	}
	lun := luns[v.Object]
	if lun == nil {
		vc.Gap = &arrayclients.Gap{Reason: arrayclients.GapVolumeNotFound, Detail: fmt.Sprintf("%s: Unity %s has no LUN %q", v.Volume, a.cfg.Name, v.Object)}
		return vc
	}
	_, has, others := unityAccessOf(*lun, id.ObjectID)
	vc.Holders = others
	switch {
	case has:
		vc.Cut = arrayclients.CutLUNHostAccess
	case len(others) == 0 || !v.Attached:
		vc.Cut = arrayclients.CutNotMapped
	default:
		vc.Gap = &arrayclients.Gap{Reason: arrayclients.GapOtherIdentity, Detail: fmt.Sprintf("%s: LUN %s grants host(s) %s access but not the node's host %s (%s), "+
			"yet Kubernetes says it is attached to the node", v.Volume, v.Object, strings.Join(others, ", "), id.ObjectID, id.ObjectName)}
	}
	return vc
}

// Verify reads the host's hostLUN objects (fenced when none is left) and
// each footprint LUN of the plan by ID (fenced only when none grants the
// host access). Its Restored only compares the plan with the hostLUNs;
// VerifyRestore is the restore read-back.
func (a *UnityAdapter) Verify(ctx context.Context, p arrayclients.Plan) (arrayclients.Verification, error) {
	e, err := a.entries(p)
	if err != nil {
		return arrayclients.Verification{}, a.errf("verify", p.Identity.Node, err)
	}
	hls, err := a.hostLUNs(ctx, e.HostID)
	if err != nil {
		return arrayclients.Verification{}, a.errf("verify", p.Identity.Node, err)
	}
	v := arrayclients.Verification{CheckedAt: a.now().UTC()}
	names := map[string]string{}
	for _, l := range e.LUNs {
		names[l.LUN] = " (" + l.Name + ")"
	}
	granted := map[string]bool{}
	for _, hl := range hls {
		granted[hl.LUN.ID] = true
		v.Remaining = append(v.Remaining, fmt.Sprintf("LUN %s%s grants host %s access at hlu %d", hl.LUN.ID, names[hl.LUN.ID], e.HostID, hl.HLU))
	}
	for _, l := range e.LUNs {
		if !granted[l.LUN] {
			v.Missing = append(v.Missing, fmt.Sprintf("LUN %s host %s hlu %d", l.LUN, e.HostID, l.HLU))
		}
	}
	fp := unityFootprint(p)
	luns, err := a.readLUNs(ctx, slices.Sorted(maps.Keys(fp)))
	if err != nil {
		return arrayclients.Verification{}, a.errf("verify", p.Identity.Node, err)
	}
	access := false
	for _, vc := range p.Volumes {
		if _, ok := fp[vc.Object]; !ok || fp[vc.Object].Volume != vc.Volume {
			continue
		}
		c := unityCheck(vc, luns[vc.Object], e.HostID)
		access = access || c.NodeAccess
		v.Volumes = append(v.Volumes, c)
	}
	nfsAccess, err := a.verifyNFS(ctx, p, e, &v)
	if err != nil {
		return arrayclients.Verification{}, a.errf("verify", p.Identity.Node, err)
	}
	access = access || nfsAccess
	v.Fenced = len(v.Remaining) == 0 && !access
	v.Restored = len(v.Missing) == 0
	return v, nil
}

// unityCheck is what the LUN as read shows of a footprint volume.
func unityCheck(vc arrayclients.VolumeCut, lun *unitytypes.Volume, hostID string) arrayclients.VolumeCheck {
	c := arrayclients.VolumeCheck{Volume: vc.Volume, Object: vc.Object}
	if lun == nil {
		c.Note = "the LUN no longer exists"
		return c
	}
	_, c.NodeAccess, c.Holders = unityAccessOf(*lun, hostID)
	return c
}

// unityRestore is what an unfence does with one LUN of a plan or of the
// footprint, decided from the LUN as read now.
type unityRestore struct {
	// give: Undo gives the host its access back (it had it in the plan, the
	// scope wants it and nobody else took it).
	give bool
	// forbidden: the node must not have access to it after the unfence (a
	// footprint volume not wanted on the node or moved to another host).
	forbidden bool
	// note says why the LUN is left as it is.
	note string
}

// decideUnityRestore applies docs/footprint.md "Unfence" to one LUN: entry
// is the plan's host-access entry (nil when the plan removed nothing), vc
// the footprint volume (nil for a LUN that is no Kubernetes volume), lun the
// LUN as read (nil when it no longer exists).
func decideUnityRestore(entry *UnityLUNAccess, vc *arrayclients.VolumeCut, lun *unitytypes.Volume, hostID string, scope arrayclients.RestoreScope) unityRestore {
	if lun == nil {
		return unityRestore{note: "the LUN no longer exists"}
	}
	_, _, others := unityAccessOf(*lun, hostID)
	if vc == nil {
		// Not a Kubernetes volume: given back as it was, unless a host
		// that did not have it at the plan has it now.
		for _, h := range others {
			if !slices.Contains(entry.OtherHosts, h) {
				return unityRestore{note: "moved to host " + h}
			}
		}
		return unityRestore{give: true}
	}
	switch {
	case !scope.Wants(vc.Volume):
		return unityRestore{forbidden: true, note: "not wanted by Kubernetes on the node"}
	case len(others) > 0 && !vc.MultiNode:
		return unityRestore{forbidden: true, note: "moved to host " + strings.Join(others, ", ")}
	case entry == nil:
		return unityRestore{note: "the fence removed nothing: the array gave it to nobody"}
	}
	return unityRestore{give: true}
}

// Undo reconciles rather than replays: it gives the host back its access
// to the plan's LUNs in HLU order, a footprint volume only when Kubernetes
// still wants it on the node and no other host holds it (unless it is
// multi-node), any other LUN unless a new host holds it. Unity picks the
// HLU (gounity cannot send one): the lowest the host does not use, which
// restores dense HLUs exactly.
func (a *UnityAdapter) Undo(ctx context.Context, p arrayclients.Plan, scope arrayclients.RestoreScope) error {
	e, err := a.entries(p)
	if err != nil {
		return a.errf("undo", p.Identity.Node, err)
	}
	fp := unityFootprint(p)
	luns := slices.Clone(e.LUNs)
	slices.SortStableFunc(luns, func(x, y UnityLUNAccess) int { return cmp.Compare(x.HLU, y.HLU) })
	for i := range luns {
		l := &luns[i]
		v, found, err := a.readLUN(ctx, l.LUN)
		if err != nil {
			return a.errf("undo", p.Identity.Node, fmt.Errorf("read LUN %s: %w", l.LUN, err))
		}
		if !found {
			v = nil
		}
		var vc *arrayclients.VolumeCut
		if c, ok := fp[l.LUN]; ok {
			vc = &c
		}
		d := decideUnityRestore(l, vc, v, e.HostID, scope)
		if !d.give {
			a.log.InfoContext(ctx, "host access left as it is", "node", p.Identity.Node, "host", e.HostID, "lun", l.LUN, "why", d.note)
			continue
		}
		_, has, others := unityAccessOf(*v, e.HostID)
		if has {
			continue
		}
		if err := a.writeAccess(ctx, l.LUN, append(others, e.HostID)); err != nil {
			return a.errf("undo", p.Identity.Node, fmt.Errorf("add host %s to LUN %s: %w", e.HostID, l.LUN, err))
		}
		a.log.InfoContext(ctx, "host access restored", "node", p.Identity.Node, "host", e.HostID, "lun", l.LUN)
	}
	if err := a.undoNFS(ctx, p, e, scope); err != nil {
		return a.errf("undo", p.Identity.Node, err)
	}
	return nil
}

// VerifyRestore reads every LUN of the plan and of its footprint by ID:
// Restored when each LUN Undo gives back grants the host access again and
// no footprint volume outside the scope (or moved, unless multi-node) does.
// Fenced is not evaluated.
func (a *UnityAdapter) VerifyRestore(ctx context.Context, p arrayclients.Plan, scope arrayclients.RestoreScope) (arrayclients.Verification, error) {
	e, err := a.entries(p)
	if err != nil {
		return arrayclients.Verification{}, a.errf("verify-restore", p.Identity.Node, err)
	}
	fp := unityFootprint(p)
	var ids []string
	for _, l := range e.LUNs {
		ids = append(ids, l.LUN)
	}
	for _, vc := range p.Volumes {
		if _, ok := fp[vc.Object]; ok {
			ids = append(ids, vc.Object)
		}
	}
	luns, err := a.readLUNs(ctx, ids)
	if err != nil {
		return arrayclients.Verification{}, a.errf("verify-restore", p.Identity.Node, err)
	}
	v := arrayclients.Verification{CheckedAt: a.now().UTC()}
	entry := map[string]*UnityLUNAccess{}
	for i := range e.LUNs {
		l := &e.LUNs[i]
		entry[l.LUN] = l
		var vc *arrayclients.VolumeCut
		if c, ok := fp[l.LUN]; ok {
			vc = &c
		}
		d := decideUnityRestore(l, vc, luns[l.LUN], e.HostID, scope)
		if !d.give {
			continue
		}
		if _, has, _ := unityAccessOf(*luns[l.LUN], e.HostID); !has {
			v.Missing = append(v.Missing, fmt.Sprintf("LUN %s host %s hlu %d", l.LUN, e.HostID, l.HLU))
		}
	}
	for _, vc := range p.Volumes {
		if c, ok := fp[vc.Object]; !ok || c.Volume != vc.Volume {
			continue
		}
		d := decideUnityRestore(entry[vc.Object], &vc, luns[vc.Object], e.HostID, scope)
		c := unityCheck(vc, luns[vc.Object], e.HostID)
		if c.Note == "" && !d.give {
			c.Note = d.note
		}
		if d.forbidden && c.NodeAccess {
			v.Remaining = append(v.Remaining, fmt.Sprintf("LUN %s (volume %s) grants host %s access: %s", vc.Object, vc.Volume, e.HostID, d.note))
		}
		v.Volumes = append(v.Volumes, c)
	}
	if err := a.verifyRestoreNFS(ctx, p, e, scope, &v); err != nil {
		return arrayclients.Verification{}, a.errf("verify-restore", p.Identity.Node, err)
	}
	v.Restored = len(v.Missing) == 0 && len(v.Remaining) == 0
	return v, nil
}
