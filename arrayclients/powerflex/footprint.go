package powerflex

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	siotypes "github.com/dell/goscaleio/types/v1"

	"github.com/fenced-project/fenced/arrayclients"
)

// PowerFlex footprint: each footprint volume is read by its ID (GET
// /api/instances/Volume::<id>) and its mappedSdcInfo tells which SDCs it
// is mapped to, as csi-vxflexos reads it before publishing
// (dell/csi-powerflex service/publisher.go).

// pflexVolumeAccess is what the MDM shows of one volume for one SDC.
type pflexVolumeAccess struct {
	found bool
	// mapping is the volume's mapping to the SDC, if any.
	mapping *siotypes.MappedSdcInfo
	// others are the IDs of the other SDCs it is mapped to; holders the
	// same for messages ("sdc <name> (<id>)").
	others  []string
	holders []string
}

func (k powerFlexCall) volumeAccess(volID, sdcID string) (pflexVolumeAccess, error) {
	vol, found, err := k.volumeByID(volID)
	if err != nil || !found {
		return pflexVolumeAccess{}, err
	}
	return accessOf(vol, sdcID), nil
}

// accessOf is what the volume shows for the SDC.
func accessOf(vol *siotypes.Volume, sdcID string) pflexVolumeAccess {
	acc := pflexVolumeAccess{found: true}
	for _, m := range vol.MappedSdcInfo {
		switch {
		case m == nil:
		case m.SdcID == sdcID:
			acc.mapping = m
		default:
			acc.others = append(acc.others, m.SdcID)
			kind := "sdc "
			if m.HostType == pflexHostTypeNVMe {
				kind = "nvme-host "
			}
			h := kind + m.SdcID
			if m.SdcName != "" {
				h = kind + m.SdcName + " (" + m.SdcID + ")"
			}
			acc.holders = append(acc.holders, h)
		}
	}
	slices.Sort(acc.others)
	slices.Sort(acc.holders)
	return acc
}

// pflexListing is the volumes a read of a host's mappings returned: an
// SDC's mapped volumes (GET /api/instances/Sdc::<id>/relationships/Volume,
// each the whole volume object a read by ID returns, with every SDC it is
// mapped to), or every volume of the system (complete: an NVMe host's
// read), in which a volume not listed is not on the array.
type pflexListing struct {
	vols     []*siotypes.Volume
	byID     map[string]*siotypes.Volume
	complete bool
}

func newListing(vols []*siotypes.Volume, complete bool) pflexListing {
	l := pflexListing{vols: vols, byID: make(map[string]*siotypes.Volume, len(vols)), complete: complete}
	for _, v := range vols {
		if v != nil {
			l.byID[v.ID] = v
		}
	}
	return l
}

// mappings lists the volumes mapped to sdcID, sorted by volume ID.
func (l pflexListing) mappings(sdcID string) []PowerFlexMapping { return mappingsOf(l.vols, sdcID) }

// access answers the volume's access for the SDC from the listing, when
// the listing can: the volume is listed, or the listing is complete.
func (l pflexListing) access(volID, sdcID string) (pflexVolumeAccess, bool) {
	if v, ok := l.byID[volID]; ok {
		return accessOf(v, sdcID), true
	}
	return pflexVolumeAccess{}, l.complete
}

// pflexAccessRead is one volume's read for an SDC, or why it failed.
type pflexAccessRead struct {
	acc pflexVolumeAccess
	err error
}

// volumeAccesses reads each volume's access for the SDC: from the listing
// the host's mappings were just read in when it answers (a volume mapped
// to the SDC is listed there whole), the others by ID, side by side on
// the pool's idle clients and the call's spare calls (each), as
// Apply unmaps them: a plan or read-back of a node with a dozen footprint
// volumes costs about one round trip instead of a dozen, and a plan of a
// node whose footprint volumes are all mapped to it costs none. Every
// volume is read; each read's error is kept with it, for the caller to
// report where it reported a read's error before.
func (a *PowerFlexAdapter) volumeAccesses(k powerFlexCall, vols []string, sdcID string, listed pflexListing) map[string]pflexAccessRead {
	ids := slices.Compact(slices.Sorted(slices.Values(vols)))
	out := make(map[string]pflexAccessRead, len(ids))
	var toRead []string
	for _, vol := range ids {
		if acc, ok := listed.access(vol, sdcID); ok {
			out[vol] = pflexAccessRead{acc: acc}
			continue
		}
		toRead = append(toRead, vol)
	}
	var mu sync.Mutex
	_ = each(a.pool, k, toRead, func(k powerFlexCall, vol string) error {
		acc, err := k.volumeAccess(vol, sdcID)
		mu.Lock()
		out[vol] = pflexAccessRead{acc: acc, err: err}
		mu.Unlock()
		return nil
	})
	return out
}

