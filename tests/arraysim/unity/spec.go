package unity

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/fenced-project/fenced/tests/arraysim/fixture"
)

// Spec is the fixture's `spec` section for a Unity XT array. Hosts may be
// listed explicitly and/or generated per fixture node the way csi-unity
// registers a node: a host named by the node's long name, with host IP
// ports for that name and the node IP, its iSCSI IQN and FC WWPNs as
// initiators, and N LUNs giving it access.
//
//	spec:
//	  username: admin
//	  password: Password123!
//	  generate:
//	    lunsPerNode: 3
//	    nodes: [worker-1]      # default: every fixture node
//	  hosts:
//	    - name: backup-host
//	      iqns: [iqn.2001-04.com.example:backup]
//	  luns:
//	    - name: shared-lun
//	      hostAccess:
//	        - {host: worker-1.cluster.local, hlu: 9}
//	        - {host: backup-host, hlu: 0}
//	  filesystems:
//	    - name: csivol-nfs-1
//	      shares:
//	        - {rootAccessHosts: [worker-1.cluster.local]}
type Spec struct {
	Username string `yaml:"username"`
	Password string `yaml:"password"`
	// Model and SoftwareVersion are what basicSystemInfo reports.
	Model           string `yaml:"model"`
	SoftwareVersion string `yaml:"softwareVersion"`
	// Generate creates a csi-unity style host per fixture node.
	Generate *GenerateSpec `yaml:"generate"`
	Hosts    []HostSpec    `yaml:"hosts"`
	LUNs     []LUNSpec     `yaml:"luns"`
	// Filesystems are file systems on the array's one NAS server, each
	// with its NFS shares.
	Filesystems []FilesystemSpec `yaml:"filesystems"`
}

// GenerateSpec describes the per-node hosts.
type GenerateSpec struct {
	// LUNsPerNode LUNs are created per node, each granting only that
	// node's host access (HLUs 0..N-1).
	LUNsPerNode int `yaml:"lunsPerNode"`
	// Nodes limits generation to these fixture node names.
	Nodes []string `yaml:"nodes"`
}

// HostSpec is one explicit host. Names need not be unique (as on a real
// Unity, which lets an operator create two hosts with one name).
type HostSpec struct {
	Name    string   `yaml:"name"`
	IQNs    []string `yaml:"iqns"`
	WWNs    []string `yaml:"wwns"`
	IPPorts []string `yaml:"ipPorts"`
	// Disconnected and IOActive seed the host's signals (default:
	// connected and idle).
	Disconnected bool `yaml:"disconnected"`
	IOActive     bool `yaml:"ioActive"`
}

// LUNSpec is one explicit LUN.
type LUNSpec struct {
	Name       string           `yaml:"name"`
	HostAccess []HostAccessSpec `yaml:"hostAccess"`
}

// HostAccessSpec grants a host (by name; it must be unique) access to a LUN.
type HostAccessSpec struct {
	Host string `yaml:"host"`
	HLU  int    `yaml:"hlu"`
	// AccessMask is the Unity HostLUNAccessEnum as a string ("1" production).
	AccessMask string `yaml:"accessMask"`
}

// FilesystemSpec is one file system (csi-unity creates one per NFS
// volume).
type FilesystemSpec struct {
	Name   string         `yaml:"name"`
	Shares []NFSShareSpec `yaml:"shares"`
}

// NFSShareSpec is one NFS share of a file system. Name defaults to
// "csishare-<file system name>" and Path to "/", as csi-unity's publish
// creates them (service/controller.go exportFilesystem); DefaultAccess to
// "0" (no access for hosts not listed). The four lists name hosts (each
// name must be unique).
type NFSShareSpec struct {
	Name                    string   `yaml:"name"`
	Path                    string   `yaml:"path"`
	DefaultAccess           string   `yaml:"defaultAccess"`
	ReadOnlyHosts           []string `yaml:"readOnlyHosts"`
	ReadWriteHosts          []string `yaml:"readWriteHosts"`
	ReadOnlyRootAccessHosts []string `yaml:"readOnlyRootAccessHosts"`
	RootAccessHosts         []string `yaml:"rootAccessHosts"`
}

