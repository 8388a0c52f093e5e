// Package unity simulates a Unity XT array's REST API as far as fencing
// touches it: login sessions with CSRF tokens, hosts with initiators and IP
// ports, initiator health, LUNs with host access and modifyLun, file
// systems with NFS shares and their host lists (modifyFilesystem), and
// real-time metric queries. The real gounity client accepts it (see the
// tests). It implements simcore.Family.
package unity

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/fenced-project/fenced/tests/arraysim/fixture"
	"github.com/fenced-project/fenced/tests/arraysim/simcore"
)

// Sim is a simulated Unity array. It is safe for concurrent use.
type Sim struct {
	mu         sync.Mutex
	spec       Spec
	hosts      map[string]*host
	initiators map[string]*initiator
	ipPorts    map[string]*ipPort
	luns       map[string]*lun
	// filesystems by ID (fs_N) and their NFS shares by ID (NFSShare_N).
	filesystems map[string]*filesystem
	shares      map[string]*nfsShare
	// lastFS and lastShare are the highest IDs handed out: Unity does not
	// hand a deleted object's ID to a new one.
	lastFS, lastShare int
	sessions          map[string]string // session cookie -> CSRF token
	queries           map[int]*metricQuery
	nextQuery         int
	logins            int
	now               func() time.Time
	// changes records the objects of the Snapshot changed since the audit
	// last asked (track.go).
	changes simcore.ChangeLog
}

var (
	_ simcore.Family  = (*Sim)(nil)
	_ simcore.Querier = (*Sim)(nil)
	_ simcore.Tracker = (*Sim)(nil)
)

type host struct {
	ID        string   `json:"id"`
	Name      string   `json:"name"`
	FC        []string `json:"fcHostInitiators"`
	ISCSI     []string `json:"iscsiHostInitiators"`
	IPPorts   []string `json:"hostIPPorts"`
	Connected bool     `json:"connected"`
	IOActive  bool     `json:"ioActive"`
}

type initiator struct {
	ID          string   `json:"id"`
	Type        int      `json:"type"` // 1 FC, 2 iSCSI
	InitiatorID string   `json:"initiatorId"`
	Host        string   `json:"parentHost"`
	Paths       []string `json:"paths"`
}

type ipPort struct {
	ID      string `json:"id"`
	Address string `json:"address"`
	Host    string `json:"host"`
}

type lun struct {
	ID         string   `json:"id"`
	Name       string   `json:"name"`
	WWN        string   `json:"wwn"`
	HostAccess []access `json:"hostAccess"`
	// Size is the LUN's size in bytes; 0 is the default 8 GiB of the
	// LUNs a fixture seeds.
	Size uint64 `json:"sizeTotal,omitempty"`
}

// access is one LUN host-access entry.
type access struct {
	Host       string `json:"host"`
	HLU        int    `json:"hlu"`
	AccessMask int    `json:"accessMask"`
}

type metricQuery struct {
	ID       int
	Paths    []string
	Interval int
}

