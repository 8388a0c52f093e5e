package simcore

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// trackedState is the server's copy of a Tracker's snapshot, object by
// object, as JSON: what the last write left (the "before" of the next).
// Around a write it takes the family's report and diffs only the objects
// reported, giving the paths diffSnapshots gives for the whole documents
// (the document assembled from the copy is, byte for byte in every list
// and member, what json.Marshal(Snapshot()) gives). The server guards it
// with writeMu.
type trackedState struct {
	fam   Tracker
	colls map[string]*trackedColl
	// root holds the members of Changes.Root, undecoded.
	root  map[string][]byte
	built bool
}

// trackedColl is one collection: its objects by ID, in Snapshot's order,
// and what the audit keys them by.
type trackedColl struct {
	Collection
	byID  map[string]*trackedObj
	order []*trackedObj
	// byKey indexes the objects that have an audit key (elementKey);
	// unkeyed counts those that have none and dupKeys the keys more than
	// one object has. The list is diffed by key when both are zero.
	byKey   map[string][]*trackedObj
	unkeyed int
	dupKeys int
}

// trackedObj is one object's JSON and what the audit sees of it.
type trackedObj struct {
	id, order string
	raw       []byte
	key       string
	keyed     bool
}

// update is one reported object: before and after (nil: absent).
type update struct {
	old, new *trackedObj
}

func newTrackedState(fam Tracker) *trackedState {
	t := &trackedState{fam: fam, colls: map[string]*trackedColl{}}
	for _, c := range fam.TrackedCollections() {
		t.colls[c.Name] = &trackedColl{Collection: c, byID: map[string]*trackedObj{}, byKey: map[string][]*trackedObj{}}
	}
	return t
}

// refresh brings the copy up to date with the family without diffing:
// changes between writes are no write's. The first call copies every
// object.
func (t *trackedState) refresh() error {
	ch := t.fam.TrackChanges(!t.built)
	p, err := t.prepare(ch)
	if err != nil {
		return err
	}
	p.apply()
	t.built = true
	return nil
}

// diff takes the family's report of what a write changed, returns the
// paths that differ as diffSnapshots orders them, and updates the copy.
// On an error the copy is left as it was.
func (t *trackedState) diff() ([]string, error) {
	ch := t.fam.TrackChanges(false)
	p, err := t.prepare(ch)
	if err != nil {
		return nil, err
	}
	states := p.apply()
	blocks := map[string][]string{}
	var names []string
	for _, name := range unionKeys(p.rootBefore, p.rootAfter) {
		x, inB := p.rootBefore[name]
		y, inA := p.rootAfter[name]
		var out []string
		switch {
		case inB && inA:
			if !diffRaw("$."+name, x, y, &out) {
				return nil, fmt.Errorf("root member %s is not valid JSON", name)
			}
		case inB:
			out = []string{"-$." + name}
		default:
			out = []string{"+$." + name}
		}
		if len(out) > 0 {
			blocks[name], names = out, append(names, name)
		}
	}
	for name, st := range states {
		out, err := t.colls[name].diff("$."+name, st)
		if err != nil {
			return nil, err
		}
		if len(out) > 0 {
			blocks[name], names = out, append(names, name)
		}
	}
	sort.Strings(names)
	var paths []string
	for _, n := range names {
		paths = append(paths, blocks[n]...)
	}
	return paths, nil
}

// prepared is a report checked and marshalled, not yet applied.
type prepared struct {
	t                     *trackedState
	all                   bool
	rootBefore, rootAfter map[string][]byte
	objs                  map[string]map[string]*trackedObj // collection -> ID -> new (nil: gone)
}

// prepare marshals a report and checks it against the collections.
func (t *trackedState) prepare(ch Changes) (*prepared, error) {
	p := &prepared{t: t, all: ch.All, rootBefore: t.root, rootAfter: map[string][]byte{}, objs: map[string]map[string]*trackedObj{}}
	if ch.Root != nil {
		raw, err := json.Marshal(ch.Root)
		if err != nil {
			return nil, fmt.Errorf("marshal root: %w", err)
		}
		m, ok := objectMembers(raw)
		if !ok {
			return nil, fmt.Errorf("root %s is not a JSON object", truncate(raw))
		}
		p.rootAfter = m
	}
	for name := range p.rootAfter {
		if _, ok := t.colls[name]; ok {
			return nil, fmt.Errorf("root member %s is a tracked collection", name)
		}
	}
	if ch.All {
		for name := range t.colls {
			p.objs[name] = map[string]*trackedObj{}
		}
	}
	for _, o := range ch.Objects {
		c, ok := t.colls[o.Collection]
		if !ok {
			return nil, fmt.Errorf("object %s of collection %s: no such tracked collection", o.ID, o.Collection)
		}
		if p.objs[c.Name] == nil {
			p.objs[c.Name] = map[string]*trackedObj{}
		}
		if o.Value == nil {
			p.objs[c.Name][o.ID] = nil
			continue
		}
		raw, err := json.Marshal(o.Value)
		if err != nil {
			return nil, fmt.Errorf("marshal %s %s: %w", o.Collection, o.ID, err)
		}
		obj := &trackedObj{id: o.ID, order: o.Order, raw: raw}
		if obj.order == "" {
			obj.order = o.ID
		}
		obj.key, obj.keyed = elementKey(raw)
		p.objs[c.Name][o.ID] = obj
	}
	return p, nil
}

