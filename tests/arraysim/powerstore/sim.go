// Package powerstore simulates the PowerStore REST API (/api/rest) closely
// enough that the real gopowerstore client (v1.22.0) accepts it as an array.
//
// It models what fencing touches: login sessions (DELL-EMC-TOKEN header and
// auth_cookie), hosts with initiators and their active sessions, host
// groups, volumes, host-volume mappings (attach/detach), PATCH host
// add/remove initiators, PATCH host_group add/remove hosts,
// metrics/generate for performance_metrics_by_volume, and file systems
// with their NFS exports and host lists (nfs.go). Sim implements
// simcore.Family; wrap it with simcore.New to get faults, the audit log and
// the /_sim/ admin endpoints.
//
// Behaviour on repeats follows the array (see README): detaching a volume
// that is not attached answers 400, attaching twice 422, removing an
// initiator the host does not have 400, adding a port name that any host
// already has 400. Bad credentials answer 401; a stale session (see
// ExpireSessions) answers 403 so the client logs in again.
package powerstore

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/fenced-project/fenced/tests/arraysim/simcore"
)

// Sim is one simulated PowerStore cluster. It is safe for concurrent use.
type Sim struct {
	mu sync.Mutex

	username    string
	password    string
	applianceID string
	clusterName string
	release     string
	// detachNotAttached is the status of a detach of a volume the host
	// does not have (Spec.DetachNotAttachedStatus).
	detachNotAttached int
	// nfsRemoveAbsent is Spec.NFSRemoveAbsent, resolved.
	nfsRemoveAbsent string
	// nasInterfaceIP is every NAS server's file interface address.
	nasInterfaceIP string
	// defaultLimit and maxLimit bound collection pages (206 + Content-Range
	// when a page is not the whole collection).
	defaultLimit int
	maxLimit     int

	hosts    map[string]*host // by id
	groups   map[string]*hostGroup
	volumes  map[string]*volume
	mappings map[string]*mapping

	// File storage (nfs.go): NAS servers, file systems and NFS exports.
	nasServers  map[string]*nasServer
	fileSystems map[string]*fileSystem
	exports     map[string]*nfsExport

	// sessions maps an auth_cookie value to its DELL-EMC-TOKEN.
	sessions map[string]string
	// logins are the initiators (by port name) that logged in to the
	// array's target ports on their own (LogIn), whatever their host's
	// Connected signal: their active_sessions show while a host has them.
	logins     map[string]bool
	sessionSeq int64

	// now is the clock used for metric timestamps (tests may replace it).
	now func() time.Time
	// changes records the objects of Snapshot changed since the audit
	// last asked (track.go).
	changes simcore.ChangeLog
}

var (
	_ simcore.Family         = (*Sim)(nil)
	_ simcore.Querier        = (*Sim)(nil)
	_ simcore.SessionExpirer = (*Sim)(nil)
	_ simcore.Tracker        = (*Sim)(nil)
)

// host is a PowerStore host object.
type host struct {
	ID          string
	Name        string
	Description string
	OSType      string
	GroupID     string
	Initiators  map[string]*initiator // by port name
	// Connected is the array-side signal: initiators have active sessions.
	Connected bool
	// IOActive is the array-side signal: volumes reachable through this
	// host report I/O (while the host still has initiators).
	IOActive bool
}

// initiator is one host initiator. Passwords are write-only on the array.
type initiator struct {
	PortName           string
	PortType           string
	ChapSingleUsername string
	ChapSinglePassword string
	ChapMutualUsername string
	ChapMutualPassword string
}

// hostGroup is a PowerStore host group.
type hostGroup struct {
	ID          string
	Name        string
	Description string
}

// volume is a block volume.
type volume struct {
	ID   string
	Name string
	Size int64
	WWN  string
}

// mapping is one host-volume (or host-group-volume) mapping.
type mapping struct {
	ID       string
	HostID   string
	GroupID  string
	VolumeID string
	LUN      int64
}

