package powerflex

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/fenced-project/fenced/tests/arraysim/simcore"
)

// Access modes of a volume mapping.
const (
	AccessReadWrite = "ReadWrite"
	AccessReadOnly  = "ReadOnly"
	AccessNoAccess  = "NoAccess"
)

func validAccessMode(m string) bool {
	return m == AccessReadWrite || m == AccessReadOnly || m == AccessNoAccess
}

// Sim is a simulated PowerFlex gateway. It is safe for concurrent use.
type Sim struct {
	mu       sync.RWMutex
	version  string
	username string
	password string
	systems  map[string]*system
	sdcs     map[string]*sdc
	volumes  map[string]*volume
	tokens   map[string]bool
	tokenSeq int
	logins   int
	// fileSystems and exports are PowerFlex file's, by ID (nfs.go).
	fileSystems map[string]*FileSystem
	exports     map[string]*NFSExport
	// changes records the objects of State changed since the audit last
	// asked (track.go).
	changes simcore.ChangeLog
}

var (
	_ simcore.Family         = (*Sim)(nil)
	_ simcore.Querier        = (*Sim)(nil)
	_ simcore.SessionExpirer = (*Sim)(nil)
	_ simcore.Tracker        = (*Sim)(nil)
)

type system struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

type sdc struct {
	ID        string   `json:"id"`
	Name      string   `json:"name"`
	GUID      string   `json:"sdcGuid"`
	IPs       []string `json:"sdcIps"`
	SystemID  string   `json:"systemId"`
	Connected bool     `json:"connected"`
	IOActive  bool     `json:"ioActive"`
	// HostType and NQN are set for an NVMe host only (empty: an SDC).
	HostType string `json:"hostType,omitempty"`
	NQN      string `json:"nqn,omitempty"`
}

// hostType is what the gateway lists as the host's hostType.
func (c *sdc) hostType() string {
	if c.HostType == "" {
		return HostTypeSDC
	}
	return c.HostType
}

type volume struct {
	ID       string     `json:"id"`
	Name     string     `json:"name"`
	SizeInKb int        `json:"sizeInKb"`
	SystemID string     `json:"systemId"`
	Mappings []*mapping `json:"mappedSdcInfo"`
}

type mapping struct {
	SdcID         string `json:"sdcId"`
	AccessMode    string `json:"accessMode"`
	LimitIops     int    `json:"limitIops"`
	LimitBwInMbps int    `json:"limitBwInMbps"`
}

func (v *volume) mapping(sdcID string) *mapping {
	for _, m := range v.Mappings {
		if m.SdcID == sdcID {
			return m
		}
	}
	return nil
}

// State is the simulator's full state as Snapshot returns it: sorted by
// ID, mappings sorted by SDC ID. Sessions are not part of it.
type State struct {
	Version string   `json:"version"`
	Systems []System `json:"systems"`
	SDCs    []SDC    `json:"sdcs"`
	Volumes []Volume `json:"volumes"`
	// FileSystems and NFSExports are PowerFlex file's (NFS), exports with
	// their host lists.
	FileSystems []FileSystem `json:"fileSystems"`
	NFSExports  []NFSExport  `json:"nfsExports"`
}

// System is a system in State.
type System = system

// SDC is an SDC in State.
type SDC = sdc

// Volume is a volume in State.
type Volume struct {
	ID       string    `json:"id"`
	Name     string    `json:"name"`
	SizeInKb int       `json:"sizeInKb"`
	SystemID string    `json:"systemId"`
	Mappings []Mapping `json:"mappedSdcInfo"`
}

// Mapping is a volume's mapping to one SDC in State.
type Mapping = mapping

// Snapshot returns the full state (a State), deterministic and sorted.
func (s *Sim) Snapshot() any { return s.State() }

