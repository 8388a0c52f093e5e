package powerstore

import (
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/dell/gopowerstore"

	"github.com/fenced-project/fenced/arrayclients"
)

// psEntries is the PowerStore part of a Plan.
type psEntries struct {
	Mode     string `json:"mode"`
	HostID   string `json:"hostID"`
	HostName string `json:"hostName"`
	// Initiators are removed in "initiators" mode.
	Initiators []psInitiator `json:"initiators,omitempty"`
	// Attachments are detached in "detach" mode.
	Attachments []psAttachment `json:"attachments,omitempty"`
	// HostGroup is left in "detach" mode (its volumes reach the host too).
	HostGroup *psHostGroup `json:"hostGroup,omitempty"`
	// NFSIPs are the node's IPv4 addresses NFS export entries name it by;
	// NFSExports what a fence removes from the NFS exports of the
	// footprint's file systems (nfs.go). HostID is empty for a
	// node known only as an NFS client.
	NFSIPs     []string      `json:"nfsIPs,omitempty"`
	NFSExports []psNFSExport `json:"nfsExports,omitempty"`
}

// psInitiator is one initiator as the plan records it. CHAP secrets cannot
// be read back, and the node plugin changes them at every start: Undo
// gives a CHAP initiator back as a placeholder the node plugin sets its
// own credentials on (chap.go).
type psInitiator struct {
	PortName           string `json:"portName"`
	PortType           string `json:"portType"`
	ChapSingleUsername string `json:"chapSingleUsername,omitempty"`
	ChapMutualUsername string `json:"chapMutualUsername,omitempty"`
}

func (i psInitiator) String() string { return fmt.Sprintf("initiator %s (%s)", i.PortName, i.PortType) }

// psAttachment is one host-volume attachment.
type psAttachment struct {
	VolumeID string `json:"volumeID"`
	LUN      int64  `json:"logicalUnitNumber"`
}

// psHostGroup is the host group the host belonged to.
type psHostGroup struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

func (a *PowerStoreAdapter) checkIdentity(id arrayclients.Identity) error {
	nfsOnly := id.Kind == PowerStoreKindNFSClient && len(psKeyIPs(id.Keys)) > 0
	if id.Family != arrayclients.PowerStore || id.Array != a.cfg.Name || (id.ObjectID == "") != nfsOnly {
		return fmt.Errorf("%w: identity of %s array %s (host %q)", arrayclients.ErrPlanMismatch, id.Family, id.Array, id.ObjectID)
	}
	return nil
}

// planEntries reads the host and records what a fence of the identity
// removes from it.
func (a *PowerStoreAdapter) planEntries(ctx context.Context, c gopowerstore.Client, id arrayclients.Identity) (psEntries, gopowerstore.Host, string, error) {
	e := psEntries{Mode: a.mode, HostID: id.ObjectID, HostName: id.ObjectName}
	h, ok, err := a.getHost(ctx, c, id.ObjectID)
	if err != nil {
		return e, h, "", err
	}
	if !ok {
		return e, h, "", fmt.Errorf("%w: host %s no longer exists", arrayclients.ErrNoIdentity, id.ObjectID)
	}
	if h.Name != id.ObjectName {
		return e, h, "", fmt.Errorf("host %s is now named %q, not %q: resolve the node again", h.ID, h.Name, id.ObjectName)
	}
	if a.mode == arrayclients.PowerStoreModeInitiators {
		for _, in := range h.Initiators {
			if in.PortName == "" {
				return e, h, "", fmt.Errorf("host %s has an initiator without a port name", h.Name)
			}
			e.Initiators = append(e.Initiators, psInitiator{PortName: in.PortName, PortType: string(in.PortType),
				ChapSingleUsername: in.ChapSingleUsername, ChapMutualUsername: in.ChapMutualUsername})
		}
		sort.Slice(e.Initiators, func(i, j int) bool { return e.Initiators[i].PortName < e.Initiators[j].PortName })
		var names []string
		for _, in := range e.Initiators {
			names = append(names, in.String())
		}
		return e, h, fmt.Sprintf("remove %d initiators from host %s: %s", len(e.Initiators), h.Name, strings.Join(names, ", ")), nil
	}
	maps, err := a.mappings(ctx, c, "host_id", h.ID)
	if err != nil {
		return e, h, "", err
	}
	for _, m := range maps {
		e.Attachments = append(e.Attachments, psAttachment{VolumeID: m.VolumeID, LUN: m.LogicalUnitNumber})
	}
	sort.Slice(e.Attachments, func(i, j int) bool { return e.Attachments[i].VolumeID < e.Attachments[j].VolumeID })
	summary := fmt.Sprintf("detach %d volumes from host %s", len(e.Attachments), h.Name)
	if h.HostGroupID != "" {
		rctx, cancel := a.reqCtx(ctx)
		g, err := c.GetHostGroup(rctx, h.HostGroupID)
		cancel()
		if err != nil {
			return e, h, "", fmt.Errorf("read host group %s: %w", h.HostGroupID, err)
		}
		e.HostGroup = &psHostGroup{ID: h.HostGroupID, Name: g.Name}
		summary += fmt.Sprintf(" and remove it from host group %s", g.Name)
	}
	return e, h, summary, nil
}

