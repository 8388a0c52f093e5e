package powerstore

import "github.com/fenced-project/fenced/tests/arraysim/simcore"

// The collections of a Snapshot, tracked object by object for the audit
// (simcore.Tracker): every change to one of their objects touches it in
// s.changes, and a change to a host's group touches the group too (its
// member list is derived).
const (
	collHosts       = "hosts"
	collHostGroups  = "hostGroups"
	collVolumes     = "volumes"
	collMappings    = "mappings"
	collFileSystems = "fileSystems"
	collNFSExports  = "nfsExports"
)

// sources reads the tracked collections in a Snapshot's order (by name,
// mappings by ID). The caller holds s.mu.
func (s *Sim) sources() []simcore.Source {
	return []simcore.Source{
		simcore.MapSource(simcore.Collection{Name: collHosts}, s.hosts,
			func(h *host) any { return h.state() }, func(h *host) string { return h.Name }),
		simcore.MapSource(simcore.Collection{Name: collHostGroups}, s.groups,
			func(g *hostGroup) any { return s.groupStateLocked(g) }, func(g *hostGroup) string { return g.Name }),
		simcore.MapSource(simcore.Collection{Name: collVolumes}, s.volumes,
			func(v *volume) any { return v.state() }, func(v *volume) string { return v.Name }),
		simcore.MapSource(simcore.Collection{Name: collMappings}, s.mappings,
			func(m *mapping) any { return m.state() }, nil),
		simcore.MapSource(simcore.Collection{Name: collFileSystems, Empty: simcore.EmptyOmitted}, s.fileSystems,
			func(fs *fileSystem) any { return fs.state() }, func(fs *fileSystem) string { return fs.Name }),
		simcore.MapSource(simcore.Collection{Name: collNFSExports, Empty: simcore.EmptyOmitted}, s.exports,
			func(x *nfsExport) any { return x.state() }, func(x *nfsExport) string { return x.Name }),
	}
}

// TrackedCollections describes a Snapshot's lists (simcore.Tracker).
func (s *Sim) TrackedCollections() []simcore.Collection {
	s.mu.Lock()
	defer s.mu.Unlock()
	return simcore.Collections(s.sources())
}

// TrackChanges reports the objects changed since the last call
// (simcore.Tracker). A Snapshot has no members besides its lists.
func (s *Sim) TrackChanges(all bool) simcore.Changes {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changes.Collect(all, nil, s.sources())
}
