package powermax

import (
	"fmt"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/fenced-project/fenced/tests/arraysim/fixture"
)

// Spec is the fixture's `spec` section for a PowerMax array (a Unisphere
// endpoint serving one Symmetrix). It may list hosts explicitly and/or
// generate one host per fixture node the way csi-powermax names them.
//
//	spec:
//	  symmetrixID: "000197900046"
//	  username: smc
//	  password: smc
//	  generate:
//	    clusterPrefix: TST     # csi-powermax X_CSI_K8S_CLUSTER_PREFIX
//	    protocol: iSCSI        # iSCSI (default) or FC
//	    volumesPerNode: 3
//	    nodes: [worker-1]      # default: every fixture node
//	  hosts:
//	    - id: legacy-host
//	      type: Fibre
//	      initiators:
//	        - id: 10000000c9a0b0ff
//	          paths: ["FA-1D:4", "FA-2D:4"]
//	      volumes: ["00200"]
type Spec struct {
	SymmetrixID string `yaml:"symmetrixID"`
	Username    string `yaml:"username"`
	Password    string `yaml:"password"`
	// Version is what /univmax/restapi/version reports (default V10.1.0.2).
	Version string `yaml:"version"`
	// MetricsIntervalSeconds is the spacing of performance samples
	// (default 300). Unisphere keeps its performance database at 5-minute
	// ("diagnostic") granularity and serves REST metrics from it: samples
	// are 5 minutes apart, stamped on 5-minute boundaries, and the newest
	// is the last completed interval, so it is 0 to 5 minutes old (Dell's
	// "Unisphere for VMAX REST API examples, episode 4: gathering
	// performance data via REST": "extracted via REST calls at 5 minute
	// granularity"; Unisphere's performance metrics help: "5 min
	// diagnostic"). A shorter interval is a test knob, not an array.
	MetricsIntervalSeconds int `yaml:"metricsIntervalSeconds"`
	// Generate creates a csi-powermax style host per fixture node.
	Generate *GenerateSpec `yaml:"generate"`
	// Hosts are explicit hosts, each with its own masking view.
	Hosts []HostSpec `yaml:"hosts"`
	// Volumes are volumes in no storage group (created, not yet
	// published).
	Volumes []string `yaml:"volumes"`
	// RefuseEmptyInitiatorGroupInView makes the array refuse to remove a
	// host's last initiators while the host is in a masking view. Whether
	// a real PowerMax accepts that edit is not documented; this mode
	// tests fenced's fallback for an array that refuses it.
	RefuseEmptyInitiatorGroupInView bool `yaml:"refuseEmptyInitiatorGroupInView"`
}

// GenerateSpec describes the per-node hosts.
type GenerateSpec struct {
	// ClusterPrefix is csi-powermax's cluster prefix (at most 3 characters).
	ClusterPrefix string `yaml:"clusterPrefix"`
	// Protocol is iSCSI (default) or FC: it selects the host ID suffix,
	// initiators (the node's IQN or WWPNs) and director ports.
	Protocol string `yaml:"protocol"`
	// VolumesPerNode is the number of volumes in each node's storage group.
	VolumesPerNode int `yaml:"volumesPerNode"`
	// Nodes limits generation to these fixture node names.
	Nodes []string `yaml:"nodes"`
}

// HostSpec is one explicit host.
type HostSpec struct {
	ID string `yaml:"id"`
	// Type is iSCSI (default), Fibre or NVMe/TCP.
	Type       string          `yaml:"type"`
	Initiators []InitiatorSpec `yaml:"initiators"`
	// MaskingView, StorageGroup and PortGroup default to csi-powermax
	// style names derived from the host ID.
	MaskingView  string   `yaml:"maskingView"`
	StorageGroup string   `yaml:"storageGroup"`
	PortGroup    string   `yaml:"portGroup"`
	Volumes      []string `yaml:"volumes"`
	// Disconnected and IOActive seed the host's signals (default:
	// connected and idle).
	Disconnected bool `yaml:"disconnected"`
	IOActive     bool `yaml:"ioActive"`
}

// InitiatorSpec is one host initiator (bare IQN or WWN) and the director
// ports it is logged in through ("SE-1E:000", "FA-1D:4").
type InitiatorSpec struct {
	ID    string   `yaml:"id"`
	Paths []string `yaml:"paths"`
}

var (
	symIDPattern  = regexp.MustCompile(`^[0-9]{12}$`)
	volIDPattern  = regexp.MustCompile(`^[0-9A-F]{5}$`)
	dirPortRegexp = regexp.MustCompile(`^[A-Z]{2}-[0-9]{1,2}[A-H]:[0-9]{1,3}$`)
)

