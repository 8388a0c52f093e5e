package powermax

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	pmax "github.com/dell/gopowermax/v2"
	pmaxtypes "github.com/dell/gopowermax/v2/types/v100"

	"github.com/fenced-project/fenced/arrayclients"
)

// PowerMax footprint: each footprint volume is read by its device ID (GET
// sloprovisioning/.../volume/<id>); its storage groups tell where it is
// masked. The node reaches it when one of those groups is in a masking
// view of the node's host and the host has initiators. csi-powermax reads
// the volume the same way before it unpublishes it
// (dell/csi-powermax service/controller.go unpublishVolume).

// pmaxVolumeAccess is what the array shows of one volume for one host.
type pmaxVolumeAccess struct {
	found bool
	// groups are the volume's storage groups that are in a masking view of
	// the node's host.
	groups []string
	// holders are the other hosts and host groups it is masked to.
	holders []string
}

// hostGroups maps each storage group in a masking view of the host to
// that view.
func (a *PowerMaxAdapter) hostGroups(ctx context.Context, c pmax.Pmax, h *pmaxtypes.Host) (map[string]string, error) {
	out := map[string]string{}
	if h == nil {
		return out, nil
	}
	for _, mvID := range h.MaskingviewIDs {
		mv, err := a.maskingView(ctx, c, mvID)
		if err != nil {
			return nil, err
		}
		out[mv.StorageGroupID] = mvID
	}
	return out, nil
}

func (a *PowerMaxAdapter) maskingView(ctx context.Context, c pmax.Pmax, id string) (*pmaxtypes.MaskingView, error) {
	rctx, cancel := arrayclients.WithRequestTimeout(ctx, a.cfg.RequestTimeout)
	defer cancel()
	mv, err := c.GetMaskingViewByID(rctx, a.cfg.SymmetrixID, id)
	if err != nil {
		return nil, fmt.Errorf("read masking view %s: %w", id, classifyPmax(err))
	}
	return mv, nil
}

// volumeAccess reads a volume and, for each of its storage groups not in a
// view of the node's host (nodeGroups), the hosts that group is masked to.
func (a *PowerMaxAdapter) volumeAccess(ctx context.Context, c pmax.Pmax, devID string, nodeGroups map[string]string) (pmaxVolumeAccess, error) {
	var acc pmaxVolumeAccess
	rctx, cancel := arrayclients.WithRequestTimeout(ctx, a.cfg.RequestTimeout)
	vol, err := c.GetVolumeByID(rctx, a.cfg.SymmetrixID, devID)
	cancel()
	if pmaxtypes.IsNotFoundError(err) {
		return acc, nil
	}
	if err != nil {
		return acc, fmt.Errorf("read volume %s: %w", devID, classifyPmax(err))
	}
	if vol == nil || !strings.EqualFold(vol.VolumeID, devID) {
		return acc, fmt.Errorf("read volume %s: the array answered for volume %q", devID, volumeIDOf(vol))
	}
	acc.found = true
	for _, sgID := range vol.StorageGroupIDList {
		if _, mine := nodeGroups[sgID]; mine {
			acc.groups = append(acc.groups, sgID)
			continue
		}
		rctx, cancel := arrayclients.WithRequestTimeout(ctx, a.cfg.RequestTimeout)
		sg, err := c.GetStorageGroup(rctx, a.cfg.SymmetrixID, sgID)
		cancel()
		if err != nil {
			return acc, fmt.Errorf("read storage group %s of volume %s: %w", sgID, devID, classifyPmax(err))
		}
		for _, mvID := range sg.MaskingView {
			mv, err := a.maskingView(ctx, c, mvID)
			if err != nil {
				return acc, err
			}
			switch {
			case mv.HostID != "":
				acc.holders = append(acc.holders, "host "+mv.HostID)
			case mv.HostGroupID != "":
				acc.holders = append(acc.holders, "host group "+mv.HostGroupID)
			}
		}
	}
	slices.Sort(acc.groups)
	slices.Sort(acc.holders)
	acc.holders = slices.Compact(acc.holders)
	return acc, nil
}