// State returns the full state.
func (s *Sim) State() State {
	s.mu.RLock()
	defer s.mu.RUnlock()
	st := State{Version: s.version, Systems: []System{}, SDCs: []SDC{}, Volumes: []Volume{},
		FileSystems: []FileSystem{}, NFSExports: []NFSExport{}}
	for _, id := range sortedKeys(s.systems) {
		st.Systems = append(st.Systems, *s.systems[id])
	}
	for _, id := range sortedKeys(s.sdcs) {
		st.SDCs = append(st.SDCs, s.sdcs[id].state())
	}
	for _, id := range sortedKeys(s.volumes) {
		st.Volumes = append(st.Volumes, s.volumes[id].state())
	}
	for _, id := range sortedKeys(s.fileSystems) {
		st.FileSystems = append(st.FileSystems, *s.fileSystems[id])
	}
	for _, id := range sortedKeys(s.exports) {
		st.NFSExports = append(st.NFSExports, s.exports[id].clone())
	}
	return st
}

// state is the SDC as State lists it.
func (c *sdc) state() SDC {
	out := *c
	out.IPs = slices.Clone(c.IPs)
	return out
}

// state is the volume as State lists it, mappings sorted by SDC ID.
func (v *volume) state() Volume {
	out := Volume{ID: v.ID, Name: v.Name, SizeInKb: v.SizeInKb, SystemID: v.SystemID, Mappings: []Mapping{}}
	for _, m := range v.Mappings {
		out.Mappings = append(out.Mappings, *m)
	}
	slices.SortFunc(out.Mappings, func(a, b Mapping) int { return strings.Compare(a.SdcID, b.SdcID) })
	return out
}

// MappedVolumes returns the IDs of the volumes mapped to the SDC (by ID,
// name or GUID), sorted.
func (s *Sim) MappedVolumes(host string) []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []string
	for _, c := range s.findSDC(host) {
		for _, id := range sortedKeys(s.volumes) {
			if s.volumes[id].mapping(c.ID) != nil {
				out = append(out, id)
			}
		}
	}
	return out
}

// SDCID returns the ID of the one SDC with this ID, name, GUID or IP.
func (s *Sim) SDCID(host string) (string, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	found := s.findSDC(host)
	if len(found) != 1 {
		return "", false
	}
	return found[0].ID, true
}

// Credentials returns the accepted username and password.
func (s *Sim) Credentials() (username, password string) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.username, s.password
}

// Logins returns how many successful logins the simulator has served.
func (s *Sim) Logins() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.logins
}

// ExpireSessions invalidates every token: the next request with an old
// token gets a 401 with a JSON body, which makes goscaleio log in again.
func (s *Sim) ExpireSessions() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokens = map[string]bool{}
}

// SetSignals sets an SDC's mdmConnectionState (Connected) and whether its
// statistics show I/O (IOActive). host is the SDC's ID, name, GUID or IP.
func (s *Sim) SetSignals(host string, sig simcore.Signals) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	found := s.findSDC(host)
	switch len(found) {
	case 0:
		return fmt.Errorf("powerflex: no SDC with id, name, GUID or IP %q", host)
	case 1:
	default:
		return fmt.Errorf("powerflex: %d SDCs match %q", len(found), host)
	}
	if sig.Connected != nil {
		found[0].Connected = *sig.Connected
	}
	if sig.IOActive != nil {
		found[0].IOActive = *sig.IOActive
	}
	s.changes.Touch(collSDCs, found[0].ID)
	return nil
}

// apiError is PowerFlex's error body.
type apiError struct {
	Message        string `json:"message"`
	HTTPStatusCode int    `json:"httpStatusCode"`
	ErrorCode      int    `json:"errorCode"`
}

// ErrorBody returns PowerFlex's error body.
func (s *Sim) ErrorBody(status int, msg string) []byte {
	return errorBody(status, 0, msg)
}

func errorBody(status, code int, msg string) []byte {
	b, _ := json.Marshal(apiError{Message: msg, HTTPStatusCode: status, ErrorCode: code})
	return b
}

// findSDC returns the SDCs whose ID, name, GUID or one of whose IPs equals
// key (GUIDs compared case-insensitively). The caller holds s.mu.
func (s *Sim) findSDC(key string) []*sdc {
	var out []*sdc
	for _, id := range sortedKeys(s.sdcs) {
		c := s.sdcs[id]
		if key != "" && (c.ID == key || c.Name == key || strings.EqualFold(c.GUID, key) || slices.Contains(c.IPs, key)) {
			out = append(out, c)
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// VolumeID returns the ID of the volume with this name.
func (s *Sim) VolumeID(name string) (string, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for id, v := range s.volumes {
		if v.Name == name {
			return id, true
		}
	}
	return "", false
}
