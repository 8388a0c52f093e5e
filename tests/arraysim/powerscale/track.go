package powerscale

import (
	"cmp"
	"slices"
	"strconv"

	"github.com/fenced-project/fenced/tests/arraysim/simcore"
)

// The collections of a Snapshot, tracked object by object for the audit
// (simcore.Tracker): every change to one of their objects touches it in
// s.changes. Zones are the Snapshot's other member.
const (
	collExports     = "exports"
	collClients     = "clients"
	collDirectories = "directories"
)

// exportID is an export's ID in its tracked collection.
func exportID(id int) string { return strconv.Itoa(id) }

// byNumber orders export IDs as numbers, as a Snapshot lists exports.
func byNumber(a, b string) int {
	x, _ := strconv.Atoi(a)
	y, _ := strconv.Atoi(b)
	return cmp.Compare(x, y)
}

// sources reads the tracked collections in a Snapshot's order: exports
// by ID, clients by IP, directories by path. The caller holds s.mu.
func (s *Sim) sources() []simcore.Source {
	return []simcore.Source{
		{
			Collection: simcore.Collection{Name: collExports, Compare: byNumber},
			IDs: func() []string {
				ids := make([]string, 0, len(s.exports))
				for id := range s.exports {
					ids = append(ids, exportID(id))
				}
				return ids
			},
			Get: func(id string) (any, string, bool) {
				n, err := strconv.Atoi(id)
				e, ok := s.exports[n]
				if err != nil || !ok {
					return nil, "", false
				}
				return e.state(), "", true
			},
		},
		simcore.MapSource(simcore.Collection{Name: collClients}, s.clients, func(c *client) any { return c.state() }, nil),
		{
			Collection: simcore.Collection{Name: collDirectories},
			IDs:        s.sortedDirsLocked,
			Get:        func(dir string) (any, string, bool) { return dir, "", s.dirs[dir] },
		},
	}
}

// TrackedCollections describes a Snapshot's lists (simcore.Tracker).
func (s *Sim) TrackedCollections() []simcore.Collection {
	s.mu.Lock()
	defer s.mu.Unlock()
	return simcore.Collections(s.sources())
}

// TrackChanges reports the zones and the objects changed since the last
// call (simcore.Tracker).
func (s *Sim) TrackChanges(all bool) simcore.Changes {
	s.mu.Lock()
	defer s.mu.Unlock()
	zones := make([]string, 0, len(s.zones))
	for z := range s.zones {
		zones = append(zones, z)
	}
	slices.Sort(zones)
	root := struct {
		Zones []string `json:"zones"`
	}{zones}
	return s.changes.Collect(all, root, s.sources())
}
