package powerstore

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/fenced-project/fenced/tests/arraysim/fixture"
)

// Spec is the fixture's `spec` section for a PowerStore array. Every field
// is optional. Objects may be listed explicitly (Hosts, HostGroups,
// Volumes) and/or generated per fixture node (PerNode).
type Spec struct {
	// Username and Password are the REST API credentials (default
	// admin / Password123!).
	Username string `yaml:"username"`
	Password string `yaml:"password"`
	// ApplianceID names the single appliance (default A1).
	ApplianceID string `yaml:"applianceID"`
	// ClusterName is the cluster's name (default PS-sim).
	ClusterName string `yaml:"clusterName"`
	// Release is the software release reported by software_installed
	// (default 4.1.0.0).
	Release string `yaml:"release"`
	// PageSize is the default page size of collection GETs (default 100,
	// the array's); a page that is not the whole collection answers 206.
	PageSize int `yaml:"pageSize"`
	// HostGroups are created first; hosts join them by name.
	HostGroups []GroupSpec `yaml:"hostGroups"`
	// Volumes are standalone volumes; volumes named by mappings are
	// created on demand.
	Volumes []VolumeSpec `yaml:"volumes"`
	// Hosts are explicit hosts.
	Hosts []HostSpec `yaml:"hosts"`
	// FileSystems are file systems on the array's NAS server, each with
	// the NFS export csi-powerstore publishes it through.
	FileSystems []FileSystemSpec `yaml:"fileSystems"`
	// PerNode generates one host per fixture node, named as csi-powerstore
	// names it.
	PerNode *PerNodeSpec `yaml:"perNode"`
	// DetachNotAttachedStatus is the status of a detach of a volume the
	// host does not have: 400 (default) or 422. Both are array answers:
	// csi-powerstore PR #147 ("the array gives two different status
	// codes") added the 422 case to detachVolumeFromHost.
	DetachNotAttachedStatus int `yaml:"detachNotAttachedStatus"`
	// NFSRemoveAbsent is what PATCH nfs_export does with a removal of an
	// entry its list does not hold: "refuse" (400, nothing of the request
	// applied) or "ignore" (that removal skipped, the rest applied). No
	// public source says which a PowerStore does, so both are offered;
	// empty takes the environment variable EnvNFSRemoveAbsent, else
	// "refuse".
	NFSRemoveAbsent string `yaml:"nfsRemoveAbsent"`
	// NASInterfaceIP is the IPv4 address of every NAS server's preferred
	// file interface (GET file_interface/<id>; csi-powerstore's NFS
	// publish puts it into the publish context). Default 127.0.0.1.
	NASInterfaceIP string `yaml:"nasInterfaceIP"`
}

// EnvNFSRemoveAbsent names the environment variable that sets
// Spec.NFSRemoveAbsent where a spec leaves it empty, so a whole test run
// can be repeated under either behaviour.
const EnvNFSRemoveAbsent = "ARRAYSIM_POWERSTORE_NFS_REMOVE_ABSENT"

// NFS PATCH behaviours for a removal of an absent entry.
const (
	NFSRemoveAbsentRefuse = "refuse"
	NFSRemoveAbsentIgnore = "ignore"
)

// GroupSpec is an explicit host group with the volumes mapped to it.
type GroupSpec struct {
	Name    string    `yaml:"name"`
	Volumes []MapSpec `yaml:"volumes"`
}

// VolumeSpec is a standalone volume.
type VolumeSpec struct {
	Name   string `yaml:"name"`
	SizeGB int64  `yaml:"sizeGB"`
}

// MapSpec maps a volume (created if missing) at a LUN (0 = next free).
type MapSpec struct {
	Volume string `yaml:"volume"`
	LUN    int64  `yaml:"lun"`
}

// HostSpec is an explicit host.
type HostSpec struct {
	Name       string          `yaml:"name"`
	OSType     string          `yaml:"osType"`
	HostGroup  string          `yaml:"hostGroup"`
	Connected  *bool           `yaml:"connected"`
	IOActive   *bool           `yaml:"ioActive"`
	Initiators []InitiatorSpec `yaml:"initiators"`
	Volumes    []MapSpec       `yaml:"volumes"`
}

// InitiatorSpec is one host initiator.
type InitiatorSpec struct {
	PortName           string `yaml:"portName"`
	PortType           string `yaml:"portType"`
	ChapSingleUsername string `yaml:"chapSingleUsername"`
	ChapSinglePassword string `yaml:"chapSinglePassword"`
	ChapMutualUsername string `yaml:"chapMutualUsername"`
	ChapMutualPassword string `yaml:"chapMutualPassword"`
}