func volumeIDOf(v *pmaxtypes.Volume) string {
	if v == nil {
		return ""
	}
	return v.VolumeID
}

// Plan records the host's initiators (and its masking views as evidence)
// and, for each footprint volume, reads the volume: masked to the node's
// host is host-initiators; masked to nobody is not-mapped; masked only to
// other hosts is a gap while Kubernetes says it is attached to the node
// (other-identity), and not-mapped while the attach is pending. NFS file
// systems are not fenceable (Cover). It never writes.
func (a *PowerMaxAdapter) Plan(ctx context.Context, id arrayclients.Identity, vols []arrayclients.VolumeRef) (arrayclients.Plan, error) {
	if id.Kind == PowerMaxKindSharedHost {
		return a.planShared(id, vols)
	}
	p, err := a.planIdentity(ctx, id)
	if err != nil || len(vols) == 0 {
		return p, err
	}
	c, err := a.conn.get(ctx)
	if err != nil {
		return arrayclients.Plan{}, a.errf("plan", id.Node, err)
	}
	h, err := a.conn.getHost(ctx, id.ObjectID)
	if err != nil {
		return arrayclients.Plan{}, a.errf("plan", id.Node, fmt.Errorf("read host %s: %w", id.ObjectID, err))
	}
	groups, err := a.hostGroups(ctx, c, h)
	if err != nil {
		return arrayclients.Plan{}, a.errf("plan", id.Node, err)
	}
	for _, v := range vols {
		vc := arrayclients.VolumeCut{VolumeRef: v}
		cut, gap := a.Cover(id, v)
		if gap != nil {
			vc.Gap = gap
			p.Volumes = append(p.Volumes, vc)
			continue
		}
		acc, err := a.volumeAccess(ctx, c, v.Object, groups)
		if err != nil {
			return arrayclients.Plan{}, a.errf("plan", id.Node, fmt.Errorf("footprint volume %s: %w", v.Volume, err))
		}
		vc.Holders = acc.holders
		switch {
		case !acc.found:
			vc.Gap = arrayclients.VolumeNotFoundGap(arrayclients.PowerMax, a.cfg.Name, v)
		case len(acc.groups) > 0:
			vc.Cut = cut
		case len(acc.holders) > 0 && v.Attached:
			vc.Gap = arrayclients.OtherIdentityGap(arrayclients.PowerMax, v, "host "+id.ObjectID, acc.holders)
		default:
			vc.Cut = arrayclients.CutNotMapped
		}
		p.Volumes = append(p.Volumes, vc)
	}
	p.Summary += "; " + arrayclients.FootprintSummary(p.Volumes)
	return p, nil
}

// Verify reads the host back: the identity is fenced when it has no
// initiator at all; a footprint volume gives the node access while it is
// in a storage group of one of the host's masking views and the host has
// an initiator.
func (a *PowerMaxAdapter) Verify(ctx context.Context, p arrayclients.Plan) (arrayclients.Verification, error) {
	if p.Identity.Kind == PowerMaxKindSharedHost {
		return a.sharedVerification(p)
	}
	v, h, err := a.verifyHost(ctx, p)
	if err != nil {
		return v, err
	}
	checks, _, err := a.checkVolumes(ctx, p, h, arrayclients.RestoreScope{}, false)
	if err != nil {
		return arrayclients.Verification{}, a.errf("verify", p.Identity.Node, err)
	}
	for _, c := range checks {
		if c.NodeAccess {
			v.Fenced = false
			v.Remaining = append(v.Remaining, fmt.Sprintf("footprint volume %s (%s) is masked to host %s", c.Volume, c.Object, hostIDOf(h)))
		}
	}
	v.Volumes = checks
	return v, nil
}