// decodeSpec reads and validates the spec, naming the bad field.
func decodeSpec(node *yaml.Node) (Spec, error) {
	var s Spec
	if err := fixture.DecodeSpec(node, &s); err != nil {
		return s, fmt.Errorf("powermax %w", err)
	}
	if s.SymmetrixID == "" {
		s.SymmetrixID = "000197900046"
	}
	if !symIDPattern.MatchString(s.SymmetrixID) {
		return s, fmt.Errorf("powermax spec: symmetrixID %q: want 12 digits", s.SymmetrixID)
	}
	if s.Username == "" {
		s.Username = "smc"
	}
	if s.Password == "" {
		s.Password = "smc"
	}
	if s.Version == "" {
		s.Version = "V10.1.0.2"
	}
	if s.MetricsIntervalSeconds == 0 {
		s.MetricsIntervalSeconds = 300
	}
	if s.MetricsIntervalSeconds < 1 || s.MetricsIntervalSeconds > 300 {
		return s, fmt.Errorf("powermax spec: metricsIntervalSeconds %d: want 1..300", s.MetricsIntervalSeconds)
	}
	if g := s.Generate; g != nil {
		if len(g.ClusterPrefix) == 0 || len(g.ClusterPrefix) > 3 {
			return s, fmt.Errorf("powermax spec: generate.clusterPrefix %q: want 1..3 characters", g.ClusterPrefix)
		}
		switch strings.ToLower(g.Protocol) {
		case "", "iscsi":
			g.Protocol = "iSCSI"
		case "fc":
			g.Protocol = "FC"
		default:
			return s, fmt.Errorf("powermax spec: generate.protocol %q: want iSCSI or FC", g.Protocol)
		}
		if g.VolumesPerNode < 0 || g.VolumesPerNode > 4096 {
			return s, fmt.Errorf("powermax spec: generate.volumesPerNode %d: want 0..4096", g.VolumesPerNode)
		}
	}
	for i := range s.Hosts {
		h := &s.Hosts[i]
		if h.ID == "" {
			return s, fmt.Errorf("powermax spec: hosts[%d].id is empty", i)
		}
		switch h.Type {
		case "":
			h.Type = "iSCSI"
		case "iSCSI", "Fibre", "NVMe/TCP":
		default:
			return s, fmt.Errorf("powermax spec: hosts[%d].type %q: want iSCSI, Fibre or NVMe/TCP", i, h.Type)
		}
		for j, in := range h.Initiators {
			if in.ID == "" || strings.Contains(in.ID, "/") {
				return s, fmt.Errorf("powermax spec: hosts[%d].initiators[%d].id %q is not an IQN or WWN", i, j, in.ID)
			}
			for _, p := range in.Paths {
				if !dirPortRegexp.MatchString(p) {
					return s, fmt.Errorf("powermax spec: hosts[%d].initiators[%d].paths %q: want DIR-NX:port like SE-1E:000", i, j, p)
				}
			}
		}
		for _, v := range h.Volumes {
			if !volIDPattern.MatchString(v) {
				return s, fmt.Errorf("powermax spec: hosts[%d].volumes %q: want 5 hex digits", i, v)
			}
		}
	}
	for _, v := range s.Volumes {
		if !volIDPattern.MatchString(v) {
			return s, fmt.Errorf("powermax spec: volumes %q: want 5 hex digits", v)
		}
	}
	return s, nil
}

// HostID is the host csi-powermax creates for a node ID: csi-node-<prefix>-<nodeID>,
// with -FC for Fibre Channel and -NVMETCP for NVMe/TCP.
func HostID(clusterPrefix, nodeID, protocol string) string {
	id := "csi-node-" + clusterPrefix + "-" + nodeID
	switch protocol {
	case "FC", "Fibre":
		id += "-FC"
	case "NVMeTCP", "NVMe/TCP":
		id += "-NVMETCP"
	}
	return id
}

// expandSpec turns generated nodes into explicit hosts.
func expandSpec(s Spec, nodes []fixture.Node) ([]HostSpec, error) {
	var hosts []HostSpec
	if g := s.Generate; g != nil {
		want := map[string]bool{}
		for _, n := range g.Nodes {
			want[n] = true
		}
		vol := 0x100
		for _, n := range nodes {
			if len(want) > 0 && !want[n.Name] {
				continue
			}
			delete(want, n.Name)
			nodeID := n.ShortName() // csi-powermax's node ID: the name up to its first dot
			h := HostSpec{ID: HostID(g.ClusterPrefix, nodeID, g.Protocol)}
			suffix := ""
			if g.Protocol == "FC" {
				h.Type = "Fibre"
				suffix = "-FC"
				if len(n.WWPNs) == 0 {
					return nil, fmt.Errorf("powermax spec: generate: node %s has no wwpns for FC", n.Name)
				}
				for _, w := range n.WWPNs {
					h.Initiators = append(h.Initiators, InitiatorSpec{ID: w, Paths: []string{"FA-1D:4", "FA-2D:4"}})
				}
			} else {
				h.Type = "iSCSI"
				if n.IQN == "" {
					return nil, fmt.Errorf("powermax spec: generate: node %s has no iqn for iSCSI", n.Name)
				}
				h.Initiators = []InitiatorSpec{{ID: n.IQN, Paths: []string{"SE-1E:000", "SE-2E:000"}}}
			}
			h.MaskingView = "csi-mv-" + g.ClusterPrefix + "-" + nodeID + suffix
			h.StorageGroup = "csi-no-srp-sg-" + g.ClusterPrefix + "-" + nodeID + suffix
			h.PortGroup = "csi-" + g.ClusterPrefix + "-" + strings.ToLower(g.Protocol) + "-PG"
			for i := 0; i < g.VolumesPerNode; i++ {
				h.Volumes = append(h.Volumes, fmt.Sprintf("%05X", vol))
				vol++
			}
			hosts = append(hosts, h)
		}
		for n := range want {
			return nil, fmt.Errorf("powermax spec: generate.nodes: %q is not a fixture node", n)
		}
	}
	for _, h := range s.Hosts {
		if h.MaskingView == "" {
			h.MaskingView = h.ID + "-MV"
		}
		if h.StorageGroup == "" {
			h.StorageGroup = h.ID + "-SG"
		}
		if h.PortGroup == "" {
			h.PortGroup = h.ID + "-PG"
		}
		hosts = append(hosts, h)
	}
	return hosts, nil
}