// collState is what apply changed in one collection.
type collState struct {
	updates     []update
	keyedBefore bool
	countBefore int
}

// apply puts the prepared objects into the copy and returns, by
// collection, what changed.
func (p *prepared) apply() map[string]collState {
	t := p.t
	t.root = p.rootAfter
	out := map[string]collState{}
	for name, objs := range p.objs {
		c := t.colls[name]
		st := collState{keyedBefore: c.keyed(), countBefore: len(c.byID)}
		if p.all {
			for id := range c.byID {
				if _, ok := objs[id]; !ok {
					objs[id] = nil
				}
			}
		}
		ids := make([]string, 0, len(objs))
		for id := range objs {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			u := update{old: c.byID[id], new: objs[id]}
			if u.old == nil && u.new == nil {
				continue
			}
			if u.old != nil {
				c.remove(u.old)
			}
			if u.new != nil {
				c.insert(u.new)
			}
			st.updates = append(st.updates, u)
		}
		out[name] = st
	}
	return out
}

// keyed reports whether the audit diffs the collection's list by key.
func (c *trackedColl) keyed() bool { return c.unkeyed == 0 && c.dupKeys == 0 }

// compareObj orders objects as Snapshot lists them.
func (c *trackedColl) compareObj(a, b *trackedObj) int {
	var n int
	if c.Compare != nil {
		n = c.Compare(a.order, b.order)
	} else {
		n = strings.Compare(a.order, b.order)
	}
	if n != 0 {
		return n
	}
	return strings.Compare(a.id, b.id)
}

// position is where o is (or would go) in c.order.
func (c *trackedColl) position(o *trackedObj) (int, bool) {
	return slices.BinarySearchFunc(c.order, o, c.compareObj)
}

func (c *trackedColl) insert(o *trackedObj) {
	c.byID[o.id] = o
	i, _ := c.position(o)
	c.order = slices.Insert(c.order, i, o)
	if !o.keyed {
		c.unkeyed++
		return
	}
	if len(c.byKey[o.key]) == 1 {
		c.dupKeys++
	}
	c.byKey[o.key] = append(c.byKey[o.key], o)
}

func (c *trackedColl) remove(o *trackedObj) {
	delete(c.byID, o.id)
	if i, ok := c.position(o); ok {
		c.order = slices.Delete(c.order, i, i+1)
	}
	if !o.keyed {
		c.unkeyed--
		return
	}
	same := slices.DeleteFunc(c.byKey[o.key], func(x *trackedObj) bool { return x == o })
	switch len(same) {
	case 0:
		delete(c.byKey, o.key)
	case 1:
		c.dupKeys--
		c.byKey[o.key] = same
	default:
		c.byKey[o.key] = same
	}
}

// diff returns the paths under path that the updates changed, as
// diffRaw gives them for the collection's whole lists.
func (c *trackedColl) diff(path string, st collState) ([]string, error) {
	var changed []update
	for _, u := range st.updates {
		if u.old == nil || u.new == nil || !bytes.Equal(u.old.raw, u.new.raw) || u.old.order != u.new.order {
			changed = append(changed, u)
		}
	}
	if len(changed) == 0 {
		return nil, nil
	}
	before, after := c.form(st.countBefore), c.form(len(c.byID))
	switch {
	case before == EmptyOmitted && after == EmptyOmitted:
		return nil, nil
	case before == EmptyOmitted:
		return []string{"+" + path}, nil
	case after == EmptyOmitted:
		return []string{"-" + path}, nil
	case before == EmptyNull && after == EmptyNull:
		return nil, nil
	case before == EmptyNull || after == EmptyNull:
		return []string{path}, nil
	}
	var out []string
	var ok bool
	switch {
	case st.keyedBefore && c.keyed():
		ok = c.diffKeyed(path, st.updates, changed, &out)
	case samePlaces(changed):
		ok = c.diffPlaces(path, changed, &out)
	default:
		ok = diffRaw(path, c.list(c.beforeOrder(st.updates)), c.list(c.order), &out)
	}
	if !ok {
		return nil, fmt.Errorf("collection %s is not valid JSON", c.Name)
	}
	return out, nil
}

