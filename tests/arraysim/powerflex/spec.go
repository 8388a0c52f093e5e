// Package powerflex simulates a Dell PowerFlex (ScaleIO) gateway well enough
// for the real github.com/dell/goscaleio client: token login, version,
// systems, SDCs with their connection state and I/O statistics, volumes with
// their SDC mappings (access mode and limits) and the mapping actions a fence
// and an unfence use (addMappedSdc/removeMappedSdc for SDCs,
// addMappedHost/removeMappedHost for NVMe/TCP hosts), and PowerFlex file: NAS servers, file systems and NFS
// exports with their host lists (nfs.go). It implements simcore.Family.
package powerflex

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/fenced-project/fenced/tests/arraysim/fixture"
)

// Spec is the fixture's spec section for a powerflex array.
type Spec struct {
	// Version is what GET /api/version answers (default "4.5"). Versions
	// >= 4.0 make the client send Bearer tokens, older ones Basic.
	Version string `yaml:"version"`
	// Username and Password are the accepted credentials (default
	// admin / Password123!).
	Username string `yaml:"username"`
	Password string `yaml:"password"`
	// Systems lists the PowerFlex systems behind the gateway (default one
	// system with a generated ID).
	Systems []SystemSpec `yaml:"systems"`
	// SDCs lists SDCs explicitly.
	SDCs []SDCSpec `yaml:"sdcs"`
	// Volumes lists volumes explicitly, with their mappings.
	Volumes []VolumeSpec `yaml:"volumes"`
	// PerNode generates, for every fixture node with an sdcGUID, an SDC
	// (name = node name, GUID, IP = node IP) with Volumes volumes mapped to it.
	PerNode *PerNodeSpec `yaml:"perNode"`
	// FileSystems lists PowerFlex file (NFS) file systems, each with its
	// export (PowerFlex >= 4.0).
	FileSystems []FileSystemSpec `yaml:"fileSystems"`
}

// FileSystemSpec is one file system of a system's NAS server.
type FileSystemSpec struct {
	// ID defaults to a UUID-shaped ID derived from the name.
	ID     string `yaml:"id"`
	Name   string `yaml:"name"`
	SizeGB int    `yaml:"sizeGB"`
	// System is the system ID (default: the first system).
	System string `yaml:"system"`
	// Export, when set, is the file system's NFS export.
	Export *NFSExportSpec `yaml:"export"`
}

// NFSExportSpec is a file system's NFS export. Host entries are stored as
// written (the array lists what csi-vxflexos adds as
// "<ip>/255.255.255.255").
type NFSExportSpec struct {
	// ID defaults to an ID derived from the file system's; Name to
	// "csishare-<file system name>" (csi-vxflexos NFSExportNamePrefix).
	ID   string `yaml:"id"`
	Name string `yaml:"name"`
	// DefaultAccess defaults to No_Access.
	DefaultAccess      string   `yaml:"defaultAccess"`
	NoAccessHosts      []string `yaml:"noAccessHosts"`
	ReadOnlyHosts      []string `yaml:"readOnlyHosts"`
	ReadOnlyRootHosts  []string `yaml:"readOnlyRootHosts"`
	ReadWriteHosts     []string `yaml:"readWriteHosts"`
	ReadWriteRootHosts []string `yaml:"readWriteRootHosts"`
}

// SystemSpec is one PowerFlex system.
type SystemSpec struct {
	ID   string `yaml:"id"`
	Name string `yaml:"name"`
}

// SDCSpec is one SDC.
type SDCSpec struct {
	// ID defaults to an ID derived from the GUID.
	ID   string `yaml:"id"`
	Name string `yaml:"name"`
	GUID string `yaml:"guid"`
	// IPs are the SDC's data IPs; the first is its sdcIp.
	IPs []string `yaml:"ips"`
	// System is the system ID (default: the first system).
	System string `yaml:"system"`
	// Connected sets mdmConnectionState (default true).
	Connected *bool `yaml:"connected"`
	// IOActive makes the SDC statistics show I/O while a volume is mapped
	// to it (default false).
	IOActive bool `yaml:"ioActive"`
	// HostType is SdcHost (default) or NVMeHost: an NVMe/TCP host of
	// PowerFlex >= 4.0, listed with the SDCs, named by csi-vxflexos
	// "<node IP>-<hash>" (service/service.go), with an NQN and neither GUID
	// nor SDC IPs.
	HostType string `yaml:"hostType"`
	// NQN is an NVMe host's NVMe qualified name (required for NVMeHost).
	NQN string `yaml:"nqn"`
}

// Host types of SDCSpec.HostType, as the gateway lists them.
const (
	HostTypeSDC  = "SdcHost"
	HostTypeNVMe = "NVMeHost"
)

// VolumeSpec is one volume.
type VolumeSpec struct {
	// ID defaults to an ID derived from the name.
	ID     string `yaml:"id"`
	Name   string `yaml:"name"`
	SizeGB int    `yaml:"sizeGB"`
	// System is the system ID (default: the first system).
	System   string        `yaml:"system"`
	Mappings []MappingSpec `yaml:"mappings"`
}

