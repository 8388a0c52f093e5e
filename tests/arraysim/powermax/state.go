// Package powermax simulates a Unisphere for PowerMax REST endpoint serving
// one Symmetrix, as far as fencing touches it: hosts and their initiators,
// initiator paths with logged_in/on_fabric, masking views, storage groups,
// volumes and their performance metrics. The real gopowermax client accepts
// it (see the tests). It implements simcore.Family.
package powermax

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/fenced-project/fenced/tests/arraysim/fixture"
	"github.com/fenced-project/fenced/tests/arraysim/simcore"
)

// Sim is a simulated PowerMax array. It is safe for concurrent use.
type Sim struct {
	mu       sync.Mutex
	spec     Spec
	hosts    map[string]*host
	paths    map[string]*initPath // key: dir:port:initiator
	views    map[string]*maskingView
	groups   map[string]*storageGroup
	volumes  map[string]*volume
	interval time.Duration
	now      func() time.Time
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
	ID         string
	Type       string
	Initiators []string // bare IQNs/WWNs, sorted
	Views      []string
	Connected  bool
	IOActive   bool
}

// initPath is one initiator logged in through one director port; its ID is
// dir:port:initiator as Unisphere names it.
type initPath struct {
	ID        string
	Dir       string
	Port      string
	Initiator string
	Type      string // GigE or Fibre
	Owner     string // the host whose node this initiator belongs to (for signals)
	Host      string // the host the initiator is in now ("" when none)
}

type maskingView struct {
	ID           string `json:"maskingViewId"`
	Host         string `json:"hostId"`
	PortGroup    string `json:"portGroupId"`
	StorageGroup string `json:"storageGroupId"`
}

type storageGroup struct {
	ID      string   `json:"storageGroupId"`
	Volumes []string `json:"volumes"`
	Views   []string `json:"maskingview"`
	// SRP and SLO are set for a storage group made with a storage
	// resource pool (csi-powermax's provisioning groups); masking groups
	// (csi-no-srp-sg-...) have none.
	SRP string `json:"srp,omitempty"`
	SLO string `json:"slo,omitempty"`
}

type volume struct {
	ID     string   `json:"volumeId"`
	Groups []string `json:"storageGroupId"`
	// Identifier is the volume identifier (csi-powermax's
	// csi-<prefix>-<name>); Cylinders the size, 0 for the default 8 GiB.
	Identifier string `json:"volume_identifier,omitempty"`
	Cylinders  int    `json:"cap_cyl,omitempty"`
}

// New builds a simulator from the fixture spec and the fixture's nodes.
func New(spec *yaml.Node, nodes []fixture.Node) (*Sim, error) {
	s, err := decodeSpec(spec)
	if err != nil {
		return nil, err
	}
	hosts, err := expandSpec(s, nodes)
	if err != nil {
		return nil, err
	}
	sim := &Sim{
		spec:     s,
		hosts:    map[string]*host{},
		paths:    map[string]*initPath{},
		views:    map[string]*maskingView{},
		groups:   map[string]*storageGroup{},
		volumes:  map[string]*volume{},
		interval: time.Duration(s.MetricsIntervalSeconds) * time.Second,
		now:      time.Now,
	}
	owner := map[string]string{} // initiator -> host
	for _, hs := range hosts {
		if _, dup := sim.hosts[hs.ID]; dup {
			return nil, fmt.Errorf("powermax spec: host %q defined twice", hs.ID)
		}
		h := &host{ID: hs.ID, Type: hs.Type, Connected: !hs.Disconnected, IOActive: hs.IOActive}
		pathType := "GigE"
		if hs.Type == "Fibre" {
			pathType = "Fibre"
		}
		for _, in := range hs.Initiators {
			if prev, ok := owner[in.ID]; ok {
				return nil, fmt.Errorf("powermax spec: initiator %q is in hosts %q and %q", in.ID, prev, hs.ID)
			}
			owner[in.ID] = hs.ID
			h.Initiators = append(h.Initiators, in.ID)
			for _, p := range in.Paths {
				dir, port, _ := strings.Cut(p, ":")
				id := dir + ":" + port + ":" + in.ID
				sim.paths[id] = &initPath{ID: id, Dir: dir, Port: port, Initiator: in.ID, Type: pathType, Owner: hs.ID, Host: hs.ID}
			}
		}
		sort.Strings(h.Initiators)
		if _, dup := sim.views[hs.MaskingView]; dup {
			return nil, fmt.Errorf("powermax spec: masking view %q defined twice", hs.MaskingView)
		}
		sim.views[hs.MaskingView] = &maskingView{ID: hs.MaskingView, Host: hs.ID, PortGroup: hs.PortGroup, StorageGroup: hs.StorageGroup}
		h.Views = []string{hs.MaskingView}
		sg := sim.groups[hs.StorageGroup]
		if sg == nil {
			sg = &storageGroup{ID: hs.StorageGroup}
			sim.groups[hs.StorageGroup] = sg
		}
		sg.Views = append(sg.Views, hs.MaskingView)
		for _, v := range hs.Volumes {
			vol := sim.volumes[v]
			if vol == nil {
				vol = &volume{ID: v}
				sim.volumes[v] = vol
			}
			if !slices.Contains(vol.Groups, sg.ID) {
				vol.Groups = append(vol.Groups, sg.ID)
				sg.Volumes = append(sg.Volumes, v)
			}
		}
		sim.hosts[hs.ID] = h
	}
	for _, v := range s.Volumes {
		if sim.volumes[v] == nil {
			sim.volumes[v] = &volume{ID: v}
		}
	}
	return sim, nil
}