// form is how the collection renders with count objects: as a list
// (EmptyList) or its empty form.
func (c *trackedColl) form(count int) Empty {
	if count > 0 {
		return EmptyList
	}
	return c.Empty
}

// diffKeyed diffs a list keyed on both sides: only the keys the changed
// objects had or have can differ.
func (c *trackedColl) diffKeyed(path string, all, changed []update, out *[]string) bool {
	updated := make(map[string]bool, len(all))
	oldByKey := map[string]*trackedObj{}
	for _, u := range all {
		if u.old != nil {
			updated[u.old.id] = true
			if _, seen := oldByKey[u.old.key]; !seen {
				oldByKey[u.old.key] = u.old
			}
		}
		if u.new != nil {
			updated[u.new.id] = true
		}
	}
	keys := map[string]bool{}
	for _, u := range changed {
		if u.old != nil {
			keys[u.old.key] = true
		}
		if u.new != nil {
			keys[u.new.key] = true
		}
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	for _, k := range sorted {
		b := oldByKey[k]
		var a *trackedObj
		for _, o := range c.byKey[k] {
			a = o
			if b == nil && !updated[o.id] {
				b = o // unchanged: the same before
			}
		}
		at := path + "[" + k + "]"
		switch {
		case b != nil && a != nil:
			if !diffRaw(at, b.raw, a.raw, out) {
				return false
			}
		case b != nil:
			*out = append(*out, "-"+at)
		case a != nil:
			*out = append(*out, "+"+at)
		}
	}
	return true
}

// samePlaces reports whether the changed objects existed before and after
// at the same place in the order, so every other object kept its index.
func samePlaces(changed []update) bool {
	for _, u := range changed {
		if u.old == nil || u.new == nil || u.old.order != u.new.order {
			return false
		}
	}
	return true
}

// diffPlaces diffs a list by position when no object moved.
func (c *trackedColl) diffPlaces(path string, changed []update, out *[]string) bool {
	type placed struct {
		i int
		u update
	}
	ps := make([]placed, 0, len(changed))
	for _, u := range changed {
		i, _ := c.position(u.new)
		ps = append(ps, placed{i, u})
	}
	slices.SortFunc(ps, func(a, b placed) int { return a.i - b.i })
	for _, p := range ps {
		if !diffRaw(path+"["+strconv.Itoa(p.i)+"]", p.u.old.raw, p.u.new.raw, out) {
			return false
		}
	}
	return true
}

// beforeOrder is the collection's order before the updates.
func (c *trackedColl) beforeOrder(updates []update) []*trackedObj {
	changed := make(map[*trackedObj]bool, len(updates))
	var olds []*trackedObj
	for _, u := range updates {
		if u.new != nil {
			changed[u.new] = true
		}
		if u.old != nil {
			olds = append(olds, u.old)
		}
	}
	out := make([]*trackedObj, 0, len(c.order)+len(olds))
	for _, o := range c.order {
		if !changed[o] {
			out = append(out, o)
		}
	}
	out = append(out, olds...)
	slices.SortFunc(out, c.compareObj)
	return out
}

// list is the JSON list of objs.
func (c *trackedColl) list(objs []*trackedObj) []byte {
	n := 2
	for _, o := range objs {
		n += len(o.raw) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, '[')
	for i, o := range objs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, o.raw...)
	}
	return append(b, ']')
}

// document assembles the whole snapshot from the copy: what the audit
// would have marshalled (members in another order, which the diff does
// not see).
func (t *trackedState) document() []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	member := func(name string, raw []byte) {
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		n, _ := json.Marshal(name)
		b.Write(n)
		b.WriteByte(':')
		b.Write(raw)
	}
	for _, name := range slices.Sorted(maps.Keys(t.root)) {
		member(name, t.root[name])
	}
	for _, name := range slices.Sorted(maps.Keys(t.colls)) {
		c := t.colls[name]
		switch c.form(len(c.byID)) {
		case EmptyOmitted:
		case EmptyNull:
			member(name, []byte("null"))
		default:
			member(name, c.list(c.order))
		}
	}
	b.WriteByte('}')
	return b.Bytes()
}

// truncate shortens raw JSON for an error message.
func truncate(raw []byte) string {
	if len(raw) > 64 {
		return string(raw[:64]) + "..."
	}
	return string(raw)
}
