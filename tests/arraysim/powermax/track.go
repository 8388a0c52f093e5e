package powermax

import "github.com/fenced-project/fenced/tests/arraysim/simcore"

// The collections of the Snapshot, tracked object by object for the audit
// (simcore.Tracker): every change to one of their objects touches it in
// s.changes. An initiator path shows whether its owner's node is
// connected, so a host's signals touch its paths too. The symmetrix ID is
// the Snapshot's other member.
const (
	collHosts         = "hosts"
	collInitiators    = "initiators"
	collMaskingViews  = "maskingViews"
	collStorageGroups = "storageGroups"
	collVolumes       = "volumes"
)

// touchHostLocked records a change to a host's own fields, which its
// initiator paths' logged_in follows.
func (s *Sim) touchHostLocked(id string) {
	s.changes.Touch(collHosts, id)
	for _, p := range s.paths {
		if p.Owner == id {
			s.changes.Touch(collInitiators, p.ID)
		}
	}
}

// sources reads the tracked collections, each listed by ID as the
// Snapshot lists them. Hosts, masking views, storage groups and volumes
// have no field the audit keys lists by, so it compares them by position.
// The caller holds s.mu.
func (s *Sim) sources() []simcore.Source {
	return []simcore.Source{
		simcore.MapSource(simcore.Collection{Name: collHosts}, s.hosts, func(h *host) any { return h.snap() }, nil),
		simcore.MapSource(simcore.Collection{Name: collInitiators}, s.paths, func(p *initPath) any { return s.pathSnapLocked(p) }, nil),
		simcore.MapSource(simcore.Collection{Name: collMaskingViews, Empty: simcore.EmptyNull}, s.views,
			func(mv *maskingView) any { return *mv }, nil),
		simcore.MapSource(simcore.Collection{Name: collStorageGroups, Empty: simcore.EmptyNull}, s.groups,
			func(g *storageGroup) any { return g.snap() }, nil),
		simcore.MapSource(simcore.Collection{Name: collVolumes, Empty: simcore.EmptyNull}, s.volumes,
			func(v *volume) any { return v.snap() }, nil),
	}
}

// TrackedCollections describes the Snapshot's lists (simcore.Tracker).
func (s *Sim) TrackedCollections() []simcore.Collection {
	s.mu.Lock()
	defer s.mu.Unlock()
	return simcore.Collections(s.sources())
}

// TrackChanges reports the symmetrix ID and the objects changed since the
// last call (simcore.Tracker).
func (s *Sim) TrackChanges(all bool) simcore.Changes {
	s.mu.Lock()
	defer s.mu.Unlock()
	root := struct {
		SymmetrixID string `json:"symmetrixId"`
	}{s.spec.SymmetrixID}
	return s.changes.Collect(all, root, s.sources())
}