// Apply removes what the plan lists that is still there: one PATCH for
// the initiators, or one detach per attached volume and one host-group
// PATCH. Nothing left to remove means no write.
func (a *PowerStoreAdapter) Apply(ctx context.Context, plan arrayclients.Plan) error {
	fail := func(err error) error {
		if err == nil {
			return nil
		}
		return fmt.Errorf("powerstore array %s: apply fence of node %s (host %s): %w", a.cfg.Name, plan.Identity.Node, plan.Identity.ObjectName, err)
	}
	e, err := a.decodePlan(plan)
	if err != nil {
		return fail(err)
	}
	return fail(psClassify(a.with(ctx, func(c gopowerstore.Client) error {
		if err := a.applyNFS(ctx, c, e); err != nil {
			return err
		}
		if e.HostID == "" {
			return nil // an NFS client only
		}
		h, ok, err := a.getHost(ctx, c, e.HostID)
		if err != nil {
			return err
		}
		if !ok {
			return nil // the host is gone: nothing to remove
		}
		if e.Mode == arrayclients.PowerStoreModeInitiators {
			present := map[string]bool{}
			for _, in := range h.Initiators {
				present[in.PortName] = true
			}
			var remove []string
			for _, in := range e.Initiators {
				if present[in.PortName] {
					remove = append(remove, in.PortName)
				}
			}
			if len(remove) == 0 {
				return nil
			}
			rctx, cancel := a.reqCtx(ctx)
			defer cancel()
			if _, err := c.ModifyHost(rctx, &gopowerstore.HostModify{RemoveInitiators: &remove}, h.ID); err != nil {
				return fmt.Errorf("remove initiators %s: %w", strings.Join(remove, ", "), err)
			}
			return nil
		}
		mappings, err := a.mappings(ctx, c, "host_id", h.ID)
		if err != nil {
			return err
		}
		attached := map[string]bool{}
		for _, m := range mappings {
			attached[m.VolumeID] = true
		}
		// The plan's attachments, and each footprint volume with a cut
		// that the driver attached after the plan was read.
		detach := map[string]bool{}
		for _, at := range e.Attachments {
			detach[at.VolumeID] = true
		}
		for _, vc := range psBlockCuts(plan) {
			detach[vc.Object] = true
		}
		for _, vol := range slices.Sorted(maps.Keys(detach)) {
			if !attached[vol] {
				continue
			}
			rctx, cancel := a.reqCtx(ctx)
			_, err := c.DetachVolumeFromHost(rctx, h.ID, &gopowerstore.HostVolumeDetach{VolumeID: &vol})
			cancel()
			if err != nil && !psNotAttached(err) {
				return fmt.Errorf("detach volume %s: %w", vol, err)
			}
		}
		if e.HostGroup != nil && h.HostGroupID == e.HostGroup.ID {
			rctx, cancel := a.reqCtx(ctx)
			defer cancel()
			if _, err := c.ModifyHostGroup(rctx, &gopowerstore.HostGroupModify{RemoveHostIDs: []string{h.ID}}, e.HostGroup.ID); err != nil {
				return fmt.Errorf("remove host from host group %s: %w", e.HostGroup.Name, err)
			}
		}
		return nil
	})))
}