// verifyHost is the identity-level read-back: the host's initiators. h is
// nil when the host no longer exists.
func (a *PowerMaxAdapter) verifyHost(ctx context.Context, p arrayclients.Plan) (arrayclients.Verification, *pmaxtypes.Host, error) {
	e, err := a.entries(p)
	if err != nil {
		return arrayclients.Verification{}, nil, a.errf("verify", p.Identity.Node, err)
	}
	h, err := a.conn.getHost(ctx, e.HostID)
	if pmaxtypes.IsNotFoundError(err) {
		// No host, no initiator group: the node has no path, and nothing
		// of the plan is there.
		return arrayclients.Verification{Fenced: true, Missing: pmaxPrefixAll("initiator ", e.Initiators), CheckedAt: a.now().UTC()}, nil, nil
	}
	if err != nil {
		return arrayclients.Verification{}, nil, a.errf("verify", p.Identity.Node, fmt.Errorf("read host %s: %w", e.HostID, err))
	}
	v := arrayclients.Verification{CheckedAt: a.now().UTC()}
	// A host in no masking view and no host group reaches no volume,
	// whatever its initiators (the fallback cut, see Apply).
	if len(h.MaskingviewIDs) > 0 || h.NumberHostGroups > 0 {
		for _, in := range slices.Sorted(slices.Values(h.Initiators)) {
			v.Remaining = append(v.Remaining, fmt.Sprintf("initiator %s in host %s", in, e.HostID))
		}
	}
	for _, in := range e.Initiators {
		if !slices.Contains(h.Initiators, in) {
			v.Missing = append(v.Missing, "initiator "+in)
		}
	}
	v.Fenced = len(v.Remaining) == 0
	v.Restored = len(v.Missing) == 0
	return v, h, nil
}

// checkVolumes reads back each footprint volume of the plan that has a
// cut. With restore set, each volume the node may not keep under scope
// carries a note saying why, and those that still reach the node are
// violations.
func (a *PowerMaxAdapter) checkVolumes(ctx context.Context, p arrayclients.Plan, h *pmaxtypes.Host, scope arrayclients.RestoreScope, restore bool) (out []arrayclients.VolumeCheck, violations []string, err error) {
	cuts := arrayclients.FootprintCuts(p)
	if len(cuts) == 0 {
		return nil, nil, nil
	}
	c, err := a.conn.get(ctx)
	if err != nil {
		return nil, nil, err
	}
	groups, err := a.hostGroups(ctx, c, h)
	if err != nil {
		return nil, nil, err
	}
	for _, vc := range cuts {
		acc, err := a.volumeAccess(ctx, c, vc.Object, groups)
		if err != nil {
			return nil, nil, fmt.Errorf("footprint volume %s: %w", vc.Volume, err)
		}
		chk := arrayclients.VolumeCheck{Volume: vc.Volume, Object: vc.Object, Holders: acc.holders,
			NodeAccess: h != nil && len(acc.groups) > 0 && len(h.Initiators) > 0}
		switch {
		case !acc.found:
			chk.Note = "no longer on the array"
		case !restore:
		case arrayclients.KeepOnRestore(vc.VolumeRef, scope, acc.holders):
			if len(acc.groups) == 0 {
				chk.Note = "not in the host's storage group: the CSI driver adds it when a pod needs it"
			}
		default:
			chk.Note = arrayclients.LeftAsItWasNote(vc.VolumeRef, scope, acc.holders)
			if chk.NodeAccess {
				violations = append(violations, fmt.Sprintf("footprint volume %s (%s) is masked to host %s but is %s",
					vc.Volume, vc.Object, hostIDOf(h), chk.Note))
			}
		}
		out = append(out, chk)
	}
	return out, violations, nil
}

// Undo reconciles rather than replays (docs/footprint.md, "Unfence"):
// before the host's initiators come back, every footprint volume the node
// may not keep (not wanted by Kubernetes on the node, or masked to another
// host now and not multi-node) is removed from the storage groups of the
// host's masking views, as csi-powermax's ControllerUnpublishVolume does
// (dell/csi-powermax service/controller.go unpublishVolume and
// service/storage_group_svc.go removeVolumesFromSGMV: a group's last
// volumes leave only after its masking view is deleted). Then the plan's
// initiators the host lacks are added back. Volumes the node may keep
// never left its storage group (the cut is host-level). Plans without
// footprint volumes (ledger v1) give the initiators back. Repeating Undo
// writes nothing.
func (a *PowerMaxAdapter) Undo(ctx context.Context, p arrayclients.Plan, scope arrayclients.RestoreScope) error {
	e, err := a.entries(p)
	if err != nil {
		return a.errf("undo", p.Identity.Node, err)
	}
	if p.Identity.Kind == PowerMaxKindSharedHost {
		return nil // the plan removed nothing
	}
	if cuts := arrayclients.FootprintCuts(p); len(cuts) > 0 {
		if err := a.unmaskUnkept(ctx, p, e, cuts, scope); err != nil {
			return a.errf("undo", p.Identity.Node, err)
		}
	}
	if err := a.restoreViews(ctx, e); err != nil {
		return a.errf("undo", p.Identity.Node, err)
	}
	return a.edit(ctx, p, "undo", func(current, planned []string) []string {
		out := slices.Clone(current)
		for _, in := range planned {
			if !slices.Contains(out, in) {
				out = append(out, in)
			}
		}
		return out
	})
}