func decodeSpec(node *yaml.Node) (Spec, error) {
	var s Spec
	if err := fixture.DecodeSpec(node, &s); err != nil {
		return s, fmt.Errorf("unity %w", err)
	}
	if s.Username == "" {
		s.Username = "admin"
	}
	if s.Password == "" {
		s.Password = "Password123!"
	}
	if s.Model == "" {
		s.Model = "Unity 480F"
	}
	if s.SoftwareVersion == "" {
		s.SoftwareVersion = "5.4.0"
	}
	if g := s.Generate; g != nil && (g.LUNsPerNode < 0 || g.LUNsPerNode > 4096) {
		return s, fmt.Errorf("unity spec: generate.lunsPerNode %d: want 0..4096", g.LUNsPerNode)
	}
	for i, h := range s.Hosts {
		if h.Name == "" {
			return s, fmt.Errorf("unity spec: hosts[%d].name is empty", i)
		}
	}
	for i, l := range s.LUNs {
		if l.Name == "" {
			return s, fmt.Errorf("unity spec: luns[%d].name is empty", i)
		}
		for j, a := range l.HostAccess {
			if a.Host == "" {
				return s, fmt.Errorf("unity spec: luns[%d].hostAccess[%d].host is empty", i, j)
			}
			if a.HLU < 0 || a.HLU > 16383 {
				return s, fmt.Errorf("unity spec: luns[%d].hostAccess[%d].hlu %d: want 0..16383", i, j, a.HLU)
			}
			switch a.AccessMask {
			case "":
				s.LUNs[i].HostAccess[j].AccessMask = "1"
			case "1", "2", "3":
			default:
				return s, fmt.Errorf("unity spec: luns[%d].hostAccess[%d].accessMask %q: want 1, 2 or 3", i, j, a.AccessMask)
			}
		}
	}
	names := map[string]bool{}
	for i, fs := range s.Filesystems {
		if fs.Name == "" || len(fs.Name) > maxFSName || names[fs.Name] {
			return s, fmt.Errorf("unity spec: filesystems[%d].name %q: want a unique name of 1..%d characters", i, fs.Name, maxFSName)
		}
		names[fs.Name] = true
		for j, sh := range fs.Shares {
			sp := &s.Filesystems[i].Shares[j]
			if sh.Name == "" {
				sp.Name = shareNamePrefix + fs.Name
			}
			if sh.Path == "" {
				sp.Path = "/"
			}
			if !strings.HasPrefix(sp.Path, "/") {
				return s, fmt.Errorf("unity spec: filesystems[%d].shares[%d].path %q: want an absolute path", i, j, sh.Path)
			}
			switch sh.DefaultAccess {
			case "":
				sp.DefaultAccess = "0"
			case "0", "1", "2", "3", "4":
			default:
				return s, fmt.Errorf("unity spec: filesystems[%d].shares[%d].defaultAccess %q: want 0..4", i, j, sh.DefaultAccess)
			}
		}
	}
	return s, nil
}

// expandSpec turns generated nodes into explicit hosts and LUNs.
func expandSpec(s Spec, nodes []fixture.Node) ([]HostSpec, []LUNSpec, error) {
	var hosts []HostSpec
	var luns []LUNSpec
	if g := s.Generate; g != nil {
		want := map[string]bool{}
		for _, n := range g.Nodes {
			want[n] = true
		}
		for _, n := range nodes {
			if len(want) > 0 && !want[n.Name] {
				continue
			}
			delete(want, n.Name)
			// csi-unity's node plugin names the host by the node's name and
			// gives it IP ports for that name and the node's IPs
			// (dell/csi-unity service/node.go addNewNodeToArray:
			// CreateHost and CreateHostIPPort with opts.LongNodeName, which
			// is X_CSI_UNITY_NODENAME, the node's spec.nodeName).
			h := HostSpec{Name: n.Name, WWNs: n.WWPNs}
			if n.IQN != "" {
				h.IQNs = []string{n.IQN}
			}
			h.IPPorts = append(h.IPPorts, n.Name)
			if n.IP != "" {
				h.IPPorts = append(h.IPPorts, n.IP)
			}
			hosts = append(hosts, h)
			for i := 0; i < g.LUNsPerNode; i++ {
				luns = append(luns, LUNSpec{
					Name:       fmt.Sprintf("csivol-%s-%02d", n.ShortName(), i),
					HostAccess: []HostAccessSpec{{Host: h.Name, HLU: i, AccessMask: "1"}},
				})
			}
		}
		for n := range want {
			return nil, nil, fmt.Errorf("unity spec: generate.nodes: %q is not a fixture node", n)
		}
	}
	hosts = append(hosts, s.Hosts...)
	luns = append(luns, s.LUNs...)
	return hosts, luns, nil
}
