package simcore

import (
	"cmp"
	"slices"
)

// Tracker is implemented by a family that records which objects of its
// Snapshot each change touches (per-object change tracking). The server
// then keeps the JSON of every object and, around a write, marshals and
// diffs only the objects the family reports instead of the whole state
// twice; Changed and Change come out as full snapshots give them (turn on
// SetAuditCheck to compare both on every write). A family that does not
// implement Tracker keeps full snapshots.
//
// Snapshot's JSON must be an object whose tracked collections (see
// TrackedCollections) are lists of the objects TrackChanges reports, and
// whose other members marshal from Changes.Root. Every change to what
// Snapshot shows, by an HTTP request, a Go method, SetSignals or the
// family itself, must be reported by the next TrackChanges: an object
// whose JSON depends on another (a derived field) is touched with it.
type Tracker interface {
	Family
	// TrackedCollections describes the tracked collections. It is called
	// once, when the server is made.
	TrackedCollections() []Collection
	// TrackChanges returns Snapshot's members that are not tracked
	// collections, and every object changed since the last call (every
	// object when all is true, or when the family lost track: Changes.All),
	// and forgets them.
	TrackChanges(all bool) Changes
}

// Collection is one tracked member of a Tracker's Snapshot: a list of
// objects, each with an ID unique in the collection.
type Collection struct {
	// Name is the member's JSON name in Snapshot.
	Name string
	// Empty is how Snapshot renders the member when it has no objects.
	Empty Empty
	// Compare orders the objects as Snapshot lists them, by their
	// Object.Order (nil: byte order); ties are broken by ID. The audit
	// compares lists whose objects it cannot key (see keyFields) by
	// position, so the order must be Snapshot's.
	Compare func(a, b string) int
}

// Empty is how a Snapshot renders a collection with no objects.
type Empty int

// The forms of an empty collection.
const (
	// EmptyList is "[]".
	EmptyList Empty = iota
	// EmptyNull is null (a nil slice).
	EmptyNull
	// EmptyOmitted leaves the member out (omitempty).
	EmptyOmitted
)

// Changes is what a Tracker reports to the server.
type Changes struct {
	// All is set when Objects holds every object of every collection;
	// cached objects not in it are gone.
	All bool
	// Root marshals to a JSON object with Snapshot's members that are not
	// tracked collections (nil: there are none). It is marshalled on every
	// write, so it should be small.
	Root any
	// Objects are the changed objects.
	Objects []Object
}

// Object is one object of a tracked collection.
type Object struct {
	Collection string
	ID         string
	// Order places the object in its collection (see Collection.Compare);
	// "" orders it by ID.
	Order string
	// Value is the object as Snapshot lists it (marshalled by the server
	// later, so it must not share mutable state with the family); nil when
	// the object is gone.
	Value any
}

// ObjectRef names one object of a tracked collection.
type ObjectRef struct {
	Collection string
	ID         string
}

// ChangeLog is a Tracker's record of the objects it changed since the
// server last asked. The family guards it with its own lock. The zero
// value is ready to use.
type ChangeLog struct {
	touched map[ObjectRef]struct{}
	all     bool
}

// Touch records that the objects ids of collection changed (were made,
// modified or removed).
func (l *ChangeLog) Touch(collection string, ids ...string) {
	if l.touched == nil {
		l.touched = map[ObjectRef]struct{}{}
	}
	for _, id := range ids {
		l.touched[ObjectRef{collection, id}] = struct{}{}
	}
}

// TouchAll records that anything may have changed: the next report holds
// every object.
func (l *ChangeLog) TouchAll() { l.all = true }

// Take returns what changed since the last Take and forgets it.
func (l *ChangeLog) Take() (refs []ObjectRef, all bool) {
	for r := range l.touched {
		refs = append(refs, r)
	}
	all = l.all
	l.touched, l.all = nil, false
	return refs, all
}

// Source reads one tracked collection of a family, under the family's
// lock, for ChangeLog.Collect.
type Source struct {
	Collection
	// IDs lists every object's ID.
	IDs func() []string
	// Get returns an object's Snapshot value and its Order; false when
	// there is no such object (any more).
	Get func(id string) (value any, order string, ok bool)
}

// Collections returns the collections of sources, for
// Tracker.TrackedCollections.
func Collections(sources []Source) []Collection {
	out := make([]Collection, 0, len(sources))
	for _, s := range sources {
		out = append(out, s.Collection)
	}
	return out
}

// Collect builds a Tracker's report from the log: root, and the objects
// the log holds (every object when all is true or the log says so), read
// through sources. It forgets what the log held. The caller holds the
// family's lock.
func (l *ChangeLog) Collect(all bool, root any, sources []Source) Changes {
	refs, lost := l.Take()
	ch := Changes{All: all || lost, Root: root}
	bySource := make(map[string]Source, len(sources))
	for _, s := range sources {
		bySource[s.Name] = s
	}
	if ch.All {
		refs = refs[:0]
		for _, s := range sources {
			for _, id := range s.IDs() {
				refs = append(refs, ObjectRef{s.Name, id})
			}
		}
	}
	slices.SortFunc(refs, func(a, b ObjectRef) int {
		return cmp.Or(cmp.Compare(a.Collection, b.Collection), cmp.Compare(a.ID, b.ID))
	})
	for _, r := range refs {
		o := Object{Collection: r.Collection, ID: r.ID}
		if s, ok := bySource[r.Collection]; ok {
			if v, order, ok := s.Get(r.ID); ok {
				o.Value, o.Order = v, order
			}
		}
		ch.Objects = append(ch.Objects, o)
	}
	return ch
}

// MapSource is a Source over a family's map of objects by ID: value gives
// an object's Snapshot value, order its Order (nil: by ID).
func MapSource[V any](c Collection, m map[string]V, value func(V) any, order func(V) string) Source {
	return Source{
		Collection: c,
		IDs: func() []string {
			ids := make([]string, 0, len(m))
			for id := range m {
				ids = append(ids, id)
			}
			return ids
		},
		Get: func(id string) (any, string, bool) {
			v, ok := m[id]
			if !ok {
				return nil, "", false
			}
			o := ""
			if order != nil {
				o = order(v)
			}
			return value(v), o, true
		},
	}
}
