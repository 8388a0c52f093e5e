package powerstore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/dell/gopowerstore"

	"github.com/fenced-project/fenced/arrayclients"
)

// PowerStore footprint: each footprint volume is read by its UUID (GET
// volume/<id>) and its mappings by volume (host_volume_mapping with
// volume_id=eq.<id>, as csi-powerstore's ControllerPublish reads them
// before attaching: dell/csi-powerstore pkg/controller/publisher.go).

// psVolumeAccess is what the array shows of one volume for one host.
type psVolumeAccess struct {
	found bool
	// direct: the volume is attached to the host itself, at lun.
	direct bool
	lun    int64
	// group is the host's host group when the volume is mapped to it.
	group string
	// holders are the other hosts and host groups it is attached to.
	holders []string
}

// volumeAccess reads one volume and its mappings. h is the node's host
// (zero when it no longer exists).
func (a *PowerStoreAdapter) volumeAccess(ctx context.Context, c gopowerstore.Client, volID string, h gopowerstore.Host) (psVolumeAccess, error) {
	var acc psVolumeAccess
	rctx, cancel := a.reqCtx(ctx)
	vol, err := c.GetVolume(rctx, volID)
	cancel()
	if err != nil {
		if psStatus(err) == 404 {
			return acc, nil
		}
		return acc, fmt.Errorf("read volume %s: %w", volID, err)
	}
	if vol.ID != volID {
		return acc, fmt.Errorf("read volume %s: the array answered with volume %q", volID, vol.ID)
	}
	acc.found = true
	maps, err := a.mappings(ctx, c, "volume_id", volID)
	if err != nil {
		return acc, err
	}
	for _, m := range maps {
		switch {
		case h.ID != "" && m.HostID == h.ID:
			acc.direct, acc.lun = true, m.LogicalUnitNumber
		case h.ID != "" && m.HostGroupID != "" && m.HostGroupID == h.HostGroupID:
			acc.group = m.HostGroupID
		case m.HostID != "":
			name := m.HostID
			if other, ok, err := a.getHost(ctx, c, m.HostID); err != nil {
				return acc, err
			} else if ok {
				name = other.Name
			}
			acc.holders = append(acc.holders, "host "+name)
		case m.HostGroupID != "":
			acc.holders = append(acc.holders, "host group "+m.HostGroupID)
		}
	}
	sort.Strings(acc.holders)
	return acc, nil
}

// nodeAccess reports whether the node reaches the volume through its host:
// the volume is attached to the host (or its host group) and, in
// initiators mode, the host still has an initiator.
func (a *PowerStoreAdapter) nodeAccess(e psEntries, h gopowerstore.Host, acc psVolumeAccess) bool {
	if h.ID == "" || (!acc.direct && acc.group == "") {
		return false
	}
	return e.Mode == arrayclients.PowerStoreModeDetach || len(h.Initiators) > 0
}

// Plan reads what fencing the identity removes (the host's initiators, or
// its attachments and host-group membership in detach mode) and, for each
// footprint volume, reads the volume and its mappings: attached to the
// node's host (directly or through its host group) is the mode's cut;
// attached to nobody is not-mapped; attached only to other hosts is a gap
// while Kubernetes says it is attached to the node (other-identity), and
// not-mapped while the attach is pending. In detach mode a footprint
// volume attached to the host is always among the plan's attachments.
// It never writes.
func (a *PowerStoreAdapter) Plan(ctx context.Context, id arrayclients.Identity, vols []arrayclients.VolumeRef) (arrayclients.Plan, error) {
	fail := func(err error) (arrayclients.Plan, error) {
		return arrayclients.Plan{}, fmt.Errorf("powerstore array %s: plan fence of node %s (host %s): %w", a.cfg.Name, id.Node, id.ObjectName, err)
	}
	if err := a.checkIdentity(id); err != nil {
		return fail(err)
	}
	var (
		e       psEntries
		summary string
		cuts    []arrayclients.VolumeCut
	)
	err := a.with(ctx, func(c gopowerstore.Client) error {
		var (
			h   gopowerstore.Host
			err error
		)
		if id.Kind == PowerStoreKindNFSClient {
			e, summary = psEntries{Mode: a.mode}, "NFS client without a host"
		} else if e, h, summary, err = a.planEntries(ctx, c, id); err != nil {
			return err
		}
		e.NFSIPs = psNodeIPs(arrayclients.Node{Addresses: id.Keys})
		for _, v := range vols {
			var vc arrayclients.VolumeCut
			if v.Protocol == arrayclients.ProtocolNFS {
				vc, err = a.planNFSVolume(ctx, c, id, &e, v)
			} else {
				vc, err = a.planVolume(ctx, c, id, &e, h, v)
			}
			if err != nil {
				return fmt.Errorf("footprint volume %s: %w", v.Volume, err)
			}
			cuts = append(cuts, vc)
		}
		return nil
	})
	if err != nil {
		return fail(psClassify(err))
	}
	raw, err := json.Marshal(e)
	if err != nil {
		return fail(err)
	}
	if len(e.NFSExports) > 0 {
		summary += "; " + e.nfsSummary()
	}
	if len(cuts) > 0 {
		summary += "; " + arrayclients.FootprintSummary(cuts)
	}
	return arrayclients.Plan{Array: a.cfg.Name, Family: arrayclients.PowerStore, Identity: id, Entries: raw,
		Summary: summary, Volumes: cuts, CreatedAt: time.Now().UTC()}, nil
}

