package powerscale

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/dell/goisilon"
	apiv2 "github.com/dell/goisilon/api/v2"

	"github.com/fenced-project/fenced/arrayclients"
)

// scEntries is the PowerScale part of a Plan.
type scEntries struct {
	Zone string `json:"zone"`
	// Keys are the node's export-client strings.
	Keys    []string       `json:"keys"`
	Exports []scPlanExport `json:"exports"`
}

// scPlanExport is what a fence removes from one export.
type scPlanExport struct {
	ID      int           `json:"id"`
	Paths   []string      `json:"paths"`
	Entries []scPlanEntry `json:"entries"`
	// Others are the export's other client entries when the plan was read,
	// so that an unfence can tell a client that came since (the export
	// moved). OthersRecorded tells an empty list from a plan written
	// before it was kept (ledger v1).
	Others         []string `json:"others,omitempty"`
	OthersRecorded bool     `json:"othersRecorded,omitempty"`
}

// scPlanEntry is one client entry: the list it is in, its exact string and
// its position (Undo puts it back there, so list order is restored too).
type scPlanEntry struct {
	List  string `json:"list"`
	Value string `json:"value"`
	Index int    `json:"index"`
}

func (a *PowerScaleAdapter) checkIdentity(id arrayclients.Identity) (scKeys, error) {
	if id.Family != arrayclients.PowerScale || id.Array != a.cfg.Name {
		return scKeys{}, fmt.Errorf("%w: identity of %s array %s", arrayclients.ErrPlanMismatch, id.Family, id.Array)
	}
	keys, err := newSCKeys(id.Keys)
	if err != nil {
		return scKeys{}, fmt.Errorf("%w: identity keys: %w", arrayclients.ErrPlanMismatch, err)
	}
	return keys, nil
}

// Plan lists every export of the zone (a listing shared with the plans and
// read-backs under way: listExportsSince) and records, for each, which of its
// four lists hold which of the node's strings; then it reads each
// footprint volume's export by ID for its cut or gap. It refuses (wrapping
// ErrAmbiguousIdentity) when the node would keep access that removing its
// own strings cannot take away — an export open to all hosts, a subnet,
// netgroup or wildcard covering it — or when removing them would leave an
// export with no client restriction (which opens it to every host).
func (a *PowerScaleAdapter) Plan(ctx context.Context, id arrayclients.Identity, vols []arrayclients.VolumeRef) (arrayclients.Plan, error) {
	ctx = arrayclients.WithIsilonLogger(ctx, a.logger)
	fail := func(err error) (arrayclients.Plan, error) {
		return arrayclients.Plan{}, fmt.Errorf("powerscale array %s: plan fence of node %s: %w", a.cfg.Name, id.Node, err)
	}
	keys, err := a.checkIdentity(id)
	if err != nil {
		return fail(err)
	}
	e := scEntries{Zone: a.zone, Keys: keys.all, Exports: []scPlanExport{}}
	var hazards []string
	var cuts []arrayclients.VolumeCut
	start := time.Now()
	err = a.with(ctx, func(c *goisilon.Client) error {
		exports, err := a.listExportsSince(ctx, c, start)
		if err != nil {
			return err
		}
		for _, x := range exports {
			pe, hz := scPlanExportOf(x, keys)
			hazards = append(hazards, hz...)
			if len(hz) > 0 || len(pe.Entries) == 0 {
				continue
			}
			a.addPeerOthers(&pe, keys)
			e.Exports = append(e.Exports, pe)
		}
		for _, v := range vols {
			vc, pe, err := a.planVolume(ctx, c, id, keys, v)
			if err != nil {
				return err
			}
			if pe != nil && !slices.ContainsFunc(e.Exports, func(x scPlanExport) bool { return x.ID == pe.ID }) {
				e.Exports = append(e.Exports, *pe) // what Apply removes, even if the listing missed it
			}
			cuts = append(cuts, vc)
		}
		return nil
	})
	if err != nil {
		return fail(scClassify(err))
	}
	if len(hazards) > 0 {
		return fail(fmt.Errorf("%w: the node's access cannot be removed by client lists alone: %s",
			arrayclients.ErrAmbiguousIdentity, strings.Join(hazards, "; ")))
	}
	slices.SortFunc(e.Exports, func(x, y scPlanExport) int { return cmp.Compare(x.ID, y.ID) })
	count := 0
	for _, pe := range e.Exports {
		count += len(pe.Entries)
	}
	raw, err := json.Marshal(e)
	if err != nil {
		return fail(err)
	}
	return arrayclients.Plan{Array: a.cfg.Name, Family: arrayclients.PowerScale, Identity: id, Entries: raw, Volumes: cuts,
		Summary:   fmt.Sprintf("remove %d client entries (%s) from %d exports of zone %s", count, strings.Join(keys.all, ", "), len(e.Exports), a.zone),
		CreatedAt: time.Now().UTC()}, nil
}