// viewsToRestore returns the plan's masking views that are gone while
// their storage group still holds volumes: the views the fallback cut
// deleted and Undo makes again. A view whose group emptied (every volume
// moved, the driver unpublished them) is not made again; csi-powermax
// makes it when it next publishes a volume to the node.
func (a *PowerMaxAdapter) viewsToRestore(ctx context.Context, c pmax.Pmax, e PowerMaxEntries, h *pmaxtypes.Host) ([]PowerMaxView, error) {
	var out []PowerMaxView
	for _, mv := range e.MaskingViews {
		if h != nil && slices.Contains(h.MaskingviewIDs, mv.ID) {
			continue
		}
		rctx, cancel := arrayclients.WithRequestTimeout(ctx, a.cfg.RequestTimeout)
		sg, err := c.GetStorageGroup(rctx, a.cfg.SymmetrixID, mv.StorageGroup)
		cancel()
		if pmaxtypes.IsNotFoundError(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read storage group %s of masking view %s: %w", mv.StorageGroup, mv.ID, classifyPmax(err))
		}
		if sg.NumOfVolumes > 0 {
			out = append(out, mv)
		}
	}
	return out, nil
}

// restoreViews makes again the masking views the fallback cut deleted.
func (a *PowerMaxAdapter) restoreViews(ctx context.Context, e PowerMaxEntries) error {
	if len(e.MaskingViews) == 0 {
		return nil
	}
	c, err := a.conn.get(ctx)
	if err != nil {
		return err
	}
	h, err := a.conn.getHost(ctx, e.HostID)
	if err != nil {
		return fmt.Errorf("read host %s: %w", e.HostID, err)
	}
	views, err := a.viewsToRestore(ctx, c, e, h)
	if err != nil {
		return err
	}
	for _, mv := range views {
		rctx, cancel := arrayclients.WithRequestTimeout(ctx, a.cfg.RequestTimeout)
		_, err := c.CreateMaskingView(rctx, a.cfg.SymmetrixID, mv.ID, mv.StorageGroup, e.HostID, true, mv.PortGroup)
		cancel()
		if err != nil {
			return fmt.Errorf("make masking view %s (storage group %s, port group %s) of host %s again: %w",
				mv.ID, mv.StorageGroup, mv.PortGroup, e.HostID, classifyPmax(err))
		}
		a.log.InfoContext(ctx, "masking view made again", "host", e.HostID, "maskingView", mv.ID, "storageGroup", mv.StorageGroup)
	}
	return nil
}