// PerNodeSpec generates a host per fixture node: named
// `<prefix>-<machineID>-<ip>` (csi-powerstore's node ID), with an iSCSI
// initiator from the node's IQN and/or FC initiators from its WWPNs, and
// Volumes volumes mapped at LUNs 1..N.
type PerNodeSpec struct {
	// Nodes limits generation to these node names (default: every node).
	Nodes []string `yaml:"nodes"`
	// Prefix is the CSI node-name prefix (default csi-node).
	Prefix string `yaml:"prefix"`
	// NoIPSuffix names hosts `<prefix>-<machineID>` (older driver
	// versions, and the name the CSI controller falls back to).
	NoIPSuffix bool `yaml:"noIPSuffix"`
	// Protocol is iSCSI (default), FC or both.
	Protocol string `yaml:"protocol"`
	// Volumes is the number of volumes mapped to each host (default 2).
	Volumes *int `yaml:"volumes"`
	// HostGroup puts every generated host in this group (created if missing).
	HostGroup string `yaml:"hostGroup"`
	// Connected (default true) and IOActive (default false) seed signals.
	Connected *bool `yaml:"connected"`
	IOActive  *bool `yaml:"ioActive"`
	// ChapUsername and ChapPassword, when set, are the CHAP single
	// credentials of every generated iSCSI initiator.
	ChapUsername string `yaml:"chapUsername"`
	ChapPassword string `yaml:"chapPassword"`
}

// Defaults for a Spec.
const (
	DefaultUsername = "admin"
	DefaultPassword = "Password123!"
	defaultPageSize = 100
	maxPageSize     = 2000
	maxHostNameLen  = 64
	defaultSizeGB   = 8
)

// CSINodeName is the host name csi-powerstore gives a node: the CSI node ID
// `<prefix>-<machineID>-<ip>` (prefix defaults to csi-node).
func CSINodeName(prefix, machineID, ip string) string {
	if prefix == "" {
		prefix = "csi-node"
	}
	return prefix + "-" + machineID + "-" + ip
}

// FormatWWPN writes a WWPN the way PowerStore reports FC port names:
// lower-case hex pairs separated by colons.
func FormatWWPN(w string) (string, error) {
	hexOnly := strings.ToLower(strings.TrimPrefix(strings.ReplaceAll(w, ":", ""), "0x"))
	if len(hexOnly) != 16 {
		return "", fmt.Errorf("wwpn %q: want 16 hex digits", w)
	}
	var b strings.Builder
	for i := 0; i < 16; i += 2 {
		c1, c2 := hexOnly[i], hexOnly[i+1]
		if !isHex(c1) || !isHex(c2) {
			return "", fmt.Errorf("wwpn %q: not hexadecimal", w)
		}
		if i > 0 {
			b.WriteByte(':')
		}
		b.WriteByte(c1)
		b.WriteByte(c2)
	}
	return b.String(), nil
}