// verifyInitiators reads the plan's initiators back. restore is the
// scope of a restore read-back, nil for a fence read-back: then an
// initiator registered with the node's own host under a new name
// (psSameNode) is given back, not missing, and one registered with
// another node's host is missing. The host's own initiators are Remaining
// only in a fence read-back: in a restore they are what is given back
// (VerifyRestore counts them as the node's access).
func (a *PowerStoreAdapter) verifyInitiators(ctx context.Context, c gopowerstore.Client, since time.Time, e psEntries, h gopowerstore.Host, exists bool,
	restore *arrayclients.RestoreScope, v *arrayclients.Verification) error {
	have := map[string]gopowerstore.InitiatorInstance{}
	present := map[string]bool{}
	if exists {
		for _, in := range h.Initiators {
			have[in.PortName], present[in.PortName] = in, true
			if restore == nil { // given back is what a restore wants, not access it must not have
				v.Remaining = append(v.Remaining, fmt.Sprintf("initiator %s (%s) on host %s", in.PortName, in.PortType, h.Name))
			}
		}
	}
	var elsewhere map[string]psHolder
	if restore != nil {
		var err error
		if elsewhere, err = a.initiatorHolders(ctx, c, since, e, *restore, present); err != nil {
			return err
		}
	}
	// Once the node registered its own host under a new name, that host
	// holds what the node has now: an initiator of the plan on no host is
	// one the node no longer has, not one to add to the old host.
	reregistered := false
	for _, hd := range elsewhere {
		reregistered = reregistered || hd.same
	}
	for _, want := range e.Initiators {
		got, ok := have[want.PortName]
		if other, held := elsewhere[want.PortName]; held && !ok {
			if !other.same {
				v.Missing = append(v.Missing, fmt.Sprintf("%s: registered with host %s, which is not this node's (%s)", want, other.host.Name, other.why))
			}
			continue
		}
		if reregistered && !ok {
			continue
		}
		switch {
		case !exists:
			v.Missing = append(v.Missing, want.String()+": host "+e.HostName+" no longer exists")
		case !ok:
			v.Missing = append(v.Missing, want.String())
		case string(got.PortType) != want.PortType:
			v.Missing = append(v.Missing, want.String()+": port type differs")
		case psChap(want) || got.ChapSingleUsername == PowerStoreChapPlaceholderUser:
			if ok, why := psChapRestored(want, got, h.Name); !ok {
				v.Missing = append(v.Missing, why)
			}
		}
	}
	// The same port names registered on another host would give the node
	// its paths back: list every host to be sure.
	hosts, err := a.listHosts(ctx, c, since)
	if err != nil {
		return err
	}
	planned := map[string]bool{}
	for _, in := range e.Initiators {
		planned[in.PortName] = true
	}
	for _, other := range hosts {
		if other.ID == e.HostID {
			continue
		}
		var on []string
		for _, in := range other.Initiators {
			if planned[in.PortName] {
				on = append(on, in.PortName)
			}
		}
		if len(on) == 0 {
			continue
		}
		why, err := a.hostAccess(ctx, c, other)
		if err != nil {
			return err
		}
		if why == "" {
			// The node's paths reach a host through which no volume is
			// mapped: no access (a node back from a reboot, whose node
			// plugin registered it again, looks like this until a volume
			// is published to it, which the next read-back sees).
			continue
		}
		for _, p := range on {
			v.Remaining = append(v.Remaining, fmt.Sprintf("initiator %s is registered on host %s (%s)", p, other.Name, why))
		}
	}
	return nil
}