// MappingSpec maps a volume to an SDC.
type MappingSpec struct {
	// SDC is the SDC's ID, name or GUID.
	SDC string `yaml:"sdc"`
	// AccessMode is ReadWrite (default), ReadOnly or NoAccess.
	AccessMode    string `yaml:"accessMode"`
	LimitIops     int    `yaml:"limitIops"`
	LimitBwInMbps int    `yaml:"limitBwInMbps"`
}

// PerNodeSpec generates one SDC per fixture node (an NVMe host for a node
// with nvmeHost and no sdcGUID) and volumes mapped to it.
type PerNodeSpec struct {
	// Volumes is how many volumes each node's SDC has mapped.
	Volumes int `yaml:"volumes"`
	// AccessMode of the generated mappings (default ReadWrite).
	AccessMode string `yaml:"accessMode"`
	// LimitIops and LimitBwInMbps of the generated mappings (0 = unlimited).
	LimitIops     int `yaml:"limitIops"`
	LimitBwInMbps int `yaml:"limitBwInMbps"`
	// Connected and IOActive set the generated SDCs' signals (defaults
	// connected and active).
	Connected *bool `yaml:"connected"`
	IOActive  *bool `yaml:"ioActive"`
}

// Default credentials and version.
const (
	DefaultUsername = "admin"
	DefaultPassword = "Password123!"
	DefaultVersion  = "4.5"
)

// New builds a simulator from a fixture spec section and the fixture's nodes.
func New(spec *yaml.Node, nodes []fixture.Node) (*Sim, error) {
	var s Spec
	if err := fixture.DecodeSpec(spec, &s); err != nil {
		return nil, fmt.Errorf("powerflex %w", err)
	}
	return NewFromSpec(s, nodes)
}

// NewFromSpec builds a simulator from a decoded spec.
func NewFromSpec(spec Spec, nodes []fixture.Node) (*Sim, error) {
	sim := &Sim{
		version:  spec.Version,
		username: spec.Username,
		password: spec.Password,
		systems:  map[string]*system{},
		sdcs:     map[string]*sdc{},
		volumes:  map[string]*volume{},
		tokens:   map[string]bool{},

		fileSystems: map[string]*FileSystem{},
		exports:     map[string]*NFSExport{},
	}
	if sim.version == "" {
		sim.version = DefaultVersion
	}
	if sim.username == "" {
		sim.username = DefaultUsername
	}
	if sim.password == "" {
		sim.password = DefaultPassword
	}
	systems := spec.Systems
	if len(systems) == 0 {
		systems = []SystemSpec{{ID: derivedID("system", "default")}}
	}
	for i, ss := range systems {
		if !isHexID(ss.ID) {
			return nil, fmt.Errorf("powerflex spec: systems[%d].id: %q is not a 16-digit hex ID", i, ss.ID)
		}
		if _, dup := sim.systems[ss.ID]; dup {
			return nil, fmt.Errorf("powerflex spec: systems[%d].id: %q is used twice", i, ss.ID)
		}
		sim.systems[ss.ID] = &system{ID: ss.ID, Name: ss.Name}
	}
	defaultSystem := systems[0].ID

	for i, sd := range spec.SDCs {
		if err := sim.addSDC(sd, defaultSystem); err != nil {
			return nil, fmt.Errorf("powerflex spec: sdcs[%d]: %w", i, err)
		}
	}
	if pn := spec.PerNode; pn != nil {
		if err := sim.generate(*pn, nodes, defaultSystem); err != nil {
			return nil, fmt.Errorf("powerflex spec: perNode: %w", err)
		}
	}
	for i, vs := range spec.Volumes {
		if err := sim.addVolume(vs, defaultSystem); err != nil {
			return nil, fmt.Errorf("powerflex spec: volumes[%d]: %w", i, err)
		}
	}
	for i, fs := range spec.FileSystems {
		if err := sim.addFileSystem(fs, defaultSystem); err != nil {
			return nil, fmt.Errorf("powerflex spec: fileSystems[%d]: %w", i, err)
		}
	}
	return sim, nil
}

func (s *Sim) generate(pn PerNodeSpec, nodes []fixture.Node, systemID string) error {
	if pn.Volumes < 0 {
		return fmt.Errorf("volumes: must be >= 0, got %d", pn.Volumes)
	}
	connected := pn.Connected == nil || *pn.Connected
	io := pn.IOActive == nil || *pn.IOActive
	for _, n := range nodes {
		sd := SDCSpec{Name: n.Name, GUID: n.SDCGUID, IPs: []string{n.IP}, Connected: &connected, IOActive: io}
		host := n.SDCGUID
		switch {
		case n.SDCGUID != "":
		case n.NVMeHost != "":
			// csi-vxflexos' node plugin creates the NVMe host, named by
			// the node ID, with the node's NQN (service/service.go
			// setupNVMeHost).
			sd = SDCSpec{Name: n.NVMeHost, HostType: HostTypeNVMe, NQN: n.NQN, Connected: &connected, IOActive: io}
			host = n.NVMeHost
		default:
			continue
		}
		if err := s.addSDC(sd, systemID); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
		for i := range pn.Volumes {
			vs := VolumeSpec{
				Name:   fmt.Sprintf("%s-vol-%d", n.Name, i),
				SizeGB: 8,
				Mappings: []MappingSpec{{
					SDC: host, AccessMode: pn.AccessMode,
					LimitIops: pn.LimitIops, LimitBwInMbps: pn.LimitBwInMbps,
				}},
			}
			if err := s.addVolume(vs, systemID); err != nil {
				return fmt.Errorf("node %s: %w", n.Name, err)
			}
		}
	}
	return nil
}

