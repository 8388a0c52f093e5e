package arrayclients

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/dell/goisilon"
	apiv2 "github.com/dell/goisilon/api/v2"
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
}

// scPlanEntry is one client entry: the list it is in, its exact string and
// its position (Undo puts it back there, so list order is restored too).
type scPlanEntry struct {
	List  string `json:"list"`
	Value string `json:"value"`
	Index int    `json:"index"`
}

func (a *PowerScaleAdapter) checkIdentity(id Identity) (scKeys, error) {
	if id.Family != PowerScale || id.Array != a.cfg.Name {
		return scKeys{}, fmt.Errorf("%w: identity of %s array %s", ErrPlanMismatch, id.Family, id.Array)
	}
	keys, err := newSCKeys(id.Keys)
	if err != nil {
		return scKeys{}, fmt.Errorf("%w: identity keys: %w", ErrPlanMismatch, err)
	}
	return keys, nil
}

// planIdentity lists every export of the zone and records, for each, which of its
// four lists hold which of the node's strings. It refuses (wrapping
// ErrAmbiguousIdentity) when the node would keep access that removing its
// own strings cannot take away — an export open to all hosts, a subnet,
// netgroup or wildcard covering it — or when removing them would leave an
// export with no client restriction (which opens it to every host).
func (a *PowerScaleAdapter) planIdentity(ctx context.Context, id Identity) (Plan, error) {
	fail := func(err error) (Plan, error) {
		return Plan{}, fmt.Errorf("powerscale array %s: plan fence of node %s: %w", a.cfg.Name, id.Node, err)
	}
	keys, err := a.checkIdentity(id)
	if err != nil {
		return fail(err)
	}
	e := scEntries{Zone: a.zone, Keys: keys.all, Exports: []scPlanExport{}}
	var hazards []string
	count := 0
	err = a.with(ctx, func(c *goisilon.Client) error {
		exports, err := a.listExports(ctx, c)
		if err != nil {
			return err
		}
		for _, x := range exports {
			if x.open() {
				hazards = append(hazards, x.label()+" is open to every host")
				continue
			}
			pe := scPlanExport{ID: x.ID, Paths: x.Paths}
			left := 0
			for _, list := range scListNames {
				for i, v := range x.Lists[list] {
					switch {
					case keys.matches(v):
						pe.Entries = append(pe.Entries, scPlanEntry{List: list, Value: v, Index: i})
					case keys.hazard(v) != "":
						hazards = append(hazards, fmt.Sprintf("%s %s: %s", x.label(), list, keys.hazard(v)))
						left++
					default:
						left++
					}
				}
			}
			if len(pe.Entries) == 0 {
				continue
			}
			if left == 0 {
				hazards = append(hazards, x.label()+" lists only this node: removing it would open the export to every host")
				continue
			}
			e.Exports = append(e.Exports, pe)
			count += len(pe.Entries)
		}
		return nil
	})
	if err != nil {
		return fail(scClassify(err))
	}
	if len(hazards) > 0 {
		return fail(fmt.Errorf("%w: the node's access cannot be removed by client lists alone: %s",
			ErrAmbiguousIdentity, strings.Join(hazards, "; ")))
	}
	raw, err := json.Marshal(e)
	if err != nil {
		return fail(err)
	}
	return Plan{Array: a.cfg.Name, Family: PowerScale, Identity: id, Entries: raw,
		Summary:   fmt.Sprintf("remove %d client entries (%s) from %d exports of zone %s", count, strings.Join(keys.all, ", "), len(e.Exports), a.zone),
		CreatedAt: time.Now().UTC()}, nil
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
func (a *PowerScaleAdapter) Apply(ctx context.Context, plan Plan) error {
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
	return a.updateExport(ctx, c, pe.ID, changed)
}

// Verify lists every export of the zone: the node is fenced when no list
// of any export holds one of its strings and nothing else covers it. An
// export that no longer exists has nothing to restore.
func (a *PowerScaleAdapter) Verify(ctx context.Context, plan Plan) (Verification, error) {
	e, keys, err := a.decodePlan(plan)
	if err != nil {
		return Verification{}, fmt.Errorf("powerscale array %s: verify fence of node %s: %w", a.cfg.Name, plan.Identity.Node, err)
	}
	v := Verification{}
	err = a.with(ctx, func(c *goisilon.Client) error {
		exports, err := a.listExports(ctx, c)
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
		return nil
	})
	if err != nil {
		return Verification{}, fmt.Errorf("powerscale array %s: verify fence of node %s: %w", a.cfg.Name, plan.Identity.Node, scClassify(err))
	}
	v.Fenced = len(v.Remaining) == 0
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

// undoAll puts each missing entry back into exactly the list it was in, at
// its recorded position, one PUT per export that needs it.
func (a *PowerScaleAdapter) undoAll(ctx context.Context, plan Plan) error {
	e, _, err := a.decodePlan(plan)
	if err != nil {
		return fmt.Errorf("powerscale array %s: undo fence of node %s: %w", a.cfg.Name, plan.Identity.Node, err)
	}
	err = a.with(ctx, func(c *goisilon.Client) error {
		for _, pe := range e.Exports {
			if err := a.undoExport(ctx, c, pe, plan.Identity.Node); err != nil {
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

// undoExport puts one export's planned entries back under its lock.
func (a *PowerScaleAdapter) undoExport(ctx context.Context, c *goisilon.Client, pe scPlanExport, node string) error {
	defer a.lockExport(pe.ID)()
	x, ok, err := a.getExport(ctx, c, pe.ID)
	if err != nil {
		return err
	}
	if !ok {
		a.logger.Warn("export of the plan no longer exists; nothing to restore", "export", pe.ID, "node", node)
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
		return nil
	}
	return a.updateExport(ctx, c, pe.ID, changed)
}