func (a *PowerStoreAdapter) planVolume(ctx context.Context, c gopowerstore.Client, id arrayclients.Identity, e *psEntries, h gopowerstore.Host, v arrayclients.VolumeRef) (arrayclients.VolumeCut, error) {
	vc := arrayclients.VolumeCut{VolumeRef: v}
	cut, gap := a.Cover(id, v)
	if gap != nil {
		vc.Gap = gap
		return vc, nil
	}
	acc, err := a.volumeAccess(ctx, c, v.Object, h)
	if err != nil {
		return vc, err
	}
	if !acc.found {
		vc.Gap = arrayclients.VolumeNotFoundGap(arrayclients.PowerStore, a.cfg.Name, v)
		return vc, nil
	}
	vc.Holders = acc.holders
	switch {
	case acc.direct || acc.group != "":
		vc.Cut = cut
		if e.Mode == arrayclients.PowerStoreModeDetach && acc.direct &&
			!slices.ContainsFunc(e.Attachments, func(at psAttachment) bool { return at.VolumeID == v.Object }) {
			e.Attachments = append(e.Attachments, psAttachment{VolumeID: v.Object, LUN: acc.lun})
			sort.Slice(e.Attachments, func(i, j int) bool { return e.Attachments[i].VolumeID < e.Attachments[j].VolumeID })
		}
	case len(acc.holders) > 0 && v.Attached:
		vc.Gap = arrayclients.OtherIdentityGap(arrayclients.PowerStore, v, "host "+h.Name, acc.holders)
	default:
		vc.Cut = arrayclients.CutNotMapped
	}
	return vc, nil
}

// Verify reads the host back, and each footprint volume of the plan. In
// initiators mode the identity is fenced when its host has no initiator
// and no other host carries one of the plan's port names; in detach mode
// when the host has no mapping and is in no host group. A footprint
// volume gives the node access while it is attached to the host (or its
// group) and, in initiators mode, the host has an initiator.
func (a *PowerStoreAdapter) Verify(ctx context.Context, plan arrayclients.Plan) (arrayclients.Verification, error) {
	fail := func(err error) (arrayclients.Verification, error) {
		return arrayclients.Verification{}, fmt.Errorf("powerstore array %s: verify fence of node %s (host %s): %w", a.cfg.Name, plan.Identity.Node, plan.Identity.ObjectName, err)
	}
	e, err := a.decodePlan(plan)
	if err != nil {
		return fail(err)
	}
	// Host listings shared with other calls must have begun after this
	// read-back did (after the write it reads back).
	began := time.Now()
	v := arrayclients.Verification{}
	access := false
	err = a.with(ctx, func(c gopowerstore.Client) error {
		var err error
		if access, err = a.verifyNFS(ctx, c, plan, e, &v); err != nil || e.HostID == "" {
			return err
		}
		h, ok, err := a.getHost(ctx, c, e.HostID)
		if err != nil {
			return err
		}
		if e.Mode == arrayclients.PowerStoreModeInitiators {
			err = a.verifyInitiators(ctx, c, began, e, h, ok, nil, &v)
		} else {
			err = a.verifyDetach(ctx, c, e, h, ok, nil, &v)
		}
		if err != nil {
			return err
		}
		if !ok {
			h = gopowerstore.Host{}
		}
		for _, vc := range psBlockCuts(plan) {
			acc, err := a.volumeAccess(ctx, c, vc.Object, h)
			if err != nil {
				return fmt.Errorf("footprint volume %s: %w", vc.Volume, err)
			}
			chk := arrayclients.VolumeCheck{Volume: vc.Volume, Object: vc.Object, Holders: acc.holders, NodeAccess: a.nodeAccess(e, h, acc)}
			if !acc.found {
				chk.Note = "no longer on the array"
			}
			if chk.NodeAccess {
				access = true
				v.Remaining = append(v.Remaining, fmt.Sprintf("footprint volume %s (%s) reaches host %s", vc.Volume, vc.Object, h.Name))
			}
			v.Volumes = append(v.Volumes, chk)
		}
		return nil
	})
	if err != nil {
		return fail(psClassify(err))
	}
	v.Fenced = len(v.Remaining) == 0 && !access
	v.Restored = len(v.Missing) == 0
	v.CheckedAt = time.Now().UTC()
	return v, nil
}