func (s *Sim) addSDC(sd SDCSpec, defaultSystem string) error {
	switch sd.HostType {
	case "", HostTypeSDC:
		sd.HostType = HostTypeSDC
		if sd.GUID == "" {
			return fmt.Errorf("guid: required")
		}
		if len(sd.IPs) == 0 {
			return fmt.Errorf("ips: at least one IP is required")
		}
		if sd.NQN != "" {
			return fmt.Errorf("nqn: only an NVMeHost has one")
		}
	case HostTypeNVMe:
		if sd.Name == "" || sd.NQN == "" {
			return fmt.Errorf("name and nqn: required for an NVMeHost")
		}
		if sd.GUID != "" || len(sd.IPs) > 0 {
			return fmt.Errorf("guid and ips: an NVMeHost has neither")
		}
	default:
		return fmt.Errorf("hostType: %q is not %s or %s", sd.HostType, HostTypeSDC, HostTypeNVMe)
	}
	id := sd.ID
	if id == "" {
		key := sd.GUID
		if key == "" {
			key = "nvme\x00" + sd.NQN
		}
		id = derivedID("sdc", key)
	}
	if !isHexID(id) {
		return fmt.Errorf("id: %q is not a 16-digit hex ID", id)
	}
	if _, dup := s.sdcs[id]; dup {
		return fmt.Errorf("id: %q is used twice", id)
	}
	sys := sd.System
	if sys == "" {
		sys = defaultSystem
	}
	if _, ok := s.systems[sys]; !ok {
		return fmt.Errorf("system: %q is not a system of this array", sys)
	}
	s.sdcs[id] = &sdc{
		ID: id, Name: sd.Name, GUID: sd.GUID, IPs: append([]string(nil), sd.IPs...), SystemID: sys,
		Connected: sd.Connected == nil || *sd.Connected, IOActive: sd.IOActive,
	}
	if sd.HostType == HostTypeNVMe {
		s.sdcs[id].HostType, s.sdcs[id].NQN = sd.HostType, sd.NQN
	}
	return nil
}

func (s *Sim) addVolume(vs VolumeSpec, defaultSystem string) error {
	if vs.Name == "" {
		return fmt.Errorf("name: required")
	}
	id := vs.ID
	if id == "" {
		id = derivedID("volume", vs.Name)
	}
	if !isHexID(id) {
		return fmt.Errorf("id: %q is not a 16-digit hex ID", id)
	}
	if _, dup := s.volumes[id]; dup {
		return fmt.Errorf("id: %q (volume %s) is used twice", id, vs.Name)
	}
	for _, v := range s.volumes {
		if v.Name == vs.Name {
			return fmt.Errorf("name: %q is used twice", vs.Name)
		}
	}
	sys := vs.System
	if sys == "" {
		sys = defaultSystem
	}
	if _, ok := s.systems[sys]; !ok {
		return fmt.Errorf("system: %q is not a system of this array", sys)
	}
	size := vs.SizeGB
	if size == 0 {
		size = 8
	}
	v := &volume{ID: id, Name: vs.Name, SizeInKb: size * 1024 * 1024, SystemID: sys}
	for j, ms := range vs.Mappings {
		target := s.findSDC(ms.SDC)
		if len(target) != 1 {
			return fmt.Errorf("mappings[%d].sdc: %q matches %d SDCs, want exactly 1", j, ms.SDC, len(target))
		}
		mode := ms.AccessMode
		if mode == "" {
			mode = AccessReadWrite
		}
		if !validAccessMode(mode) {
			return fmt.Errorf("mappings[%d].accessMode: %q is not ReadWrite, ReadOnly or NoAccess", j, mode)
		}
		if v.mapping(target[0].ID) != nil {
			return fmt.Errorf("mappings[%d].sdc: %q is mapped twice", j, ms.SDC)
		}
		v.Mappings = append(v.Mappings, &mapping{
			SdcID: target[0].ID, AccessMode: mode, LimitIops: ms.LimitIops, LimitBwInMbps: ms.LimitBwInMbps,
		})
	}
	s.volumes[id] = v
	return nil
}

// derivedID makes a stable 16-hex-digit ID from a kind and a key.
func derivedID(kind, key string) string {
	sum := sha256.Sum256([]byte(kind + "\x00" + key))
	return hex.EncodeToString(sum[:8])
}

func isHexID(id string) bool {
	if len(id) != 16 {
		return false
	}
	_, err := hex.DecodeString(strings.ToLower(id))
	return err == nil
}