// hostAccess says what a host's initiators reach: the volumes mapped to
// the host, or its host group (whose mappings its members share), or ""
// when nothing is mapped through it. A node's initiators on such a host
// give it no volume; a mapping added later is found by the next
// read-back.
func (a *PowerStoreAdapter) hostAccess(ctx context.Context, c gopowerstore.Client, h gopowerstore.Host) (string, error) {
	if h.HostGroupID != "" {
		// A member's access is its group's; a group is the operator's,
		// never the driver's: count it as access without reading further.
		return "a member of host group " + h.HostGroupID, nil
	}
	maps, err := a.mappings(ctx, c, "host_id", h.ID)
	if err != nil {
		return "", fmt.Errorf("read what host %s reaches: %w", h.Name, err)
	}
	if len(maps) == 0 {
		return "", nil
	}
	vols := make([]string, 0, len(maps))
	for _, m := range maps {
		vols = append(vols, m.VolumeID)
	}
	slices.Sort(vols)
	return fmt.Sprintf("%d volume(s) mapped: %s", len(vols), strings.Join(vols, ", ")), nil
}

// verifyDetach reads the host's mappings back. skip names attachments of
// the plan an unfence leaves out on purpose (moved, not wanted): they are
// not missing.
func (a *PowerStoreAdapter) verifyDetach(ctx context.Context, c gopowerstore.Client, e psEntries, h gopowerstore.Host, exists bool,
	skip map[string]bool, v *arrayclients.Verification) error {
	if !exists {
		v.Missing = append(v.Missing, "host "+e.HostName+" no longer exists")
		return nil
	}
	maps, err := a.mappings(ctx, c, "host_id", h.ID)
	if err != nil {
		return err
	}
	attached := map[string]int64{}
	for _, m := range maps {
		attached[m.VolumeID] = m.LogicalUnitNumber
		v.Remaining = append(v.Remaining, fmt.Sprintf("volume %s attached to host %s at LUN %d", m.VolumeID, h.Name, m.LogicalUnitNumber))
	}
	// The host object lists its mappings too: an empty mapping listing
	// (an empty 2xx body decodes as no mappings) must not read as fenced.
	for _, m := range h.MappedHosts {
		if _, ok := attached[m.VolumeID]; !ok && m.VolumeID != "" {
			v.Remaining = append(v.Remaining, fmt.Sprintf("volume %s mapped to host %s", m.VolumeID, h.Name))
		}
	}
	if h.HostGroupID != "" {
		gm, err := a.mappings(ctx, c, "host_group_id", h.HostGroupID)
		if err != nil {
			return err
		}
		v.Remaining = append(v.Remaining, fmt.Sprintf("host %s is in host group %s with %d mapped volumes", h.Name, h.HostGroupID, len(gm)))
	}
	for _, at := range e.Attachments {
		if skip[at.VolumeID] {
			continue
		}
		if lun, ok := attached[at.VolumeID]; !ok || lun != at.LUN {
			v.Missing = append(v.Missing, fmt.Sprintf("volume %s at LUN %d", at.VolumeID, at.LUN))
		}
	}
	if e.HostGroup != nil && h.HostGroupID != e.HostGroup.ID {
		v.Missing = append(v.Missing, "membership of host group "+e.HostGroup.Name)
	}
	return nil
}

// psHolder is another host that has one of the plan's initiators.
type psHolder struct {
	host gopowerstore.Host
	// same: the host is the node's own, registered under a new name
	// (psSameNode); why says why not otherwise.
	same bool
	why  string
}

// psNotAttached reports whether a detach failed because the volume is not
// attached to the host (detached meanwhile): the array answers 400 with
// "Host is not attached to volume", and some arrays 422 (csi-powerstore
// PR #147 reads both as detached). Either way the read-back that follows
// decides whether the cut holds.
func psNotAttached(err error) bool {
	st := psStatus(err)
	return st == 400 || st == 422
}