// SymmetrixID is the simulated array's ID.
func (s *Sim) SymmetrixID() string { return s.spec.SymmetrixID }

// SetClock replaces the simulator's clock (for tests of sample ageing).
func (s *Sim) SetClock(now func() time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = now
}

// SetSignals sets a host's signals: Connected drives logged_in/on_fabric of
// every path of the host's node initiators, IOActive drives the IoRate of
// the volumes masked to it (while it still has initiators).
func (s *Sim) SetSignals(name string, sig simcore.Signals) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.hosts[name]
	if h == nil {
		return fmt.Errorf("powermax: no host %q", name)
	}
	if sig.Connected != nil {
		h.Connected = *sig.Connected
	}
	if sig.IOActive != nil {
		h.IOActive = *sig.IOActive
	}
	s.touchHostLocked(h.ID)
	return nil
}

// hostSnap is a host in the Snapshot.
type hostSnap struct {
	ID         string   `json:"hostId"`
	Type       string   `json:"type"`
	Initiators []string `json:"initiator"`
	Views      []string `json:"maskingview"`
	Connected  bool     `json:"connected"`
	IOActive   bool     `json:"ioActive"`
}

// pathSnap is an initiator path in the Snapshot.
type pathSnap struct {
	ID       string `json:"initiatorId"`
	Host     string `json:"host"`
	LoggedIn bool   `json:"logged_in"`
}

// Snapshot is the full state in a deterministic order.
func (s *Sim) Snapshot() any {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := struct {
		SymmetrixID   string         `json:"symmetrixId"`
		Hosts         []hostSnap     `json:"hosts"`
		Initiators    []pathSnap     `json:"initiators"`
		MaskingViews  []maskingView  `json:"maskingViews"`
		StorageGroups []storageGroup `json:"storageGroups"`
		Volumes       []volume       `json:"volumes"`
	}{SymmetrixID: s.spec.SymmetrixID, Hosts: []hostSnap{}, Initiators: []pathSnap{}}
	for _, id := range sortedKeys(s.hosts) {
		out.Hosts = append(out.Hosts, s.hosts[id].snap())
	}
	for _, id := range sortedKeys(s.paths) {
		out.Initiators = append(out.Initiators, s.pathSnapLocked(s.paths[id]))
	}
	for _, id := range sortedKeys(s.views) {
		out.MaskingViews = append(out.MaskingViews, *s.views[id])
	}
	for _, id := range sortedKeys(s.groups) {
		out.StorageGroups = append(out.StorageGroups, s.groups[id].snap())
	}
	for _, id := range sortedKeys(s.volumes) {
		out.Volumes = append(out.Volumes, s.volumes[id].snap())
	}
	return out
}

// snap is the host as the Snapshot lists it.
func (h *host) snap() hostSnap {
	return hostSnap{h.ID, h.Type, slices.Clone(h.Initiators), slices.Clone(h.Views), h.Connected, h.IOActive}
}

// pathSnapLocked is the path as the Snapshot lists it: logged in while
// its owner's node is connected.
func (s *Sim) pathSnapLocked(p *initPath) pathSnap { return pathSnap{p.ID, p.Host, s.loggedIn(p)} }

// snap is the storage group as the Snapshot lists it.
func (g *storageGroup) snap() storageGroup {
	out := *g
	out.Volumes = slices.Sorted(slices.Values(g.Volumes))
	out.Views = slices.Sorted(slices.Values(g.Views))
	return out
}

// snap is the volume as the Snapshot lists it.
func (v *volume) snap() volume {
	out := *v
	out.Groups = slices.Sorted(slices.Values(v.Groups))
	return out
}

// loggedIn reports a path's login state: its owner's node is connected.
func (s *Sim) loggedIn(p *initPath) bool {
	h := s.hosts[p.Owner]
	return h != nil && h.Connected
}

// volumeBusy reports whether some host masked to the volume does I/O: it
// is IOActive and still has initiators (a fenced host cannot write).
func (s *Sim) volumeBusy(v *volume) bool {
	for _, g := range v.Groups {
		sg := s.groups[g]
		if sg == nil {
			continue
		}
		for _, mv := range sg.Views {
			view := s.views[mv]
			if view == nil {
				continue
			}
			if h := s.hosts[view.Host]; h != nil && h.IOActive && h.Connected && len(h.Initiators) > 0 {
				return true
			}
		}
	}
	return false
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// ClusterPrefix is the csi-powermax cluster prefix of the generated hosts
// ("" when the fixture generates none).
func (s *Sim) ClusterPrefix() string {
	if s.spec.Generate == nil {
		return ""
	}
	return s.spec.Generate.ClusterPrefix
}