// uuidFor derives a stable UUID-shaped id from a kind and a name, so a
// fixture always produces the same ids and a re-created mapping gets the id
// it had before (which keeps state dumps comparable across fence/unfence).
func uuidFor(kind, name string) string {
	sum := sha256.Sum256([]byte(kind + "\x00" + name))
	h := hex.EncodeToString(sum[:16])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// mappingID is the id of the mapping of volume volID to a host or group.
func mappingID(hostID, groupID, volID string) string {
	return uuidFor("mapping", hostID+"/"+groupID+"/"+volID)
}

// SecretFingerprint is how a Snapshot shows the CHAP secret s: tests
// compare it with what a node holds without the secret being dumped.
func SecretFingerprint(s string) string { return secretFingerprint(s) }

// secretFingerprint identifies a CHAP secret in dumps without revealing it.
func secretFingerprint(s string) string {
	if s == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(sum[:6])
}

// Snapshot is the simulator's state as JSON-friendly values in a
// deterministic order. Sessions are left out: they are not array state a
// fence changes.
type Snapshot struct {
	Hosts      []HostState      `json:"hosts"`
	HostGroups []HostGroupState `json:"hostGroups"`
	Volumes    []VolumeState    `json:"volumes"`
	Mappings   []MappingState   `json:"mappings"`
	// FileSystems and NFSExports are left out while the array has none,
	// so block-only states marshal as before.
	FileSystems []FileSystemState `json:"fileSystems,omitempty"`
	NFSExports  []NFSExportState  `json:"nfsExports,omitempty"`
}

// HostState is a host in a Snapshot.
type HostState struct {
	ID          string           `json:"id"`
	Name        string           `json:"name"`
	OSType      string           `json:"osType"`
	HostGroupID string           `json:"hostGroupId,omitempty"`
	Connected   bool             `json:"connected"`
	IOActive    bool             `json:"ioActive"`
	Initiators  []InitiatorState `json:"initiators"`
}

// InitiatorState is an initiator in a Snapshot; CHAP secrets appear only as
// fingerprints.
type InitiatorState struct {
	PortName           string `json:"port_name"`
	PortType           string `json:"portType"`
	ChapSingleUsername string `json:"chapSingleUsername,omitempty"`
	ChapSingleSecret   string `json:"chapSingleSecret,omitempty"`
	ChapMutualUsername string `json:"chapMutualUsername,omitempty"`
	ChapMutualSecret   string `json:"chapMutualSecret,omitempty"`
}

// HostGroupState is a host group in a Snapshot.
type HostGroupState struct {
	ID      string   `json:"id"`
	Name    string   `json:"name"`
	HostIDs []string `json:"hostIds"`
}

// VolumeState is a volume in a Snapshot.
type VolumeState struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Size int64  `json:"size"`
}

// MappingState is a mapping in a Snapshot.
type MappingState struct {
	ID          string `json:"id"`
	HostID      string `json:"hostId,omitempty"`
	HostGroupID string `json:"hostGroupId,omitempty"`
	VolumeID    string `json:"volumeId"`
	LUN         int64  `json:"lun"`
}

// Snapshot returns the full state in a deterministic order.
func (s *Sim) Snapshot() any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.snapshotLocked()
}

// State returns the full state as a typed Snapshot.
func (s *Sim) State() Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.snapshotLocked()
}

func (s *Sim) snapshotLocked() Snapshot {
	snap := Snapshot{
		Hosts:      make([]HostState, 0, len(s.hosts)),
		HostGroups: make([]HostGroupState, 0, len(s.groups)),
		Volumes:    make([]VolumeState, 0, len(s.volumes)),
		Mappings:   make([]MappingState, 0, len(s.mappings)),
	}
	for _, h := range s.hosts {
		snap.Hosts = append(snap.Hosts, h.state())
	}
	slices.SortFunc(snap.Hosts, func(a, b HostState) int { return strings.Compare(a.Name, b.Name) })
	for _, g := range s.groups {
		snap.HostGroups = append(snap.HostGroups, s.groupStateLocked(g))
	}
	slices.SortFunc(snap.HostGroups, func(a, b HostGroupState) int { return strings.Compare(a.Name, b.Name) })
	for _, v := range s.volumes {
		snap.Volumes = append(snap.Volumes, v.state())
	}
	slices.SortFunc(snap.Volumes, func(a, b VolumeState) int { return strings.Compare(a.Name, b.Name) })
	for _, m := range s.mappings {
		snap.Mappings = append(snap.Mappings, m.state())
	}
	slices.SortFunc(snap.Mappings, func(a, b MappingState) int { return strings.Compare(a.ID, b.ID) })
	snap.FileSystems, snap.NFSExports = s.fileSystemsSnapshotLocked()
	return snap
}