// scExportID is a footprint volume's export ID, or false when the object
// is not one.
func scExportID(v arrayclients.VolumeRef) (int, bool) {
	n, err := strconv.Atoi(v.Object)
	return n, err == nil && n > 0 && strconv.Itoa(n) == v.Object
}

// planVolume reads one footprint volume's export by ID and decides its
// cut: the node's entries (returned as pe, to be removed), or a gap.
func (a *PowerScaleAdapter) planVolume(ctx context.Context, c *goisilon.Client, id arrayclients.Identity, keys scKeys, v arrayclients.VolumeRef) (arrayclients.VolumeCut, *scPlanExport, error) {
	vc := arrayclients.VolumeCut{VolumeRef: v}
	if _, gap := a.Cover(id, v); gap != nil {
		vc.Gap = gap
		return vc, nil, nil
	}
	n, ok := scExportID(v)
	if !ok {
		vc.Gap = &arrayclients.Gap{Reason: arrayclients.GapVolumeNotFound, Detail: fmt.Sprintf("%s: %q is not a PowerScale export ID", v.Volume, v.Object)}
		return vc, nil, nil
	}
	x, found, err := a.getExport(ctx, c, n)
	if err != nil {
		return vc, nil, err
	}
	if !found {
		vc.Gap = &arrayclients.Gap{Reason: arrayclients.GapVolumeNotFound, Detail: fmt.Sprintf("%s: PowerScale %s has no export %d in zone %s", v.Volume, a.cfg.Name, n, a.zone)}
		return vc, nil, nil
	}
	pe, hazards := scPlanExportOf(x, keys)
	vc.Holders = scHolders(x, keys)
	switch {
	case len(hazards) > 0:
		vc.Holders = nil
		vc.Gap = &arrayclients.Gap{Reason: arrayclients.GapNotFenceable, Detail: fmt.Sprintf("%s: %s", v.Volume, strings.Join(hazards, "; "))}
	case len(pe.Entries) > 0:
		vc.Cut = arrayclients.CutExportClients
		a.addPeerOthers(&pe, keys)
		return vc, &pe, nil
	case len(vc.Holders) == 0 || !v.Attached:
		vc.Cut = arrayclients.CutNotMapped
	default:
		vc.Gap = &arrayclients.Gap{Reason: arrayclients.GapOtherIdentity, Detail: fmt.Sprintf("%s: %s lists %s but none of the node's strings (%s), "+
			"yet Kubernetes says it is attached to the node", v.Volume, x.label(), strings.Join(vc.Holders, ", "), strings.Join(keys.all, ", "))}
	}
	return vc, nil, nil
}

// scPlanExportOf records what fencing removes from one export: the
// node's entries, with the export's other entries. hazards say why the
// node would keep access that removing its own strings cannot take away
// (open to all hosts, a subnet, netgroup or wildcard covering it), or why
// removing them would open the export to every host.
func scPlanExportOf(x scExport, keys scKeys) (pe scPlanExport, hazards []string) {
	if x.open() {
		return scPlanExport{ID: x.ID, Paths: x.Paths}, []string{x.label() + " is open to every host"}
	}
	pe = scPlanExport{ID: x.ID, Paths: x.Paths, Others: []string{}, OthersRecorded: true}
	for _, list := range scListNames {
		for i, v := range x.Lists[list] {
			switch {
			case keys.matches(v):
				pe.Entries = append(pe.Entries, scPlanEntry{List: list, Value: v, Index: i})
				continue
			case keys.hazard(v) != "":
				hazards = append(hazards, fmt.Sprintf("%s %s: %s", x.label(), list, keys.hazard(v)))
			}
			if !slices.ContainsFunc(pe.Others, func(o string) bool { return strings.EqualFold(o, v) }) {
				pe.Others = append(pe.Others, v)
			}
		}
	}
	if len(pe.Entries) > 0 && len(pe.Others) == 0 {
		hazards = append(hazards, x.label()+" lists only this node: removing it would open the export to every host")
	}
	return pe, hazards
}