// psHostBase is a csi-powerstore host name without its trailing -<IP>:
// <prefix>-<machine ID>. csi-powerstore names a node's host by its node
// ID, <prefix>-<content of nodeIDPath>-<IP> (dell/csi-powerstore
// pkg/node/node.go), and its controller also looks the host up by the
// node ID without the -<IP>. A name without an IP suffix is its own base.
func psHostBase(name string) string {
	if i := strings.LastIndex(name, "-"); i > 0 && net.ParseIP(name[i+1:]) != nil {
		return name[:i]
	}
	return name
}

// psSameNode reports whether other, a host that is not the plan's, is the
// node's own host registered under a new name. A node that comes back
// with a new IP gets a new node ID, <prefix>-<machine ID>-<new IP>, and
// csi-powerstore's node plugin registers a new host by that name with the
// node's initiators (dell/csi-powerstore pkg/node/node.go, which creates
// the host when none is found by the node ID); the initiators can then
// never be added back to the old host. It is the node's own host when its
// name has the plan's host's <prefix>-<machine ID> part and it is the
// host the node's identity, learned from its current CSINode ID, names.
// Otherwise it says why not.
func psSameNode(e psEntries, scope arrayclients.RestoreScope, other gopowerstore.Host) (bool, string) {
	if psHostBase(other.Name) != psHostBase(e.HostName) {
		return false, fmt.Sprintf("its name does not share %s's node-ID part %s", e.HostName, psHostBase(e.HostName))
	}
	switch l := scope.Learned; {
	case l == nil || l.ObjectID == "":
		return false, "the node's identity has not been learned from its current CSINode ID"
	case l.ObjectID != other.ID:
		return false, fmt.Sprintf("the node's current CSINode ID names host %s, not this one", l.ObjectName)
	}
	return true, ""
}

// initiatorHolders lists every host and returns, by port name, the hosts
// other than the plan's that have one of the plan's initiators, except
// those in skip (port names the plan's host has).
func (a *PowerStoreAdapter) initiatorHolders(ctx context.Context, c gopowerstore.Client, since time.Time, e psEntries, scope arrayclients.RestoreScope,
	skip map[string]bool) (map[string]psHolder, error) {
	planned := map[string]bool{}
	for _, in := range e.Initiators {
		if !skip[in.PortName] {
			planned[in.PortName] = true
		}
	}
	if len(planned) == 0 {
		return nil, nil
	}
	hosts, err := a.listHosts(ctx, c, since)
	if err != nil {
		return nil, err
	}
	out := map[string]psHolder{}
	for _, other := range hosts {
		if other.ID == e.HostID {
			continue
		}
		for _, in := range other.Initiators {
			if planned[in.PortName] {
				same, why := psSameNode(e, scope, other)
				out[in.PortName] = psHolder{host: other, same: same, why: why}
			}
		}
	}
	return out, nil
}

// givenBack reads where the plan's initiators that the plan's host lacks
// are registered now. When the node's own host under a new name has them
// (psSameNode), they are given back through it: it returns that host, and
// nothing is to be added to the plan's host. An initiator registered with
// another node's host is ErrIdentityConflict: fenced never moves
// initiators between hosts.
func (a *PowerStoreAdapter) givenBack(ctx context.Context, c gopowerstore.Client, e psEntries, h gopowerstore.Host, scope arrayclients.RestoreScope) (*gopowerstore.Host, error) {
	present := map[string]bool{}
	for _, in := range h.Initiators {
		present[in.PortName] = true
	}
	// A listing begun now or later: what the restore writes next rests on it.
	holders, err := a.initiatorHolders(ctx, c, time.Now(), e, scope, present)
	if err != nil {
		return nil, err
	}
	var conflicts []string
	var via *gopowerstore.Host
	for _, in := range e.Initiators {
		hd, ok := holders[in.PortName]
		switch {
		case !ok:
		case hd.same:
			via = &hd.host
		default:
			conflicts = append(conflicts, fmt.Sprintf("%s is registered with host %s (id %s), not with host %s (id %s): %s",
				in, hd.host.Name, hd.host.ID, e.HostName, e.HostID, hd.why))
		}
	}
	if len(conflicts) > 0 {
		return nil, fmt.Errorf("%w: %s; fenced does not move initiators between hosts: remove them from the other host or "+
			"unfence the node by hand", arrayclients.ErrIdentityConflict, strings.Join(conflicts, "; "))
	}
	return via, nil
}