// New builds a simulator from the fixture spec and the fixture's nodes.
func New(spec *yaml.Node, nodes []fixture.Node) (*Sim, error) {
	s, err := decodeSpec(spec)
	if err != nil {
		return nil, err
	}
	hosts, luns, err := expandSpec(s, nodes)
	if err != nil {
		return nil, err
	}
	sim := &Sim{
		spec: s, hosts: map[string]*host{}, initiators: map[string]*initiator{}, ipPorts: map[string]*ipPort{},
		luns: map[string]*lun{}, filesystems: map[string]*filesystem{}, shares: map[string]*nfsShare{}, sessions: map[string]string{}, queries: map[int]*metricQuery{}, nextQuery: 1,
		now: time.Now,
	}
	seen := map[string]string{} // initiator WWN/IQN -> host name
	byName := map[string][]string{}
	nPath := 0
	for i, hs := range hosts {
		h := &host{ID: fmt.Sprintf("Host_%d", i+1), Name: hs.Name, Connected: !hs.Disconnected, IOActive: hs.IOActive}
		add := func(wwnOrIQN string, typ int) error {
			key := strings.ToLower(wwnOrIQN)
			if prev, ok := seen[key]; ok {
				return fmt.Errorf("unity spec: initiator %q is in hosts %q and %q", wwnOrIQN, prev, hs.Name)
			}
			seen[key] = hs.Name
			in := &initiator{ID: fmt.Sprintf("HostInitiator_%d", len(sim.initiators)+1), Type: typ, InitiatorID: wwnOrIQN, Host: h.ID}
			for p := 0; p < 2; p++ {
				nPath++
				in.Paths = append(in.Paths, fmt.Sprintf("HostInitiatorPath_%d", nPath))
			}
			sim.initiators[in.ID] = in
			if typ == 1 {
				h.FC = append(h.FC, in.ID)
			} else {
				h.ISCSI = append(h.ISCSI, in.ID)
			}
			return nil
		}
		for _, w := range hs.WWNs {
			if err := add(w, 1); err != nil {
				return nil, err
			}
		}
		for _, q := range hs.IQNs {
			if err := add(q, 2); err != nil {
				return nil, err
			}
		}
		for _, a := range hs.IPPorts {
			p := &ipPort{ID: fmt.Sprintf("HostNetworkAddress_%d", len(sim.ipPorts)+1), Address: a, Host: h.ID}
			sim.ipPorts[p.ID] = p
			h.IPPorts = append(h.IPPorts, p.ID)
		}
		sim.hosts[h.ID] = h
		byName[hs.Name] = append(byName[hs.Name], h.ID)
	}
	for i, ls := range luns {
		l := &lun{ID: fmt.Sprintf("sv_%d", i+1), Name: ls.Name, WWN: lunWWN(i)}
		for _, a := range ls.HostAccess {
			ids := byName[a.Host]
			if len(ids) != 1 {
				return nil, fmt.Errorf("unity spec: lun %q: hostAccess host %q matches %d hosts, want exactly 1", ls.Name, a.Host, len(ids))
			}
			mask, _ := strconv.Atoi(a.AccessMask)
			for _, e := range l.HostAccess {
				if e.Host == ids[0] {
					return nil, fmt.Errorf("unity spec: lun %q: host %q listed twice", ls.Name, a.Host)
				}
			}
			if sim.hluUsedLocked(ids[0], a.HLU) {
				return nil, fmt.Errorf("unity spec: lun %q: hlu %d already used by host %q", ls.Name, a.HLU, a.Host)
			}
			l.HostAccess = append(l.HostAccess, access{Host: ids[0], HLU: a.HLU, AccessMask: mask})
		}
		sim.luns[l.ID] = l
	}
	if err := sim.seedFilesystemsLocked(s.Filesystems, byName); err != nil {
		return nil, err
	}
	return sim, nil
}

// ExpireSessions drops every login session, as an array restart or idle
// timeout would: the next request with an old cookie gets a 401.
func (s *Sim) ExpireSessions() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.sessions)
}

// SetClock replaces the simulator's clock (for tests of sample ageing).
func (s *Sim) SetClock(now func() time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = now
}

// ExpireMetricQueries drops every real-time metric query, as their
// expiration on the array does: results of an old query come back empty.
func (s *Sim) ExpireMetricQueries() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.queries)
}

// Logins counts successful logins since the simulator started.
func (s *Sim) Logins() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logins
}

// HostID returns the ID of the only host named name.
func (s *Sim) HostID(name string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, err := s.hostLocked(name)
	if err != nil {
		return "", err
	}
	return h.ID, nil
}

// hostLocked finds a host by ID or by a unique name.
func (s *Sim) hostLocked(idOrName string) (*host, error) {
	if h := s.hosts[idOrName]; h != nil {
		return h, nil
	}
	var found []*host
	for _, h := range s.hosts {
		if h.Name == idOrName {
			found = append(found, h)
		}
	}
	switch len(found) {
	case 0:
		return nil, fmt.Errorf("unity: no host %q", idOrName)
	case 1:
		return found[0], nil
	}
	return nil, fmt.Errorf("unity: %d hosts are named %q", len(found), idOrName)
}