// addPeerOthers counts among an export's other clients the entries that
// other nodes' fences have out of it: they were there before those fences
// and come back with their unfences, so they are not new clients.
func (a *PowerScaleAdapter) addPeerOthers(pe *scPlanExport, keys scKeys) {
	for _, v := range a.peerEntriesOf(pe.ID, keys) {
		if !slices.ContainsFunc(pe.Others, func(o string) bool { return strings.EqualFold(o, v) }) {
			pe.Others = append(pe.Others, v)
		}
	}
}

// scHolders are the export's client entries that give it to someone other
// than the node: every entry but the node's own strings and the
// localhost entries csi-isilon keeps.
func scHolders(x scExport, keys scKeys) []string {
	var out []string
	for _, list := range scListNames {
		for _, v := range x.Lists[list] {
			if keys.matches(v) || protectedExportClients[strings.ToLower(v)] ||
				slices.ContainsFunc(out, func(o string) bool { return strings.EqualFold(o, v) }) {
				continue
			}
			out = append(out, v)
		}
	}
	return out
}

// scNodeAccess reports whether the export as read lets the node mount it:
// it lists one of the node's strings, a subnet, netgroup or wildcard
// covering it, or no client at all.
func scNodeAccess(x scExport, keys scKeys) bool {
	if x.open() {
		return true
	}
	for _, list := range scListNames {
		for _, v := range x.Lists[list] {
			if keys.matches(v) || keys.hazard(v) != "" {
				return true
			}
		}
	}
	return false
}

// updateExport writes the changed lists of an export (PUT is a partial
// update: lists not sent stay as they are).
func (a *PowerScaleAdapter) updateExport(ctx context.Context, c *goisilon.Client, id int, lists map[string][]string) error {
	x := &apiv2.Export{ID: id}
	for name, l := range lists {
		l := append([]string{}, l...)
		switch name {
		case "clients":
			x.Clients = &l
		case "root_clients":
			x.RootClients = &l
		case "read_write_clients":
			x.ReadWriteClients = &l
		case "read_only_clients":
			x.ReadOnlyClients = &l
		}
	}
	// ignore_unresolvable_hosts: a node that is down may not resolve.
	if err := apiv2.ExportUpdateWithZone(ctx, c.API, x, a.zone, true); err != nil {
		return fmt.Errorf("update export %d: %w", id, scSafe(err))
	}
	return nil
}