// Plan records every volume mapped to the identity's SDC with its access
// mode, limits and other holders, and for each footprint volume reads the
// volume: mapped to the SDC is sdc-unmap (always among the plan's
// mappings); mapped to nobody is not-mapped; mapped only to other SDCs is
// a gap while Kubernetes says it is attached to the node (other-identity)
// and not-mapped while the attach is pending. An NFS footprint volume's
// export is read for the node's host entries (planNFSVolume). An identity
// of kind PowerFlexKindNFSClient has no SDC to read. It never writes.
func (a *PowerFlexAdapter) Plan(ctx context.Context, id arrayclients.Identity, vols []arrayclients.VolumeRef) (arrayclients.Plan, error) {
	nfsOnly := id.Kind == PowerFlexKindNFSClient
	if id.Array != a.cfg.Name || id.Family != arrayclients.PowerFlex || (id.ObjectID == "") != nfsOnly {
		return arrayclients.Plan{}, fmt.Errorf("%w: identity %s/%s/%s", arrayclients.ErrPlanMismatch, id.Family, id.Array, id.ObjectID)
	}
	var p arrayclients.Plan
	err := a.pool.with(ctx, func(k powerFlexCall) error {
		var e PowerFlexEntries
		var listed pflexListing
		var err error
		if nfsOnly {
			sys, err := a.findSystem(k)
			if err != nil {
				return err
			}
			e = PowerFlexEntries{SystemID: sys.ID, Mappings: []PowerFlexMapping{}, HoldersRecorded: true}
		} else if e, listed, err = a.planEntries(k, id); err != nil {
			return err
		}
		file, err := a.file(k)
		if err != nil {
			return err
		}
		var block []string
		for _, v := range vols {
			if _, gap := a.Cover(id, v); gap == nil && v.Protocol != arrayclients.ProtocolNFS {
				block = append(block, v.Object)
			}
		}
		read := a.volumeAccesses(k, block, id.ObjectID, listed)
		var cuts []arrayclients.VolumeCut
		for _, v := range vols {
			vc := arrayclients.VolumeCut{VolumeRef: v}
			cut, gap := a.Cover(id, v)
			if gap != nil {
				vc.Gap = gap
				cuts = append(cuts, vc)
				continue
			}
			if v.Protocol == arrayclients.ProtocolNFS {
				vc, px, err := a.planNFSVolume(file, id, v)
				if err != nil {
					return err
				}
				if px != nil {
					e.NFSExports = append(e.NFSExports, *px)
				}
				cuts = append(cuts, vc)
				continue
			}
			acc, err := read[v.Object].acc, read[v.Object].err
			if err != nil {
				return fmt.Errorf("read footprint volume %s (%s): %w", v.Volume, v.Object, err)
			}
			vc.Holders = acc.holders
			switch {
			case !acc.found:
				vc.Gap = arrayclients.VolumeNotFoundGap(arrayclients.PowerFlex, a.cfg.Name, v)
			case acc.mapping != nil:
				vc.Cut = cut
				if !slices.ContainsFunc(e.Mappings, func(m PowerFlexMapping) bool { return m.VolumeID == v.Object }) {
					e.Mappings = append(e.Mappings, PowerFlexMapping{VolumeID: v.Object, VolumeName: v.Name,
						AccessMode: acc.mapping.AccessMode, LimitIops: acc.mapping.LimitIops,
						LimitBwInMbps: acc.mapping.LimitBwInMbps, Holders: acc.others})
					slices.SortFunc(e.Mappings, func(x, y PowerFlexMapping) int { return strings.Compare(x.VolumeID, y.VolumeID) })
				}
			case len(acc.holders) > 0 && v.Attached:
				vc.Gap = arrayclients.OtherIdentityGap(arrayclients.PowerFlex, v, pflexIdentityLabel(id), acc.holders)
			default:
				vc.Cut = arrayclients.CutNotMapped
			}
			cuts = append(cuts, vc)
		}
		raw, err := json.Marshal(e)
		if err != nil {
			return fmt.Errorf("encode plan: %w", err)
		}
		p = arrayclients.Plan{Array: a.cfg.Name, Family: arrayclients.PowerFlex, Identity: id, Entries: raw, Volumes: cuts, CreatedAt: time.Now().UTC()}
		var parts []string
		if !nfsOnly {
			parts = append(parts, fmt.Sprintf("unmap %d volume(s) from %s", len(e.Mappings), pflexIdentityLabel(id)))
		}
		if n := pflexNFSEntryCount(e); n > 0 || nfsOnly {
			parts = append(parts, fmt.Sprintf("remove %d host entries (IPs %s) from %d NFS export(s)", n,
				pflexIPList(pflexNodeIPs(id)), len(e.NFSExports)))
		}
		p.Summary = strings.Join(parts, "; ")
		if len(cuts) > 0 {
			p.Summary += "; " + arrayclients.FootprintSummary(cuts)
		}
		return nil
	})
	return p, err
}