// SetSignals sets a host's signals (by host ID or unique name): Connected
// drives its initiators' health, IOActive the currentIOCount of the LUNs it
// has access to.
func (s *Sim) SetSignals(name string, sig simcore.Signals) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, err := s.hostLocked(name)
	if err != nil {
		return err
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

// Snapshot is the full state in a deterministic order. Sessions and
// metric queries are not part of it: they are not what fencing changes.
func (s *Sim) Snapshot() any {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := struct {
		Hosts      []host      `json:"hosts"`
		Initiators []initiator `json:"initiators"`
		IPPorts    []ipPort    `json:"hostIPPorts"`
		LUNs       []lun       `json:"luns"`
		// Filesystems and NFSShares: a share's host lists are what NFS
		// publish, unpublish and fencing change.
		Filesystems []filesystem `json:"filesystems"`
		NFSShares   []nfsShare   `json:"nfsShares"`
	}{Hosts: []host{}, Initiators: []initiator{}, IPPorts: []ipPort{}, LUNs: []lun{}, Filesystems: []filesystem{}, NFSShares: []nfsShare{}}
	for _, id := range sortedIDs(s.hosts) {
		out.Hosts = append(out.Hosts, s.hosts[id].snapshot())
	}
	for _, id := range sortedIDs(s.initiators) {
		out.Initiators = append(out.Initiators, s.initiators[id].snapshot())
	}
	for _, id := range sortedIDs(s.ipPorts) {
		out.IPPorts = append(out.IPPorts, *s.ipPorts[id])
	}
	for _, id := range sortedIDs(s.luns) {
		out.LUNs = append(out.LUNs, s.luns[id].snapshot())
	}
	for _, id := range sortedIDs(s.filesystems) {
		out.Filesystems = append(out.Filesystems, *s.filesystems[id])
	}
	for _, id := range sortedIDs(s.shares) {
		out.NFSShares = append(out.NFSShares, s.shares[id].snapshot())
	}
	return out
}

// snapshot copies the host as the Snapshot lists it.
func (h *host) snapshot() host {
	out := *h
	out.FC, out.ISCSI, out.IPPorts = slices.Clone(h.FC), slices.Clone(h.ISCSI), slices.Clone(h.IPPorts)
	return out
}

// snapshot copies the initiator as the Snapshot lists it.
func (in *initiator) snapshot() initiator {
	out := *in
	out.Paths = slices.Clone(in.Paths)
	return out
}

// snapshot copies the LUN as the Snapshot lists it, host access by host.
func (l *lun) snapshot() lun {
	out := *l
	out.HostAccess = sortedAccess(l.HostAccess)
	return out
}

func sortedAccess(a []access) []access {
	out := slices.Clone(a)
	sort.Slice(out, func(i, j int) bool { return idLess(out[i].Host, out[j].Host) })
	return out
}

// hluUsedLocked reports whether hostID already sees some LUN at hlu.
func (s *Sim) hluUsedLocked(hostID string, hlu int) bool {
	for _, l := range s.luns {
		for _, a := range l.HostAccess {
			if a.Host == hostID && a.HLU == hlu {
				return true
			}
		}
	}
	return false
}

// freeHLULocked is the lowest HLU hostID does not use, as the array picks
// one when access is granted without an HLU.
func (s *Sim) freeHLULocked(hostID string) int {
	for hlu := 0; ; hlu++ {
		if !s.hluUsedLocked(hostID, hlu) {
			return hlu
		}
	}
}

// lunBusyLocked reports whether some host with access to l does I/O.
func (s *Sim) lunBusyLocked(l *lun) bool {
	for _, a := range l.HostAccess {
		if h := s.hosts[a.Host]; h != nil && h.IOActive && h.Connected {
			return true
		}
	}
	return false
}

// idKey is a Unity ID split for ordering: Host_2 before Host_10.
type idKey struct {
	id, prefix string
	n          int
}

func newIDKey(id string) idKey {
	k := idKey{id: id, prefix: id}
	if i := strings.LastIndexByte(id, '_'); i >= 0 {
		if n, err := strconv.Atoi(id[i+1:]); err == nil {
			k.prefix, k.n = id[:i], n
		}
	}
	return k
}

func (a idKey) compare(b idKey) int {
	if c := strings.Compare(a.prefix, b.prefix); c != 0 {
		return c
	}
	if c := cmp.Compare(a.n, b.n); c != 0 {
		return c
	}
	return strings.Compare(a.id, b.id)
}

// idLess orders Unity IDs like Host_2 before Host_10.
func idLess(a, b string) bool { return newIDKey(a).compare(newIDKey(b)) < 0 }

// sortedIDs returns the keys of m in idLess order. Each key is split once,
// not on every comparison: snapshots sort thousands of IDs per write.
func sortedIDs[V any](m map[string]V) []string {
	keys := make([]idKey, 0, len(m))
	for k := range m {
		keys = append(keys, newIDKey(k))
	}
	slices.SortFunc(keys, idKey.compare)
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k.id
	}
	return out
}
