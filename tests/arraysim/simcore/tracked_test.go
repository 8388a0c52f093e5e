package simcore_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/tests/arraysim/simcore"
)

// objFamily is a generic Tracker: collections of JSON values by ID, and
// root members. POST /ops applies a list of ops (see op). Every kind of
// collection the audit distinguishes is there: keyed by "id" (until an op
// blanks or repeats one), keyed by "name" and empty as null, plain
// strings omitted when empty (compared by position), and objects without
// a key field in a numeric order of their own.
type objFamily struct {
	mu    sync.Mutex
	colls map[string]map[string]objEntry
	root  map[string]any
	log   simcore.ChangeLog
	// forget leaves changes of this collection unreported (a family bug).
	forget string
}

type objEntry struct {
	order string
	value any
}

// op sets (Value non-nil) or removes object ID of collection C, or, with
// Root, sets (or with a nil Value removes) a root member.
type op struct {
	C     string `json:"c,omitempty"`
	ID    string `json:"id,omitempty"`
	Order string `json:"order,omitempty"`
	Root  string `json:"root,omitempty"`
	Value any    `json:"value"`
}

var objCollections = []simcore.Collection{
	{Name: "items"},
	{Name: "people", Empty: simcore.EmptyNull},
	{Name: "paths", Empty: simcore.EmptyOmitted},
	{Name: "hosts", Compare: func(a, b string) int {
		x, _ := strconv.Atoi(a)
		y, _ := strconv.Atoi(b)
		return x - y
	}},
}

func newObjFamily() *objFamily {
	f := &objFamily{colls: map[string]map[string]objEntry{}, root: map[string]any{"version": "1"}}
	for _, c := range objCollections {
		f.colls[c.Name] = map[string]objEntry{}
	}
	return f
}

func (f *objFamily) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var ops []op
	if err := json.NewDecoder(r.Body).Decode(&ops); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, o := range ops {
		f.applyLocked(o)
	}
	w.WriteHeader(http.StatusNoContent)
}

func (f *objFamily) applyLocked(o op) {
	switch {
	case o.Root != "" && o.Value == nil:
		delete(f.root, o.Root)
	case o.Root != "":
		f.root[o.Root] = o.Value
	case o.Value == nil:
		delete(f.colls[o.C], o.ID)
	default:
		f.colls[o.C][o.ID] = objEntry{order: o.Order, value: o.Value}
	}
	if o.C != "" && o.C != f.forget {
		f.log.Touch(o.C, o.ID)
	}
}

func (f *objFamily) sortedLocked(name string) []string {
	c := slices.IndexFunc(objCollections, func(c simcore.Collection) bool { return c.Name == name })
	cmp := objCollections[c].Compare
	if cmp == nil {
		cmp = strings.Compare
	}
	m := f.colls[name]
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	order := func(id string) string {
		if o := m[id].order; o != "" {
			return o
		}
		return id
	}
	slices.SortFunc(ids, func(a, b string) int {
		if n := cmp(order(a), order(b)); n != 0 {
			return n
		}
		return strings.Compare(a, b)
	})
	return ids
}

func (f *objFamily) Snapshot() any {
	f.mu.Lock()
	defer f.mu.Unlock()
	doc := map[string]any{}
	for k, v := range f.root {
		doc[k] = v
	}
	for _, c := range objCollections {
		ids := f.sortedLocked(c.Name)
		if len(ids) == 0 {
			switch c.Empty {
			case simcore.EmptyNull:
				doc[c.Name] = nil
			case simcore.EmptyList:
				doc[c.Name] = []any{}
			}
			continue
		}
		list := make([]any, 0, len(ids))
		for _, id := range ids {
			list = append(list, f.colls[c.Name][id].value)
		}
		doc[c.Name] = list
	}
	return doc
}

func (f *objFamily) TrackedCollections() []simcore.Collection { return objCollections }

func (f *objFamily) TrackChanges(all bool) simcore.Changes {
	f.mu.Lock()
	defer f.mu.Unlock()
	root := map[string]any{}
	for k, v := range f.root {
		root[k] = v
	}
	var sources []simcore.Source
	for _, c := range objCollections {
		m := f.colls[c.Name]
		sources = append(sources, simcore.Source{Collection: c,
			IDs: func() []string { return f.sortedLocked(c.Name) },
			Get: func(id string) (any, string, bool) {
				e, ok := m[id]
				return e.value, e.order, ok
			}})
	}
	return f.log.Collect(all, root, sources)
}

