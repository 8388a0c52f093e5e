// Package powerscale simulates the PowerScale (OneFS) platform API closely
// enough that the real goisilon client (v1.20.0) accepts it as an array.
//
// It models what fencing touches: /platform/latest, Basic and session
// authentication (POST /session/1/session/ with isisessid and isicsrf
// cookies, X-CSRF-Token), NFS exports through the v2 and v4 APIs with
// access zones and the four client lists (clients, root_clients,
// read_write_clients, read_only_clients — always present, [] when empty),
// PUT as a partial update answering 204, and NFS client statistics
// (/platform/3/statistics/summary/client) as the I/O signal. Sim implements
// simcore.Family; wrap it with simcore.New for faults, audit and /_sim/.
package powerscale

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/fenced-project/fenced/tests/arraysim/simcore"
)

// Sim is one simulated PowerScale cluster. It is safe for concurrent use.
type Sim struct {
	mu sync.Mutex

	username    string
	password    string
	clusterName string
	release     string
	pageSize    int

	zones   map[string]bool
	exports map[int]*export
	nextID  int
	clients map[string]*client // by IP
	// dirs are the directories under /ifs (namespace API).
	dirs map[string]bool

	// sessions maps an isisessid to its CSRF token.
	sessions map[string]string
	// changes records the objects of a Snapshot changed since the audit
	// last asked (track.go).
	changes simcore.ChangeLog
}

var (
	_ simcore.Family         = (*Sim)(nil)
	_ simcore.SessionExpirer = (*Sim)(nil)
	_ simcore.Tracker        = (*Sim)(nil)
)

// export is one NFS export.
type export struct {
	ID          int
	Zone        string
	Paths       []string
	Description string
	// Lists holds the four client lists by their JSON field name.
	Lists map[string][]string
}

// ListNames are the four export client lists, in the API's field names.
var ListNames = []string{"clients", "root_clients", "read_write_clients", "read_only_clients"}

// client is an NFS client the array may see traffic from: a node (or any
// host) known by IP, name and FQDN, with its array-side signals.
type client struct {
	IP        string
	Name      string
	FQDN      string
	Connected bool
	IOActive  bool
}

// Snapshot is the simulator's state in a deterministic order.
type Snapshot struct {
	Zones   []string      `json:"zones"`
	Exports []ExportState `json:"exports"`
	Clients []ClientState `json:"clients"`
	// Directories are the directories under /ifs.
	Directories []string `json:"directories"`
}

// ExportState is an export in a Snapshot.
type ExportState struct {
	ID               int      `json:"id"`
	Zone             string   `json:"zone"`
	Paths            []string `json:"paths"`
	Clients          []string `json:"clients"`
	RootClients      []string `json:"root_clients"`
	ReadWriteClients []string `json:"read_write_clients"`
	ReadOnlyClients  []string `json:"read_only_clients"`
}

// ClientState is a known NFS client and its signals in a Snapshot.
type ClientState struct {
	IP        string `json:"ip"`
	Name      string `json:"name,omitempty"`
	FQDN      string `json:"fqdn,omitempty"`
	Connected bool   `json:"connected"`
	IOActive  bool   `json:"ioActive"`
}

// Snapshot returns the full state.
func (s *Sim) Snapshot() any { return s.State() }

// State returns the full state as a typed Snapshot. Client lists keep the
// array's order: re-adding an entry appends it, so a dump after an
// unfence shows where order changed.
func (s *Sim) State() Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap := Snapshot{Zones: []string{}, Exports: []ExportState{}, Clients: []ClientState{}}
	for z := range s.zones {
		snap.Zones = append(snap.Zones, z)
	}
	sort.Strings(snap.Zones)
	for _, e := range s.sortedExportsLocked("") {
		snap.Exports = append(snap.Exports, e.state())
	}
	for _, c := range s.clients {
		snap.Clients = append(snap.Clients, c.state())
	}
	sort.Slice(snap.Clients, func(i, j int) bool { return snap.Clients[i].IP < snap.Clients[j].IP })
	snap.Directories = s.sortedDirsLocked()
	return snap
}

// state is the export as a Snapshot lists it.
func (e *export) state() ExportState {
	return ExportState{ID: e.ID, Zone: e.Zone, Paths: clone(e.Paths),
		Clients: clone(e.Lists["clients"]), RootClients: clone(e.Lists["root_clients"]),
		ReadWriteClients: clone(e.Lists["read_write_clients"]), ReadOnlyClients: clone(e.Lists["read_only_clients"])}
}

// state is the client as a Snapshot lists it.
func (c *client) state() ClientState {
	return ClientState{IP: c.IP, Name: c.Name, FQDN: c.FQDN, Connected: c.Connected, IOActive: c.IOActive}
}

func clone(l []string) []string {
	out := make([]string, len(l))
	copy(out, l)
	return out
}

// sortedExportsLocked lists exports by id, optionally of one zone.
func (s *Sim) sortedExportsLocked(zone string) []*export {
	out := make([]*export, 0, len(s.exports))
	for _, e := range s.exports {
		if zone == "" || e.Zone == zone {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// SetSignals sets an NFS client's signals. host is the client's IP, name
// or FQDN. IOActive makes the client appear in the client statistics
// (while it is connected and some export still lists it); Connected=false
// hides it from the statistics (NFS has no session state to show).
func (s *Sim) SetSignals(host string, sig simcore.Signals) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.findClientLocked(host)
	if c == nil {
		return fmt.Errorf("powerscale sim: no NFS client with IP, name or FQDN %q", host)
	}
	if sig.Connected != nil {
		c.Connected = *sig.Connected
	}
	if sig.IOActive != nil {
		c.IOActive = *sig.IOActive
	}
	s.changes.Touch(collClients, c.IP)
	return nil
}

func (s *Sim) findClientLocked(ref string) *client {
	if c, ok := s.clients[ref]; ok {
		return c
	}
	for _, c := range s.clients {
		if strings.EqualFold(c.Name, ref) || strings.EqualFold(c.FQDN, ref) {
			return c
		}
	}
	return nil
}

// ExpireSessions invalidates every session; the next request with an old
// isisessid gets 401 and the client logs in again.
func (s *Sim) ExpireSessions() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sessions = map[string]string{}
}

// listedLocked reports whether any export lists one of the client's
// strings (its IP, name or FQDN) in any list.
func (s *Sim) listedLocked(c *client) bool {
	for _, e := range s.exports {
		for _, name := range ListNames {
			for _, entry := range e.Lists[name] {
				if entry == c.IP || (c.Name != "" && strings.EqualFold(entry, c.Name)) ||
					(c.FQDN != "" && strings.EqualFold(entry, c.FQDN)) {
					return true
				}
			}
		}
	}
	return false
}