// state is the host as a Snapshot lists it.
func (h *host) state() HostState {
	hs := HostState{ID: h.ID, Name: h.Name, OSType: h.OSType, HostGroupID: h.GroupID,
		Connected: h.Connected, IOActive: h.IOActive, Initiators: []InitiatorState{}}
	for _, in := range h.Initiators {
		hs.Initiators = append(hs.Initiators, InitiatorState{
			PortName: in.PortName, PortType: in.PortType,
			ChapSingleUsername: in.ChapSingleUsername, ChapSingleSecret: secretFingerprint(in.ChapSinglePassword),
			ChapMutualUsername: in.ChapMutualUsername, ChapMutualSecret: secretFingerprint(in.ChapMutualPassword),
		})
	}
	slices.SortFunc(hs.Initiators, func(a, b InitiatorState) int { return strings.Compare(a.PortName, b.PortName) })
	return hs
}

// groupStateLocked is the host group as a Snapshot lists it: its hosts
// are the hosts whose GroupID it is.
func (s *Sim) groupStateLocked(g *hostGroup) HostGroupState {
	return HostGroupState{ID: g.ID, Name: g.Name, HostIDs: s.groupMembersLocked(g.ID)}
}

// state is the volume as a Snapshot lists it.
func (v *volume) state() VolumeState { return VolumeState{ID: v.ID, Name: v.Name, Size: v.Size} }

// state is the mapping as a Snapshot lists it.
func (m *mapping) state() MappingState {
	return MappingState{ID: m.ID, HostID: m.HostID, HostGroupID: m.GroupID, VolumeID: m.VolumeID, LUN: m.LUN}
}

// groupMembersLocked lists the sorted ids of a group's hosts.
func (s *Sim) groupMembersLocked(groupID string) []string {
	ids := []string{}
	for _, h := range s.hosts {
		if h.GroupID == groupID {
			ids = append(ids, h.ID)
		}
	}
	sort.Strings(ids)
	return ids
}

// SetSignals sets a host's array-side signals. hostRef is the host's id or
// name. Connected controls the initiators' active_sessions; IOActive makes
// the volumes reachable through the host report I/O in metrics/generate.
func (s *Sim) SetSignals(hostRef string, sig simcore.Signals) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.findHostLocked(hostRef)
	if h == nil {
		return fmt.Errorf("powerstore sim: no host with id or name %q", hostRef)
	}
	if sig.Connected != nil {
		h.Connected = *sig.Connected
	}
	if sig.IOActive != nil {
		h.IOActive = *sig.IOActive
	}
	s.changes.Touch(collHosts, h.ID)
	return nil
}

// LogIn logs the initiator with port name port in to the array's target
// ports, as a node's iscsid (or FC HBA) does on its own: from now on it
// shows active_sessions under whichever host has it registered, whatever
// that host's Connected signal. Removing the initiator from its host ends
// the login (the array drops the sessions of an initiator it no longer
// knows); an initiator no host has shows nothing until one registers it.
func (s *Sim) LogIn(port string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.logins[port] = true
	if h := s.initiatorOwnerLocked(port); h != nil {
		s.changes.Touch(collHosts, h.ID)
	}
}

// LogOut ends the initiator's own login (LogIn).
func (s *Sim) LogOut(port string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.logins, port)
	if h := s.initiatorOwnerLocked(port); h != nil {
		s.changes.Touch(collHosts, h.ID)
	}
}

// findHostLocked finds a host by id or name.
func (s *Sim) findHostLocked(ref string) *host {
	if h, ok := s.hosts[ref]; ok {
		return h
	}
	for _, h := range s.hosts {
		if h.Name == ref {
			return h
		}
	}
	return nil
}

// HostID returns the id of the host named name.
func (s *Sim) HostID(name string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, h := range s.hosts {
		if h.Name == name {
			return h.ID, true
		}
	}
	return "", false
}

// ExpireSessions invalidates every login session, as an array restart or an
// idle timeout would. The next request carrying an old auth_cookie gets 403
// and the client logs in again.
func (s *Sim) ExpireSessions() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sessions = map[string]string{}
}

// SetClock replaces the clock used for metric timestamps.
func (s *Sim) SetClock(now func() time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = now
}

// volumeActiveLocked reports whether a volume shows I/O: some host that
// reaches it (directly or through its group) has the IOActive signal and
// still has at least one initiator.
func (s *Sim) volumeActiveLocked(volID string) bool {
	active := func(h *host) bool { return h != nil && h.IOActive && len(h.Initiators) > 0 }
	for _, m := range s.mappings {
		if m.VolumeID != volID {
			continue
		}
		if m.HostID != "" && active(s.hosts[m.HostID]) {
			return true
		}
		if m.GroupID == "" {
			continue
		}
		for _, h := range s.hosts {
			if h.GroupID == m.GroupID && active(h) {
				return true
			}
		}
	}
	return false
}