// SetSignals sets "connected" of item host, outside any write.
func (f *objFamily) SetSignals(host string, s simcore.Signals) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.colls["items"][host]
	if !ok {
		return fmt.Errorf("no item %q", host)
	}
	v := map[string]any{}
	for k, x := range e.value.(map[string]any) {
		v[k] = x
	}
	if s.Connected != nil {
		v["connected"] = *s.Connected
	}
	f.applyLocked(op{C: "items", ID: host, Order: e.order, Value: v})
	return nil
}

func (f *objFamily) ErrorBody(status int, msg string) []byte {
	return []byte(`{"error":"` + msg + `"}`)
}

// untracked hides a family's Tracker methods: its server takes full
// snapshots, as every server did before per-object tracking.
type untracked struct{ simcore.Family }

// randomOps makes a batch of random ops: new, changed and removed
// objects, keys blanked or repeated, objects moved, root members changed.
func randomOps(rng *rand.Rand, f *objFamily) []op {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ops []op
	for range 1 + rng.IntN(3) {
		c := objCollections[rng.IntN(len(objCollections))].Name
		id := fmt.Sprintf("%s%d", c[:1], rng.IntN(12))
		if rng.IntN(8) == 0 {
			ops = append(ops, op{Root: []string{"version", "zones", "extra"}[rng.IntN(3)],
				Value: []any{nil, "2", []any{"a", "b"}, rng.IntN(3)}[rng.IntN(4)]})
			continue
		}
		if _, ok := f.colls[c][id]; ok && rng.IntN(4) == 0 {
			ops = append(ops, op{C: c, ID: id})
			continue
		}
		v := rng.IntN(4)
		var value any
		order := ""
		switch c {
		case "items":
			key := id
			switch rng.IntN(10) {
			case 0:
				key = "" // unkeyed: the list goes by position
			case 1:
				key = fmt.Sprintf("i%d", rng.IntN(12)) // maybe a duplicate
			}
			value = map[string]any{"id": key, "v": v, "tags": []any{"t", v}[:1+rng.IntN(2)]}
		case "people":
			value = map[string]any{"name": "p-" + id, "age": v}
			if rng.IntN(10) == 0 {
				value = map[string]any{"age": v}
			}
		case "paths":
			value = "/ifs/" + id
		case "hosts":
			order = strconv.Itoa(rng.IntN(40) - 10)
			value = map[string]any{"hostId": id, "n": v, "views": []any{"mv-" + id}}
		}
		ops = append(ops, op{C: c, ID: id, Order: order, Value: value})
	}
	return ops
}

func post(t *testing.T, srv *simcore.Server, ops []op) {
	t.Helper()
	body, err := json.Marshal(ops)
	require.NoError(t, err)
	w := httptest.NewRecorder()
	srv.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/ops", strings.NewReader(string(body))))
	require.Equal(t, http.StatusNoContent, w.Code)
}

// TestTrackedAuditMatchesFullSnapshots replays random writes on a tracked
// server and on one taking full snapshots: every audit entry must be the
// same, Changed and Change.
func TestTrackedAuditMatchesFullSnapshots(t *testing.T) {
	for seed := range uint64(8) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 1))
			tf, ff := newObjFamily(), newObjFamily()
			tracked := simcore.New("tracked", tf, nil)
			full := simcore.New("full", untracked{ff}, nil)
			require.True(t, tracked.Tracked())
			require.False(t, full.Tracked())
			for i := range 400 {
				ops := randomOps(rng, tf)
				post(t, tracked, ops)
				post(t, full, ops)
				if i%50 == 7 { // a change between writes is no write's
					sig := simcore.Signals{Connected: simcore.Bool(i%100 == 7)}
					require.Equal(t, ff.SetSignals("i3", sig), tf.SetSignals("i3", sig))
				}
			}
			ta, fa := tracked.Audit(), full.Audit()
			require.Len(t, ta, len(fa))
			changed := 0
			for i := range fa {
				require.Equal(t, fa[i].Change, ta[i].Change, "write %d: %s", i, fa[i].Body)
				require.Equal(t, fa[i].Changed, ta[i].Changed, "write %d", i)
				if fa[i].Changed {
					changed++
				}
			}
			assert.Greater(t, changed, 300, "the writes change the state")
			require.True(t, tracked.Tracked(), "tracking never failed")
		})
	}
}