// undoInitiators adds the plan's initiators the host lacks back to it:
// without CHAP as they were, with CHAP as placeholders (psPlaceholder)
// that the node plugin's next start gives its own credentials.
func (a *PowerStoreAdapter) undoInitiators(ctx context.Context, c gopowerstore.Client, e psEntries, h gopowerstore.Host) error {
	present := map[string]bool{}
	for _, in := range h.Initiators {
		present[in.PortName] = true
	}
	var add []gopowerstore.InitiatorCreateModify
	var chap []string
	for _, in := range e.Initiators {
		if present[in.PortName] {
			continue
		}
		if psChap(in) {
			m, err := psPlaceholder(in)
			if err != nil {
				return fmt.Errorf("initiator %s: %w", in.PortName, err)
			}
			add, chap = append(add, m), append(chap, in.PortName)
			continue
		}
		pn, pt := in.PortName, gopowerstore.InitiatorProtocolTypeEnum(in.PortType)
		add = append(add, gopowerstore.InitiatorCreateModify{PortName: &pn, PortType: &pt})
	}
	if len(add) == 0 {
		return nil
	}
	rctx, cancel := a.reqCtx(ctx)
	defer cancel()
	if _, err := c.ModifyHost(rctx, &gopowerstore.HostModify{AddInitiators: &add}, h.ID); err != nil {
		return fmt.Errorf("add %d initiators back: %w", len(add), err)
	}
	if len(chap) > 0 {
		a.logger.Info("CHAP initiators are back on the host under a placeholder no node can log in with; the restore completes when the CSI node plugin sets its own CHAP secret on them (at its start)",
			"array", a.cfg.Name, "host", h.Name, "initiators", chap, "chapUser", PowerStoreChapPlaceholderUser)
	}
	return nil
}

// undoDetach puts the host back in its host group and attaches the
// plan's volumes again at their LUNs, except those in skip.
func (a *PowerStoreAdapter) undoDetach(ctx context.Context, c gopowerstore.Client, e psEntries, h gopowerstore.Host, skip map[string]bool) error {
	if e.HostGroup != nil && h.HostGroupID != e.HostGroup.ID {
		if h.HostGroupID != "" {
			return fmt.Errorf("host %s is now in host group %s, not %s", h.Name, h.HostGroupID, e.HostGroup.Name)
		}
		rctx, cancel := a.reqCtx(ctx)
		_, err := c.ModifyHostGroup(rctx, &gopowerstore.HostGroupModify{AddHostIDs: []string{h.ID}}, e.HostGroup.ID)
		cancel()
		if err != nil {
			return fmt.Errorf("add host back to host group %s: %w", e.HostGroup.Name, err)
		}
	}
	maps, err := a.mappings(ctx, c, "host_id", h.ID)
	if err != nil {
		return err
	}
	attached := map[string]bool{}
	for _, m := range maps {
		attached[m.VolumeID] = true
	}
	for _, at := range e.Attachments {
		if attached[at.VolumeID] || skip[at.VolumeID] {
			continue
		}
		vol, lun := at.VolumeID, at.LUN
		rctx, cancel := a.reqCtx(ctx)
		_, err := c.AttachVolumeToHost(rctx, h.ID, &gopowerstore.HostVolumeAttach{VolumeID: &vol, LogicalUnitNumber: &lun})
		cancel()
		if err != nil && psStatus(err) != 422 { // 422: attached meanwhile
			return fmt.Errorf("attach volume %s at LUN %d: %w", vol, lun, err)
		}
	}
	return nil
}