// Verify reads the SDC's mappings back, and each footprint volume of the
// plan: Fenced when the SDC has no mapping left and no footprint volume is
// mapped to it; Restored when every planned mapping is present with its
// access mode and limits.
func (a *PowerFlexAdapter) Verify(ctx context.Context, p arrayclients.Plan) (arrayclients.Verification, error) {
	e, err := a.entries(p)
	if err != nil {
		return arrayclients.Verification{}, err
	}
	var v arrayclients.Verification
	err = a.pool.with(ctx, func(k powerFlexCall) error {
		if e.SdcID == "" {
			v = arrayclients.Verification{Fenced: true, Restored: true, CheckedAt: time.Now().UTC()}
			return a.verifyNFS(k, p, e, &v)
		}
		listed, found, err := a.hostVolumes(k, e)
		if err != nil {
			return err
		}
		cur := listed.mappings(e.SdcID)
		v = powerFlexVerify(e.Mappings, cur, found)
		if err := a.verifyNFS(k, p, e, &v); err != nil {
			return err
		}
		cuts := pflexBlockCuts(p)
		objs := make([]string, 0, len(cuts))
		for _, vc := range cuts {
			objs = append(objs, vc.Object)
		}
		read := a.volumeAccesses(k, objs, e.SdcID, listed)
		for _, vc := range cuts {
			acc, err := read[vc.Object].acc, read[vc.Object].err
			if err != nil {
				return fmt.Errorf("read footprint volume %s (%s): %w", vc.Volume, vc.Object, err)
			}
			chk := arrayclients.VolumeCheck{Volume: vc.Volume, Object: vc.Object, Holders: acc.holders, NodeAccess: acc.mapping != nil}
			if !acc.found {
				chk.Note = "no longer on the array"
			}
			if chk.NodeAccess {
				v.Fenced = false
				if !slices.ContainsFunc(cur, func(c PowerFlexMapping) bool { return c.VolumeID == vc.Object }) {
					v.Remaining = append(v.Remaining, fmt.Sprintf("footprint volume %s (%s) mapped to %s", vc.Volume, vc.Object, e.hostLabel()))
				}
			}
			v.Volumes = append(v.Volumes, chk)
		}
		return nil
	})
	return v, err
}

// pflexRestore is what an unfence does with one planned mapping.
type pflexRestore struct {
	m PowerFlexMapping
	// give: map it back; allowMultiple: with multiple mappings allowed.
	give, allowMultiple bool
	// take: unmap it (a footprint volume the node may not keep that is
	// mapped to the SDC again).
	take bool
	// why it is left as it was, for logs and notes.
	why string
}

