package powerflex

import "github.com/fenced-project/fenced/tests/arraysim/simcore"

// The collections of State, tracked object by object for the audit
// (simcore.Tracker): every change to one of their objects touches it in
// s.changes.
const (
	collSystems     = "systems"
	collSDCs        = "sdcs"
	collVolumes     = "volumes"
	collFileSystems = "fileSystems"
	collNFSExports  = "nfsExports"
)

// sources reads the tracked collections, listed by ID as State lists
// them. The caller holds s.mu.
func (s *Sim) sources() []simcore.Source {
	return []simcore.Source{
		simcore.MapSource(simcore.Collection{Name: collSystems}, s.systems, func(x *system) any { return *x }, nil),
		simcore.MapSource(simcore.Collection{Name: collSDCs}, s.sdcs, func(c *sdc) any { return c.state() }, nil),
		simcore.MapSource(simcore.Collection{Name: collVolumes}, s.volumes, func(v *volume) any { return v.state() }, nil),
		simcore.MapSource(simcore.Collection{Name: collFileSystems}, s.fileSystems, func(f *FileSystem) any { return *f }, nil),
		simcore.MapSource(simcore.Collection{Name: collNFSExports}, s.exports, func(x *NFSExport) any { return x.clone() }, nil),
	}
}

// TrackedCollections describes State's lists (simcore.Tracker).
func (s *Sim) TrackedCollections() []simcore.Collection {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return simcore.Collections(s.sources())
}

// TrackChanges reports State's version and the objects changed since the
// last call (simcore.Tracker).
func (s *Sim) TrackChanges(all bool) simcore.Changes {
	s.mu.Lock()
	defer s.mu.Unlock()
	root := struct {
		Version string `json:"version"`
	}{s.version}
	return s.changes.Collect(all, root, s.sources())
}