func isHex(c byte) bool { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') }

// New builds a simulator from a fixture spec and the fixture's nodes.
func New(spec *yaml.Node, nodes []fixture.Node) (*Sim, error) {
	var sp Spec
	if err := fixture.DecodeSpec(spec, &sp); err != nil {
		return nil, fmt.Errorf("powerstore %w", err)
	}
	return NewFromSpec(sp, nodes)
}

// NewFromSpec builds a simulator from a decoded Spec.
func NewFromSpec(sp Spec, nodes []fixture.Node) (*Sim, error) {
	s := &Sim{
		username:     orDefault(sp.Username, DefaultUsername),
		password:     orDefault(sp.Password, DefaultPassword),
		applianceID:  orDefault(sp.ApplianceID, "A1"),
		clusterName:  orDefault(sp.ClusterName, "PS-sim"),
		release:      orDefault(sp.Release, "4.1.0.0"),
		defaultLimit: defaultPageSize,
		maxLimit:     maxPageSize,
		hosts:        map[string]*host{},
		groups:       map[string]*hostGroup{},
		volumes:      map[string]*volume{},
		mappings:     map[string]*mapping{},
		nasServers:   map[string]*nasServer{},
		fileSystems:  map[string]*fileSystem{},
		exports:      map[string]*nfsExport{},
		sessions:     map[string]string{},
		logins:       map[string]bool{},
		now:          time.Now,
	}
	switch sp.DetachNotAttachedStatus {
	case 0:
		s.detachNotAttached = http.StatusBadRequest
	case http.StatusBadRequest, http.StatusUnprocessableEntity:
		s.detachNotAttached = sp.DetachNotAttachedStatus
	default:
		return nil, fmt.Errorf("powerstore spec: detachNotAttachedStatus %d: want 400 or 422", sp.DetachNotAttachedStatus)
	}
	s.nfsRemoveAbsent = sp.NFSRemoveAbsent
	where := "nfsRemoveAbsent"
	if s.nfsRemoveAbsent == "" {
		s.nfsRemoveAbsent, where = os.Getenv(EnvNFSRemoveAbsent), EnvNFSRemoveAbsent
	}
	switch s.nfsRemoveAbsent {
	case "":
		s.nfsRemoveAbsent = NFSRemoveAbsentRefuse
	case NFSRemoveAbsentRefuse, NFSRemoveAbsentIgnore:
	default:
		return nil, fmt.Errorf("powerstore spec: %s %q: want %q or %q", where, s.nfsRemoveAbsent, NFSRemoveAbsentRefuse, NFSRemoveAbsentIgnore)
	}
	s.nasInterfaceIP = orDefault(sp.NASInterfaceIP, "127.0.0.1")
	if ip := net.ParseIP(s.nasInterfaceIP); ip == nil || ip.To4() == nil {
		return nil, fmt.Errorf("powerstore spec: nasInterfaceIP %q is not an IPv4 address", sp.NASInterfaceIP)
	}
	if sp.PageSize < 0 || sp.PageSize > maxPageSize {
		return nil, fmt.Errorf("powerstore spec: pageSize %d: want 1..%d", sp.PageSize, maxPageSize)
	}
	if sp.PageSize > 0 {
		s.defaultLimit = sp.PageSize
	}
	for i, g := range sp.HostGroups {
		if g.Name == "" {
			return nil, fmt.Errorf("powerstore spec: hostGroups[%d].name is empty", i)
		}
		if _, err := s.ensureGroup(g.Name); err != nil {
			return nil, fmt.Errorf("powerstore spec: hostGroups[%d]: %w", i, err)
		}
	}
	for i, v := range sp.Volumes {
		if v.Name == "" {
			return nil, fmt.Errorf("powerstore spec: volumes[%d].name is empty", i)
		}
		s.ensureVolume(v.Name, v.SizeGB)
	}
	s.ensureNASLocked(DefaultNASName)
	for i, fs := range sp.FileSystems {
		if err := s.addFileSystemSpec(fs); err != nil {
			return nil, fmt.Errorf("powerstore spec: fileSystems[%d] (%s): %w", i, fs.Name, err)
		}
	}
	for i, h := range sp.Hosts {
		if err := s.addHostSpec(h); err != nil {
			return nil, fmt.Errorf("powerstore spec: hosts[%d] (%s): %w", i, h.Name, err)
		}
	}
	if sp.PerNode != nil {
		if err := s.addPerNode(*sp.PerNode, nodes); err != nil {
			return nil, fmt.Errorf("powerstore spec: perNode: %w", err)
		}
	}
	for i, g := range sp.HostGroups {
		gid := uuidFor("host_group", g.Name)
		for j, m := range g.Volumes {
			if err := s.mapSpec("", gid, m); err != nil {
				return nil, fmt.Errorf("powerstore spec: hostGroups[%d].volumes[%d]: %w", i, j, err)
			}
		}
	}
	return s, nil
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func (s *Sim) ensureGroup(name string) (string, error) {
	id := uuidFor("host_group", name)
	if _, ok := s.groups[id]; !ok {
		s.groups[id] = &hostGroup{ID: id, Name: name}
	}
	return id, nil
}

func (s *Sim) ensureVolume(name string, sizeGB int64) string {
	id := uuidFor("volume", name)
	if _, ok := s.volumes[id]; !ok {
		if sizeGB <= 0 {
			sizeGB = defaultSizeGB
		}
		wwn := "naa.68ccf098" + strings.ReplaceAll(id, "-", "")[:24]
		s.volumes[id] = &volume{ID: id, Name: name, Size: sizeGB << 30, WWN: wwn}
	}
	return id
}

func (s *Sim) addHostSpec(hs HostSpec) error {
	if hs.Name == "" {
		return errors.New("name is empty")
	}
	if len(hs.Name) > maxHostNameLen {
		return fmt.Errorf("name %q is longer than %d characters", hs.Name, maxHostNameLen)
	}
	id := uuidFor("host", hs.Name)
	if _, dup := s.hosts[id]; dup {
		return fmt.Errorf("duplicate host name %q", hs.Name)
	}
	h := &host{ID: id, Name: hs.Name, OSType: orDefault(hs.OSType, "Linux"),
		Initiators: map[string]*initiator{}, Connected: true}
	if hs.Connected != nil {
		h.Connected = *hs.Connected
	}
	if hs.IOActive != nil {
		h.IOActive = *hs.IOActive
	}
	if hs.HostGroup != "" {
		gid, err := s.ensureGroup(hs.HostGroup)
		if err != nil {
			return err
		}
		h.GroupID = gid
	}
	for i, in := range hs.Initiators {
		if in.PortName == "" {
			return fmt.Errorf("initiators[%d].portName is empty", i)
		}
		pt := orDefault(in.PortType, "iSCSI")
		if !validPortType(pt) {
			return fmt.Errorf("initiators[%d].portType %q: want iSCSI, FC or NVMe", i, in.PortType)
		}
		if owner := s.initiatorOwnerLocked(in.PortName); owner != nil || h.Initiators[in.PortName] != nil {
			return fmt.Errorf("initiators[%d].portName %q is already registered", i, in.PortName)
		}
		h.Initiators[in.PortName] = &initiator{PortName: in.PortName, PortType: pt,
			ChapSingleUsername: in.ChapSingleUsername, ChapSinglePassword: in.ChapSinglePassword,
			ChapMutualUsername: in.ChapMutualUsername, ChapMutualPassword: in.ChapMutualPassword}
	}
	s.hosts[id] = h
	for i, m := range hs.Volumes {
		if err := s.mapSpec(id, "", m); err != nil {
			return fmt.Errorf("volumes[%d]: %w", i, err)
		}
	}
	return nil
}

func validPortType(pt string) bool { return pt == "iSCSI" || pt == "FC" || pt == "NVMe" }

// mapSpec maps a volume named by a fixture to a host or a group.
func (s *Sim) mapSpec(hostID, groupID string, m MapSpec) error {
	if m.Volume == "" {
		return errors.New("volume is empty")
	}
	volID := s.ensureVolume(m.Volume, 0)
	if msg, status := s.attachLocked(hostID, groupID, volID, m.LUN); status != 0 {
		return fmt.Errorf("map %s: %s", m.Volume, msg)
	}
	return nil
}

func (s *Sim) addPerNode(pn PerNodeSpec, nodes []fixture.Node) error {
	want := map[string]bool{}
	for _, n := range pn.Nodes {
		want[n] = true
	}
	protocol := orDefault(pn.Protocol, "iSCSI")
	if protocol != "iSCSI" && protocol != "FC" && protocol != "both" {
		return fmt.Errorf("protocol %q: want iSCSI, FC or both", pn.Protocol)
	}
	nVols := 2
	if pn.Volumes != nil {
		nVols = *pn.Volumes
	}
	if nVols < 0 {
		return fmt.Errorf("volumes %d: want >= 0", nVols)
	}
	found := 0
	for _, n := range nodes {
		if len(want) > 0 && !want[n.Name] {
			continue
		}
		found++
		if n.MachineID == "" {
			return fmt.Errorf("node %s: machineID is empty (csi-powerstore names hosts by it)", n.Name)
		}
		name := CSINodeName(pn.Prefix, n.MachineID, n.IP)
		if pn.NoIPSuffix {
			name = strings.TrimSuffix(name, "-"+n.IP)
		}
		hs := HostSpec{Name: name, OSType: "Linux", HostGroup: pn.HostGroup, Connected: pn.Connected, IOActive: pn.IOActive}
		if protocol == "iSCSI" || protocol == "both" {
			if n.IQN == "" {
				return fmt.Errorf("node %s: iqn is empty but protocol is %s", n.Name, protocol)
			}
			hs.Initiators = append(hs.Initiators, InitiatorSpec{PortName: n.IQN, PortType: "iSCSI",
				ChapSingleUsername: pn.ChapUsername, ChapSinglePassword: pn.ChapPassword})
		}
		if protocol == "FC" || protocol == "both" {
			if len(n.WWPNs) == 0 {
				return fmt.Errorf("node %s: wwpns is empty but protocol is %s", n.Name, protocol)
			}
			for _, w := range n.WWPNs {
				pw, err := FormatWWPN(w)
				if err != nil {
					return fmt.Errorf("node %s: %w", n.Name, err)
				}
				hs.Initiators = append(hs.Initiators, InitiatorSpec{PortName: pw, PortType: "FC"})
			}
		}
		for i := 0; i < nVols; i++ {
			hs.Volumes = append(hs.Volumes, MapSpec{Volume: fmt.Sprintf("pvc-%s-%d", n.Name, i), LUN: int64(i + 1)})
		}
		if err := s.addHostSpec(hs); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
	}
	if len(want) > 0 && found != len(want) {
		return fmt.Errorf("nodes %v: some are not fixture nodes", pn.Nodes)
	}
	return nil
}
