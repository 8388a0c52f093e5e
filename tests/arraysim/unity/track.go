package unity

import "github.com/fenced-project/fenced/tests/arraysim/simcore"

// The collections of the Snapshot, tracked object by object for the audit
// (simcore.Tracker): every change to one of their objects touches it in
// s.changes.
const (
	collHosts       = "hosts"
	collInitiators  = "initiators"
	collIPPorts     = "hostIPPorts"
	collLUNs        = "luns"
	collFilesystems = "filesystems"
	collNFSShares   = "nfsShares"
)

// byUnityID orders IDs as the Snapshot lists them: Host_2 before Host_10.
func byUnityID(a, b string) int { return newIDKey(a).compare(newIDKey(b)) }

// sources reads the tracked collections. The caller holds s.mu.
func (s *Sim) sources() []simcore.Source {
	coll := func(name string) simcore.Collection { return simcore.Collection{Name: name, Compare: byUnityID} }
	return []simcore.Source{
		simcore.MapSource(coll(collHosts), s.hosts, func(h *host) any { return h.snapshot() }, nil),
		simcore.MapSource(coll(collInitiators), s.initiators, func(in *initiator) any { return in.snapshot() }, nil),
		simcore.MapSource(coll(collIPPorts), s.ipPorts, func(p *ipPort) any { return *p }, nil),
		simcore.MapSource(coll(collLUNs), s.luns, func(l *lun) any { return l.snapshot() }, nil),
		simcore.MapSource(coll(collFilesystems), s.filesystems, func(f *filesystem) any { return *f }, nil),
		simcore.MapSource(coll(collNFSShares), s.shares, func(sh *nfsShare) any { return sh.snapshot() }, nil),
	}
}

// TrackedCollections describes the Snapshot's lists (simcore.Tracker).
func (s *Sim) TrackedCollections() []simcore.Collection {
	s.mu.Lock()
	defer s.mu.Unlock()
	return simcore.Collections(s.sources())
}

// TrackChanges reports the objects changed since the last call
// (simcore.Tracker). The Snapshot has no members besides its lists.
func (s *Sim) TrackChanges(all bool) simcore.Changes {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changes.Collect(all, nil, s.sources())
}