// Undo reconciles rather than replays (docs/footprint.md, "Unfence"):
//
//  1. every footprint volume the node may not keep (not wanted by
//     Kubernetes on the node, or held by another host now and not
//     multi-node) is detached from the node's host first, as
//     csi-powerstore's ControllerUnpublishVolume does
//     (dell/csi-powerstore pkg/controller/base.go detachVolumeFromHost),
//     so the initiators given back cannot reach it;
//  2. initiators mode: the plan's initiators are added back, unless the
//     node came back under a new host name (a new IP: psSameNode) and
//     registered its initiators with that host: they are back through it
//     and nothing is added to the old host. An initiator registered with
//     another node's host is ErrIdentityConflict (initiators never move
//     between hosts);
//  3. detach mode: the host rejoins its host group and the plan's
//     attachments are attached again at their LUNs, footprint volumes
//     only when the node may keep them, other volumes unless another host
//     holds them now (they moved).
//
// Plans without footprint volumes (ledger v1) undo under rule 3 alone.
// Repeating Undo writes nothing.
func (a *PowerStoreAdapter) Undo(ctx context.Context, plan arrayclients.Plan, scope arrayclients.RestoreScope) error {
	fail := func(err error) error {
		if err == nil {
			return nil
		}
		return fmt.Errorf("powerstore array %s: undo fence of node %s (host %s): %w", a.cfg.Name, plan.Identity.Node, plan.Identity.ObjectName, err)
	}
	e, err := a.decodePlan(plan)
	if err != nil {
		return fail(err)
	}
	return fail(psClassify(a.with(ctx, func(c gopowerstore.Client) error {
		if err := a.undoNFS(ctx, c, plan, e, scope); err != nil || e.HostID == "" {
			return err
		}
		h, ok, err := a.getHost(ctx, c, e.HostID)
		if err != nil {
			return err
		}
		if e.Mode == arrayclients.PowerStoreModeInitiators {
			if !ok {
				h = gopowerstore.Host{}
			}
			via, err := a.givenBack(ctx, c, e, h, scope)
			if err != nil {
				return err
			}
			if via != nil {
				if ok {
					if _, err := a.leaveOut(ctx, c, e, h, plan, scope, true); err != nil {
						return err
					}
				}
				a.logger.Info("the node registered a new host with its initiators: they are given back through it, and nothing is added to the old host",
					"array", a.cfg.Name, "node", plan.Identity.Node, "oldHost", e.HostName, "newHost", via.Name)
				return nil
			}
		}
		if !ok {
			return fmt.Errorf("host %s (%s) no longer exists: cannot restore", e.HostName, e.HostID)
		}
		skip, err := a.leaveOut(ctx, c, e, h, plan, scope, true)
		if err != nil {
			return err
		}
		if e.Mode == arrayclients.PowerStoreModeInitiators {
			return a.undoInitiators(ctx, c, e, h)
		}
		return a.undoDetach(ctx, c, e, h, skip)
	})))
}