// reconcile decides, from what the MDM shows now, what an unfence gives
// back: a footprint volume only when Kubernetes still wants it on the node
// and no other SDC has it (unless it is multi-node); any other mapping
// unless an SDC that did not have the volume when the plan was read has it
// now (it moved; a ledger v1 plan recorded no holders, so any other SDC
// counts). Multiple mappings are allowed only for a multi-node footprint
// volume, or for another mapping that was shared when the plan was read;
// never to give back a single-node volume.
func (a *PowerFlexAdapter) reconcile(k powerFlexCall, p arrayclients.Plan, e PowerFlexEntries, scope arrayclients.RestoreScope) ([]pflexRestore, error) {
	footprint := map[string]arrayclients.VolumeCut{}
	for _, vc := range pflexBlockCuts(p) {
		footprint[vc.Object] = vc
	}
	var out []pflexRestore
	for _, m := range e.Mappings {
		acc, err := k.volumeAccess(m.VolumeID, e.SdcID)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", m, err)
		}
		r := pflexRestore{m: m}
		vc, isFootprint := footprint[m.VolumeID]
		switch {
		case !acc.found:
			r.why = "no longer on the array"
		case isFootprint:
			if arrayclients.KeepOnRestore(vc.VolumeRef, scope, acc.holders) {
				r.give, r.allowMultiple = true, vc.MultiNode || arrayclients.BrokenRegrant()
			} else {
				r.why = arrayclients.LeftAsItWasNote(vc.VolumeRef, scope, acc.holders)
				r.take = acc.mapping != nil
			}
		default:
			var moved []string
			for i, o := range acc.others {
				if !e.HoldersRecorded || !slices.Contains(m.Holders, o) {
					moved = append(moved, acc.holders[i])
				}
			}
			if len(moved) > 0 {
				r.why = "moved to " + strings.Join(moved, ", ")
			} else {
				r.give, r.allowMultiple = true, len(m.Holders) > 0
			}
		}
		out = append(out, r)
	}
	// A footprint volume that was not mapped when the plan was read but
	// is mapped to the SDC now, and may not stay.
	for _, vc := range pflexBlockCuts(p) {
		if slices.ContainsFunc(e.Mappings, func(m PowerFlexMapping) bool { return m.VolumeID == vc.Object }) {
			continue
		}
		acc, err := k.volumeAccess(vc.Object, e.SdcID)
		if err != nil {
			return nil, fmt.Errorf("read footprint volume %s (%s): %w", vc.Volume, vc.Object, err)
		}
		if acc.mapping != nil && !arrayclients.KeepOnRestore(vc.VolumeRef, scope, acc.holders) {
			out = append(out, pflexRestore{m: PowerFlexMapping{VolumeID: vc.Object, VolumeName: vc.Name},
				take: true, why: arrayclients.LeftAsItWasNote(vc.VolumeRef, scope, acc.holders)})
		}
	}
	return out, nil
}

// Undo reconciles rather than replays (docs/footprint.md, "Unfence"): it
// maps back, with the recorded access mode and limits, what reconcile
// allows, and unmaps footprint volumes the node may not keep that were
// mapped to its SDC again. Mappings present with the right mode and
// limits are left alone, so a repeat writes nothing.
func (a *PowerFlexAdapter) Undo(ctx context.Context, p arrayclients.Plan, scope arrayclients.RestoreScope) error {
	e, err := a.entries(p)
	if err != nil {
		return err
	}
	return a.pool.with(ctx, func(k powerFlexCall) error {
		if err := a.undoNFS(k, p, e, scope); err != nil {
			return err
		}
		if e.SdcID == "" {
			return nil
		}
		cur, found, err := a.hostMappings(k, e)
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("%w: %s no longer exists; cannot map %d volume(s) back",
				arrayclients.ErrNoIdentity, e.hostLabel(), len(e.Mappings))
		}
		plan, err := a.reconcile(k, p, e, scope)
		if err != nil {
			return err
		}
		for _, r := range plan {
			m := r.m
			i := slices.IndexFunc(cur, func(c PowerFlexMapping) bool { return c.VolumeID == m.VolumeID })
			if r.take {
				if i < 0 {
					continue
				}
				err := a.unmapHost(k, e, m.VolumeID)
				if err != nil && !powerFlexIs(err, pflexMsgNotMapped) && !powerFlexIs(err, pflexMsgNoVolume) {
					return fmt.Errorf("unmap %s (%s): %w", m, r.why, err)
				}
				a.logger.Info("unmapped a footprint volume the node may not keep", "node", p.Identity.Node,
					"volume", m.VolumeID, "reason", r.why)
				continue
			}
			if !r.give {
				a.logger.Info("left a volume as it was", "node", p.Identity.Node, "volume", m.VolumeID, "reason", r.why)
				continue
			}
			have := PowerFlexMapping{}
			if i >= 0 {
				have = cur[i]
			}
			if i >= 0 && have.AccessMode != m.AccessMode {
				return fmt.Errorf("%s is mapped with access mode %s, not %s: refusing to change it", m, have.AccessMode, m.AccessMode)
			}
			if i < 0 {
				err := a.mapHost(k, e, m.VolumeID, m.AccessMode, r.allowMultiple)
				if powerFlexIs(err, pflexMsgNoVolume) || errors.Is(err, errPflexVolumeGone) {
					continue
				}
				if err != nil && !powerFlexIs(err, pflexMsgAlreadyMapped) {
					return fmt.Errorf("map %s: %w", m, err)
				}
			}
			if have.LimitIops != m.LimitIops || have.LimitBwInMbps != m.LimitBwInMbps {
				if err := k.setLimits(m.VolumeID, e.SdcID, m.LimitIops, m.LimitBwInMbps); err != nil {
					return fmt.Errorf("restore limits of %s: %w", m, err)
				}
			}
		}
		return nil
	})
}