// TestAuditCheckComparesEveryWrite turns the audit check on: it compares
// every write, and finds a family that does not report a change.
func TestAuditCheckComparesEveryWrite(t *testing.T) {
	f := newObjFamily()
	srv := simcore.New("checked", f, nil)
	srv.SetAuditCheck(simcore.AuditCheckLog)
	rng := rand.New(rand.NewPCG(42, 1))
	for range 200 {
		post(t, srv, randomOps(rng, f))
	}
	rep := srv.AuditCheckReport()
	assert.Equal(t, 200, rep.Checked)
	assert.Empty(t, rep.Mismatches)

	// A collection whose changes go unreported: the check says where.
	f.forget = "paths"
	post(t, srv, []op{{C: "paths", ID: "forgotten", Value: "/ifs/forgotten"}})
	rep = srv.AuditCheckReport()
	require.Len(t, rep.Mismatches, 1)
	m := rep.Mismatches[0]
	assert.Empty(t, m.Tracked)
	assert.Contains(t, m.Full, "$.paths")
	assert.NotEmpty(t, m.StaleAfter)
	last := srv.Audit()[len(srv.Audit())-1]
	assert.Equal(t, m.Full, last.Change, "the audit records what full snapshots give")

	// The copy is taken again: the next write is clean.
	f.forget = ""
	post(t, srv, []op{{C: "paths", ID: "next", Value: "/ifs/next"}})
	assert.Len(t, srv.AuditCheckReport().Mismatches, 1)

	// Panic mode fails the request.
	srv.SetAuditCheck(simcore.AuditCheckPanic)
	f.forget = "items"
	assert.Panics(t, func() { post(t, srv, []op{{C: "items", ID: "x", Value: map[string]any{"id": "x"}}}) })
}

// TestAuditCheckFromEnvironment reads the mode New starts with.
func TestAuditCheckFromEnvironment(t *testing.T) {
	t.Setenv(simcore.AuditCheckEnv, "log")
	f := newObjFamily()
	srv := simcore.New("env", f, nil)
	post(t, srv, []op{{C: "items", ID: "a", Value: map[string]any{"id": "a"}}})
	assert.Equal(t, 1, srv.AuditCheckReport().Checked)
	for in, want := range map[string]simcore.AuditCheck{"": simcore.AuditCheckOff, "off": simcore.AuditCheckOff,
		"log": simcore.AuditCheckLog, "panic": simcore.AuditCheckPanic} {
		got, err := simcore.ParseAuditCheck(in)
		require.NoError(t, err)
		assert.Equal(t, want, got, in)
	}
	_, err := simcore.ParseAuditCheck("yes")
	assert.ErrorContains(t, err, simcore.AuditCheckEnv)
}

// badTracker reports an object of a collection it did not declare.
type badTracker struct{ *objFamily }

func (b badTracker) TrackChanges(all bool) simcore.Changes {
	ch := b.objFamily.TrackChanges(all)
	ch.Objects = append(ch.Objects, simcore.Object{Collection: "nope", ID: "x", Value: 1})
	return ch
}

// TestTrackingFailureFallsBackToFullSnapshots: a report the server cannot
// use turns tracking off, and the audit is still right.
func TestTrackingFailureFallsBackToFullSnapshots(t *testing.T) {
	srv := simcore.New("bad", badTracker{newObjFamily()}, nil)
	post(t, srv, []op{{C: "items", ID: "a", Value: map[string]any{"id": "a"}}})
	assert.False(t, srv.Tracked())
	post(t, srv, []op{{C: "items", ID: "b", Value: map[string]any{"id": "b"}}})
	audit := srv.Audit()
	require.Len(t, audit, 2)
	assert.Equal(t, "+$.items[a]", audit[0].Change)
	assert.Equal(t, "+$.items[b]", audit[1].Change)
}