// unmaskUnkept removes from the host's storage groups each footprint
// volume the node may not keep.
func (a *PowerMaxAdapter) unmaskUnkept(ctx context.Context, p arrayclients.Plan, e PowerMaxEntries, cuts []arrayclients.VolumeCut, scope arrayclients.RestoreScope) error {
	c, err := a.conn.get(ctx)
	if err != nil {
		return err
	}
	h, err := a.conn.getHost(ctx, e.HostID)
	if err != nil {
		return fmt.Errorf("read host %s: %w", e.HostID, err)
	}
	groups, err := a.hostGroups(ctx, c, h)
	if err != nil {
		return err
	}
	// The storage groups of views the fallback cut deleted are still the
	// node's: a volume that may not come back leaves them before the
	// views are made again.
	for _, mv := range e.MaskingViews {
		if _, ok := groups[mv.StorageGroup]; !ok && mv.StorageGroup != "" {
			groups[mv.StorageGroup] = mv.ID
		}
	}
	remove := map[string][]string{} // storage group -> volumes
	for _, vc := range cuts {
		acc, err := a.volumeAccess(ctx, c, vc.Object, groups)
		if err != nil {
			return fmt.Errorf("footprint volume %s: %w", vc.Volume, err)
		}
		if !acc.found || arrayclients.KeepOnRestore(vc.VolumeRef, scope, acc.holders) {
			continue
		}
		for _, sg := range acc.groups {
			remove[sg] = append(remove[sg], vc.Object)
		}
		a.log.InfoContext(ctx, "removing a footprint volume the node may not keep from its storage group", "node", p.Identity.Node,
			"volume", vc.Volume, "device", vc.Object, "groups", acc.groups, "reason", arrayclients.LeftAsItWasNote(vc.VolumeRef, scope, acc.holders))
	}
	for _, sgID := range slices.Sorted(maps.Keys(remove)) {
		devs := slices.Compact(slices.Sorted(slices.Values(remove[sgID])))
		rctx, cancel := arrayclients.WithRequestTimeout(ctx, a.cfg.RequestTimeout)
		sg, err := c.GetStorageGroup(rctx, a.cfg.SymmetrixID, sgID)
		cancel()
		if err != nil {
			return fmt.Errorf("read storage group %s: %w", sgID, classifyPmax(err))
		}
		if sg.NumOfVolumes <= len(devs) {
			mvID := groups[sgID]
			rctx, cancel := arrayclients.WithRequestTimeout(ctx, a.cfg.RequestTimeout)
			err := c.DeleteMaskingView(rctx, a.cfg.SymmetrixID, mvID)
			cancel()
			if err != nil && !pmaxtypes.IsNotFoundError(err) {
				return fmt.Errorf("delete masking view %s before removing the last volumes %s of storage group %s: %w",
					mvID, strings.Join(devs, ", "), sgID, classifyPmax(err))
			}
		}
		rctx, cancel = arrayclients.WithRequestTimeout(ctx, a.cfg.RequestTimeout)
		_, err = c.RemoveVolumesFromStorageGroup(rctx, a.cfg.SymmetrixID, sgID, true, devs...)
		cancel()
		if err != nil {
			return fmt.Errorf("remove volumes %s from storage group %s: %w", strings.Join(devs, ", "), sgID, classifyPmax(err))
		}
	}
	return nil
}

// VerifyRestore reads the host back after Undo: Restored when every
// initiator of the plan is back and no footprint volume the node may not
// keep is masked to it.
func (a *PowerMaxAdapter) VerifyRestore(ctx context.Context, p arrayclients.Plan, scope arrayclients.RestoreScope) (arrayclients.Verification, error) {
	if p.Identity.Kind == PowerMaxKindSharedHost {
		return a.sharedVerification(p)
	}
	v, h, err := a.verifyHost(ctx, p)
	if err != nil {
		return v, err
	}
	if e, err := a.entries(p); err == nil && len(e.MaskingViews) > 0 {
		c, err := a.conn.get(ctx)
		if err != nil {
			return arrayclients.Verification{}, a.errf("verify restore", p.Identity.Node, err)
		}
		gone, err := a.viewsToRestore(ctx, c, e, h)
		if err != nil {
			return arrayclients.Verification{}, a.errf("verify restore", p.Identity.Node, err)
		}
		for _, mv := range gone {
			v.Missing = append(v.Missing, "masking view "+mv.ID)
		}
		v.Restored = len(v.Missing) == 0
	}
	checks, violations, err := a.checkVolumes(ctx, p, h, scope, true)
	if err != nil {
		return arrayclients.Verification{}, a.errf("verify restore", p.Identity.Node, err)
	}
	for _, c := range checks {
		if c.NodeAccess {
			v.Fenced = false
		}
	}
	if len(violations) > 0 {
		v.Restored = false
		v.Remaining = append(v.Remaining, violations...)
	}
	v.Volumes = checks
	return v, nil
}