// VerifyRestore reads the SDC and each planned and footprint volume back:
// Restored when every mapping Undo gives back is present with its mode and
// limits and no footprint volume the node may not keep is mapped to it.
func (a *PowerFlexAdapter) VerifyRestore(ctx context.Context, p arrayclients.Plan, scope arrayclients.RestoreScope) (arrayclients.Verification, error) {
	e, err := a.entries(p)
	if err != nil {
		return arrayclients.Verification{}, err
	}
	var v arrayclients.Verification
	err = a.pool.with(ctx, func(k powerFlexCall) error {
		if e.SdcID == "" {
			v = arrayclients.Verification{Fenced: true, Restored: true, CheckedAt: time.Now().UTC()}
			return a.verifyRestoreNFS(k, p, e, scope, &v)
		}
		cur, found, err := a.hostMappings(k, e)
		if err != nil {
			return err
		}
		plan, err := a.reconcile(k, p, e, scope)
		if err != nil {
			return err
		}
		var given []PowerFlexMapping
		for _, r := range plan {
			if r.give {
				given = append(given, r.m)
			}
		}
		v = powerFlexVerify(given, cur, found)
		violation := false
		cuts := pflexBlockCuts(p)
		objs := make([]string, 0, len(cuts))
		for _, vc := range cuts {
			objs = append(objs, vc.Object)
		}
		read := a.volumeAccesses(k, objs, e.SdcID, pflexListing{})
		for _, vc := range cuts {
			acc, err := read[vc.Object].acc, read[vc.Object].err
			if err != nil {
				return fmt.Errorf("read footprint volume %s (%s): %w", vc.Volume, vc.Object, err)
			}
			chk := arrayclients.VolumeCheck{Volume: vc.Volume, Object: vc.Object, Holders: acc.holders, NodeAccess: acc.mapping != nil}
			switch {
			case !acc.found:
				chk.Note = "no longer on the array"
			case arrayclients.KeepOnRestore(vc.VolumeRef, scope, acc.holders):
				if !chk.NodeAccess && !slices.ContainsFunc(given, func(m PowerFlexMapping) bool { return m.VolumeID == vc.Object }) {
					chk.Note = "not mapped when fenced: the CSI driver maps it when a pod needs it"
				}
			default:
				chk.Note = arrayclients.LeftAsItWasNote(vc.VolumeRef, scope, acc.holders)
				if chk.NodeAccess {
					violation = true
					v.Remaining = append(v.Remaining, fmt.Sprintf("footprint volume %s (%s) is mapped to %s but is %s",
						vc.Volume, vc.Object, e.hostLabel(), chk.Note))
				}
			}
			if chk.NodeAccess {
				v.Fenced = false
			}
			v.Volumes = append(v.Volumes, chk)
		}
		v.Restored = v.Restored && !violation
		return a.verifyRestoreNFS(k, p, e, scope, &v)
	})
	return v, err
}