// leaveOut reads every footprint volume of the plan and every other
// attachment of a detach-mode plan, and returns those an unfence leaves
// without the node's access. With detach set it detaches each footprint
// volume the node may not keep that is attached to the host.
func (a *PowerStoreAdapter) leaveOut(ctx context.Context, c gopowerstore.Client, e psEntries, h gopowerstore.Host, plan arrayclients.Plan,
	scope arrayclients.RestoreScope, detach bool) (map[string]bool, error) {
	skip := map[string]bool{}
	footprint := map[string]bool{}
	for _, vc := range psBlockCuts(plan) {
		footprint[vc.Object] = true
		acc, err := a.volumeAccess(ctx, c, vc.Object, h)
		if err != nil {
			return nil, fmt.Errorf("footprint volume %s: %w", vc.Volume, err)
		}
		if acc.found && arrayclients.KeepOnRestore(vc.VolumeRef, scope, acc.holders) {
			continue
		}
		skip[vc.Object] = true
		if !detach || !acc.direct {
			continue
		}
		vol := vc.Object
		rctx, cancel := a.reqCtx(ctx)
		_, err = c.DetachVolumeFromHost(rctx, h.ID, &gopowerstore.HostVolumeDetach{VolumeID: &vol})
		cancel()
		if err != nil && !psNotAttached(err) {
			return nil, fmt.Errorf("detach footprint volume %s (%s, %s) before giving the host back: %w", vc.Volume, vol,
				arrayclients.LeftAsItWasNote(vc.VolumeRef, scope, acc.holders), err)
		}
		a.logger.Info("detached a footprint volume the node may not keep", "array", a.cfg.Name, "node", plan.Identity.Node,
			"volume", vc.Volume, "object", vol, "reason", arrayclients.LeftAsItWasNote(vc.VolumeRef, scope, acc.holders))
	}
	if e.Mode != arrayclients.PowerStoreModeDetach {
		return skip, nil
	}
	for _, at := range e.Attachments {
		if footprint[at.VolumeID] {
			continue
		}
		acc, err := a.volumeAccess(ctx, c, at.VolumeID, h)
		if err != nil {
			return nil, err
		}
		if !acc.found || len(acc.holders) > 0 {
			skip[at.VolumeID] = true
		}
	}
	return skip, nil
}

// VerifyRestore reads the host back after Undo: Restored when what Undo
// gives back under scope is back (the initiators; in detach mode the host
// group and the attachments not left out) and no footprint volume the
// node may not keep reaches its host. Each footprint volume left as it was
// has a Note.
func (a *PowerStoreAdapter) VerifyRestore(ctx context.Context, plan arrayclients.Plan, scope arrayclients.RestoreScope) (arrayclients.Verification, error) {
	fail := func(err error) (arrayclients.Verification, error) {
		return arrayclients.Verification{}, fmt.Errorf("powerstore array %s: verify restore of node %s (host %s): %w", a.cfg.Name, plan.Identity.Node, plan.Identity.ObjectName, err)
	}
	e, err := a.decodePlan(plan)
	if err != nil {
		return fail(err)
	}
	began := time.Now() // see Verify
	v := arrayclients.Verification{}
	var access, violation bool
	err = a.with(ctx, func(c gopowerstore.Client) error {
		var err error
		if access, violation, err = a.verifyRestoreNFS(ctx, c, plan, e, scope, &v); err != nil || e.HostID == "" {
			return err
		}
		h, ok, err := a.getHost(ctx, c, e.HostID)
		if err != nil {
			return err
		}
		host := h
		if !ok {
			host = gopowerstore.Host{}
		}
		skip, err := a.leaveOut(ctx, c, e, host, plan, scope, false)
		if err != nil {
			return err
		}
		if e.Mode == arrayclients.PowerStoreModeInitiators {
			err = a.verifyInitiators(ctx, c, began, e, h, ok, &scope, &v)
			access = access || (ok && len(h.Initiators) > 0)
		} else {
			err = a.verifyDetach(ctx, c, e, h, ok, skip, &v)
		}
		if err != nil {
			return err
		}
		for _, vc := range psBlockCuts(plan) {
			acc, err := a.volumeAccess(ctx, c, vc.Object, host)
			if err != nil {
				return fmt.Errorf("footprint volume %s: %w", vc.Volume, err)
			}
			chk := arrayclients.VolumeCheck{Volume: vc.Volume, Object: vc.Object, Holders: acc.holders, NodeAccess: a.nodeAccess(e, host, acc)}
			access = access || chk.NodeAccess
			switch {
			case !acc.found:
				chk.Note = "no longer on the array"
			case arrayclients.KeepOnRestore(vc.VolumeRef, scope, acc.holders):
				if !acc.direct && acc.group == "" {
					chk.Note = "not attached to the host: the CSI driver attaches it again when a pod needs it"
				}
			default:
				chk.Note = arrayclients.LeftAsItWasNote(vc.VolumeRef, scope, acc.holders)
				if chk.NodeAccess {
					violation = true
					v.Remaining = append(v.Remaining, fmt.Sprintf("footprint volume %s (%s) reaches host %s but is %s",
						vc.Volume, vc.Object, host.Name, chk.Note))
				}
			}
			v.Volumes = append(v.Volumes, chk)
		}
		return nil
	})
	if err != nil {
		return fail(psClassify(err))
	}
	v.Fenced = len(v.Remaining) == 0 && !access
	v.Restored = len(v.Missing) == 0 && !violation
	v.CheckedAt = time.Now().UTC()
	return v, nil
}