// Apply removes exactly the plan's entries (never anything else, never the
// localhost entries) from each export that still has them, one PUT per
// export; an export with nothing left to remove gets no write.
func (a *PowerScaleAdapter) Apply(ctx context.Context, plan arrayclients.Plan) error {
	ctx = arrayclients.WithIsilonLogger(ctx, a.logger)
	e, _, err := a.decodePlan(plan)
	if err != nil {
		return fmt.Errorf("powerscale array %s: apply fence of node %s: %w", a.cfg.Name, plan.Identity.Node, err)
	}
	err = a.with(ctx, func(c *goisilon.Client) error {
		for _, pe := range e.Exports {
			if err := a.applyExport(ctx, c, pe); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("powerscale array %s: apply fence of node %s: %w", a.cfg.Name, plan.Identity.Node, scClassify(err))
	}
	return nil
}

// applyExport removes one export's planned entries under its lock.
func (a *PowerScaleAdapter) applyExport(ctx context.Context, c *goisilon.Client, pe scPlanExport) error {
	defer a.lockExport(pe.ID)()
	x, ok, err := a.getExport(ctx, c, pe.ID)
	if err != nil {
		return err
	}
	if !ok {
		return nil
	}
	remove := map[string]map[string]bool{}
	for _, en := range pe.Entries {
		if remove[en.List] == nil {
			remove[en.List] = map[string]bool{}
		}
		remove[en.List][en.Value] = true
	}
	changed := map[string][]string{}
	for list, drop := range remove {
		kept := []string{}
		for _, v := range x.Lists[list] {
			if !drop[v] || protectedExportClients[strings.ToLower(v)] {
				kept = append(kept, v)
			}
		}
		if len(kept) != len(x.Lists[list]) {
			changed[list] = kept
			x.Lists[list] = kept
		}
	}
	if len(changed) == 0 {
		return nil
	}
	if x.open() {
		return fmt.Errorf("%s: removing the node would open it to every host; not changed", x.label())
	}
	// Noted before the write, so that a plan read while it lands already
	// counts them; forgotten again if the write fails.
	a.notePeerEntries(pe.ID, pe.Entries, true)
	if err := a.updateExport(ctx, c, pe.ID, changed); err != nil {
		a.notePeerEntries(pe.ID, pe.Entries, false)
		return err
	}
	return nil
}

// Verify lists every export of the zone (a listing begun after its start,
// perhaps shared: listExportsSince): the node is fenced when no list
// of any export holds one of its strings and nothing else covers it, and
// no footprint volume's export, read again by ID, lets the node mount it.
// Its Restored only compares the plan with the listing; VerifyRestore is
// the restore read-back.
func (a *PowerScaleAdapter) Verify(ctx context.Context, plan arrayclients.Plan) (arrayclients.Verification, error) {
	ctx = arrayclients.WithIsilonLogger(ctx, a.logger)
	e, keys, err := a.decodePlan(plan)
	if err != nil {
		return arrayclients.Verification{}, fmt.Errorf("powerscale array %s: verify fence of node %s: %w", a.cfg.Name, plan.Identity.Node, err)
	}
	v := arrayclients.Verification{}
	start := time.Now()
	err = a.with(ctx, func(c *goisilon.Client) error {
		exports, err := a.listExportsSince(ctx, c, start)
		if err != nil {
			return err
		}
		byID := map[int]scExport{}
		for _, x := range exports {
			byID[x.ID] = x
			if x.open() {
				v.Remaining = append(v.Remaining, x.label()+" is open to every host")
			}
			for _, list := range scListNames {
				for _, val := range x.Lists[list] {
					if keys.matches(val) {
						v.Remaining = append(v.Remaining, fmt.Sprintf("%s %s lists %s", x.label(), list, val))
					} else if h := keys.hazard(val); h != "" {
						v.Remaining = append(v.Remaining, fmt.Sprintf("%s %s: %s", x.label(), list, h))
					}
				}
			}
		}
		for _, pe := range e.Exports {
			x, ok := byID[pe.ID]
			if !ok {
				continue
			}
			for _, en := range pe.Entries {
				if !scContains(x.Lists[en.List], en.Value) {
					v.Missing = append(v.Missing, fmt.Sprintf("%s %s: %s", x.label(), en.List, en.Value))
				}
			}
		}
		// Each footprint volume is read again by its export ID.
		for _, vc := range plan.Volumes {
			n, ok := scExportID(vc.VolumeRef)
			if vc.Cut == "" || vc.Gap != nil || !ok {
				continue
			}
			x, found, err := a.getExport(ctx, c, n)
			if err != nil {
				return err
			}
			v.Volumes = append(v.Volumes, scCheck(vc, x, found, keys))
		}
		return nil
	})
	if err != nil {
		return arrayclients.Verification{}, fmt.Errorf("powerscale array %s: verify fence of node %s: %w", a.cfg.Name, plan.Identity.Node, scClassify(err))
	}
	v.Fenced = len(v.Remaining) == 0 && !slices.ContainsFunc(v.Volumes, func(c arrayclients.VolumeCheck) bool { return c.NodeAccess })
	v.Restored = len(v.Missing) == 0
	v.CheckedAt = time.Now().UTC()
	return v, nil
}

func scContains(l []string, v string) bool {
	for _, x := range l {
		if x == v {
			return true
		}
	}
	return false
}

// scCheck is what an export as read shows of a footprint volume.
func scCheck(vc arrayclients.VolumeCut, x scExport, found bool, keys scKeys) arrayclients.VolumeCheck {
	c := arrayclients.VolumeCheck{Volume: vc.Volume, Object: vc.Object}
	if !found {
		c.Note = "the export no longer exists"
		return c
	}
	c.NodeAccess = scNodeAccess(x, keys)
	c.Holders = scHolders(x, keys)
	return c
}

// scRestore is what an unfence does with one export of a plan or of the
// footprint, decided from the export as read now.
type scRestore struct {
	// give: Undo puts the node's entries back.
	give bool
	// forbidden: the node must not reach the export after the unfence.
	forbidden bool
	// note says why the export is left as it is.
	note string
}

// decideSCRestore applies docs/footprint.md "Unfence" to one export: pe is
// the plan's record of it (nil when the plan removed nothing), vc the
// footprint volume (nil for an export that is no Kubernetes volume).
func decideSCRestore(pe *scPlanExport, vc *arrayclients.VolumeCut, x scExport, found bool, keys scKeys, scope arrayclients.RestoreScope) scRestore {
	if !found {
		return scRestore{note: "the export no longer exists"}
	}
	holders := scHolders(x, keys)
	if vc == nil {
		// Not a Kubernetes volume: given back as it was, unless a client
		// that was not listed at the plan is listed now. A plan written
		// before the other clients were recorded cannot tell: any other
		// client may be one that took it.
		for _, h := range holders {
			if !pe.OthersRecorded || !slices.ContainsFunc(pe.Others, func(o string) bool { return strings.EqualFold(o, h) }) {
				return scRestore{note: "moved to " + h}
			}
		}
		return scRestore{give: true}
	}
	switch {
	case !scope.Wants(vc.Volume):
		return scRestore{forbidden: true, note: "not wanted by Kubernetes on the node"}
	case len(holders) > 0 && !vc.MultiNode:
		return scRestore{forbidden: true, note: "moved to " + strings.Join(holders, ", ")}
	case pe == nil:
		return scRestore{note: "the fence removed nothing: the export listed no client of the node"}
	}
	return scRestore{give: true}
}

// scFootprint returns the plan's footprint volumes that have a cut, by
// export ID.
func scFootprint(p arrayclients.Plan) map[int]arrayclients.VolumeCut {
	out := map[int]arrayclients.VolumeCut{}
	for _, vc := range p.Volumes {
		if n, ok := scExportID(vc.VolumeRef); ok && vc.Cut != "" && vc.Gap == nil {
			out[n] = vc
		}
	}
	return out
}

// Undo reconciles rather than replays: it puts the node's entries back
// into exactly the lists they were in, at their recorded positions, for a
// footprint volume only when Kubernetes still wants it on the node and no
// other client holds it (unless it is multi-node), for any other export
// unless a new client is listed. One PUT per export that needs it.
func (a *PowerScaleAdapter) Undo(ctx context.Context, plan arrayclients.Plan, scope arrayclients.RestoreScope) error {
	ctx = arrayclients.WithIsilonLogger(ctx, a.logger)
	e, keys, err := a.decodePlan(plan)
	if err != nil {
		return fmt.Errorf("powerscale array %s: undo fence of node %s: %w", a.cfg.Name, plan.Identity.Node, err)
	}
	fp := scFootprint(plan)
	err = a.with(ctx, func(c *goisilon.Client) error {
		for i := range e.Exports {
			var vc *arrayclients.VolumeCut
			if v, ok := fp[e.Exports[i].ID]; ok {
				vc = &v
			}
			if err := a.undoExport(ctx, c, &e.Exports[i], vc, keys, scope, plan.Identity.Node); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("powerscale array %s: undo fence of node %s: %w", a.cfg.Name, plan.Identity.Node, scClassify(err))
	}
	return nil
}

// undoExport puts one export's planned entries back under its lock, if
// the restore decision gives them back.
func (a *PowerScaleAdapter) undoExport(ctx context.Context, c *goisilon.Client, pe *scPlanExport, vc *arrayclients.VolumeCut, keys scKeys, scope arrayclients.RestoreScope, node string) error {
	defer a.lockExport(pe.ID)()
	x, ok, err := a.getExport(ctx, c, pe.ID)
	if err != nil {
		return err
	}
	d := decideSCRestore(pe, vc, x, ok, keys, scope)
	if !d.give {
		a.logger.Info("export left as it is", "export", pe.ID, "node", node, "why", d.note)
		a.forgetPeerEntries(pe)
		return nil
	}
	entries := append([]scPlanEntry(nil), pe.Entries...)
	sort.SliceStable(entries, func(i, j int) bool { return entries[i].Index < entries[j].Index })
	changed := map[string][]string{}
	for _, en := range entries {
		l := x.Lists[en.List]
		if scContains(l, en.Value) {
			continue
		}
		at := min(max(en.Index, 0), len(l))
		l = append(l[:at:at], append([]string{en.Value}, l[at:]...)...)
		x.Lists[en.List] = l
		changed[en.List] = l
	}
	if len(changed) == 0 {
		a.forgetPeerEntries(pe)
		return nil
	}
	if err := a.updateExport(ctx, c, pe.ID, changed); err != nil {
		return err
	}
	a.forgetPeerEntries(pe)
	return nil
}

// forgetPeerEntries drops an unfenced plan's entries from the record of
// what fences have out, once per export and plan: Undo may be retried.
func (a *PowerScaleAdapter) forgetPeerEntries(pe *scPlanExport) {
	a.peerMu.Lock()
	m := a.peerEntries[pe.ID]
	var out []scPlanEntry
	for _, en := range pe.Entries {
		if m[strings.ToLower(en.Value)] > 0 {
			out = append(out, en)
		}
	}
	a.peerMu.Unlock()
	a.notePeerEntries(pe.ID, out, false)
}

// VerifyRestore reads every export of the plan and of its footprint by
// ID: Restored when each entry Undo gives back is back and no footprint
// volume outside the scope (or moved, unless multi-node) lets the node
// mount it. Fenced is not evaluated.
func (a *PowerScaleAdapter) VerifyRestore(ctx context.Context, plan arrayclients.Plan, scope arrayclients.RestoreScope) (arrayclients.Verification, error) {
	ctx = arrayclients.WithIsilonLogger(ctx, a.logger)
	e, keys, err := a.decodePlan(plan)
	if err != nil {
		return arrayclients.Verification{}, fmt.Errorf("powerscale array %s: verify restore of node %s: %w", a.cfg.Name, plan.Identity.Node, err)
	}
	fp := scFootprint(plan)
	v := arrayclients.Verification{}
	err = a.with(ctx, func(c *goisilon.Client) error {
		planned := map[int]*scPlanExport{}
		for i := range e.Exports {
			pe := &e.Exports[i]
			planned[pe.ID] = pe
			x, found, err := a.getExport(ctx, c, pe.ID)
			if err != nil {
				return err
			}
			var vc *arrayclients.VolumeCut
			if fv, ok := fp[pe.ID]; ok {
				vc = &fv
			}
			if !decideSCRestore(pe, vc, x, found, keys, scope).give {
				continue
			}
			for _, en := range pe.Entries {
				if !scContains(x.Lists[en.List], en.Value) {
					v.Missing = append(v.Missing, fmt.Sprintf("%s %s: %s", x.label(), en.List, en.Value))
				}
			}
		}
		for _, vc := range plan.Volumes {
			n, ok := scExportID(vc.VolumeRef)
			if fv, in := fp[n]; !ok || !in || fv.Volume != vc.Volume {
				continue
			}
			x, found, err := a.getExport(ctx, c, n)
			if err != nil {
				return err
			}
			d := decideSCRestore(planned[n], &vc, x, found, keys, scope)
			check := scCheck(vc, x, found, keys)
			if check.Note == "" && !d.give {
				check.Note = d.note
			}
			if d.forbidden && check.NodeAccess {
				v.Remaining = append(v.Remaining, fmt.Sprintf("%s (volume %s) lets the node mount it: %s", x.label(), vc.Volume, d.note))
			}
			v.Volumes = append(v.Volumes, check)
		}
		return nil
	})
	if err != nil {
		return arrayclients.Verification{}, fmt.Errorf("powerscale array %s: verify restore of node %s: %w", a.cfg.Name, plan.Identity.Node, scClassify(err))
	}
	v.Restored = len(v.Missing) == 0 && len(v.Remaining) == 0
	v.CheckedAt = time.Now().UTC()
	return v, nil
}
