package testbed

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"
)

// The Dell CSI drivers a node reports in its CSINode.
const (
	DriverPowerFlex  = "csi-vxflexos.dellemc.com"
	DriverPowerStore = "csi-powerstore.dellemc.com"
	DriverPowerScale = "csi-isilon.dellemc.com"
	DriverPowerMax   = "csi-powermax.dellemc.com"
	DriverUnity      = "csi-unity.dellemc.com"
)

// Drivers lists the Dell CSI drivers in a fixed order.
func Drivers() []string {
	return []string{DriverPowerFlex, DriverPowerStore, DriverPowerScale, DriverPowerMax, DriverUnity}
}

// DefaultPowerStorePrefix is the PowerStore driver's default node name prefix
// (X_CSI_POWERSTORE_NODE_NAME_PREFIX).
const DefaultPowerStorePrefix = "csi-node"

// KubeletPort is the port of every node's kubelet listener.
const KubeletPort = 10250

// KwokLabel and KwokLabelValue mark the nodes kwok manages; removing the
// label stops the node's heartbeat.
const (
	KwokLabel      = "type"
	KwokLabelValue = "kwok"
)

// NodeSpec describes one simulated worker node: its name, address and the
// identities the storage arrays know it by. Empty fields are filled in by
// ControlPlane.AddNodes (see Complete).
type NodeSpec struct {
	// Name is the Node's name and short host name.
	Name string
	// IP is the node's InternalIP, in 127.0.0.0/8; the kubelet listener binds
	// it. Empty: a free one is allocated from 127.0.10.1 upwards.
	IP string
	// FQDN is the node's fully qualified host name. Default <Name>.cluster.test,
	// or Name itself when it has a dot (a node named by its FQDN).
	FQDN string
	// MachineID is the content of /etc/machine-id (32 lowercase hex digits).
	MachineID string
	// SDCGUID is the GUID of the node's PowerFlex SDC (upper-case UUID).
	// Empty for an NVMe/TCP node.
	SDCGUID string
	// NVMeTCP makes the node a PowerFlex NVMe/TCP node: no SDC, an NVMe
	// host named by its csi-vxflexos node ID instead. NQN is its NVMe
	// qualified name (default generated). NVMeHost is the node ID,
	// "<IP>-<sha256(Node UID)>" cut to 31 characters (dell/csi-powerflex
	// service/service.go generateNodeID); the Node UID is the API
	// server's, so ControlPlane.AddNodes sets it when it creates the Node.
	NVMeTCP  bool
	NQN      string
	NVMeHost string
	// IQN is the node's iSCSI initiator name.
	IQN string
	// WWPNs are the node's Fibre Channel port names (16 hex digits each).
	WWPNs []string
	// BootID is the first boot ID (a UUID). Default random.
	BootID string
	// PowerStorePrefix is the PowerStore driver's node name prefix. Default
	// DefaultPowerStorePrefix.
	PowerStorePrefix string
	// PowerStoreInstances are further csi-powerstore installs whose node
	// plugin runs on the node, each under its own driver name and node
	// name prefix (see PowerStoreInstance).
	PowerStoreInstances []PowerStoreInstance
}

// PowerStoreInstance is a further csi-powerstore install: the driver name
// is set at install time (X_CSI_DRIVER_NAME, the chart's driverName) and
// so is the node name prefix (X_CSI_POWERSTORE_NODE_NAME_PREFIX, the
// chart's nodeNamePrefix). Its node plugin reports the node ID
// <Prefix>-<machine ID>-<IP> (dell/csi-powerstore pkg/node/node.go
// updateNodeID, NodeGetInfo), which the kubelet files in the node's
// CSINode under Driver, beside the other drivers' entries; it registers
// the node's host under that ID on its own arrays (setupHost, emulated by
// csidriver.PowerStore.NodeStart).
type PowerStoreInstance struct {
	Driver string
	Prefix string
}

// NodeSpecs returns n specs named <prefix>-1 … <prefix>-n with every
// identity left for Complete to generate.
func NodeSpecs(prefix string, n int) []NodeSpec {
	specs := make([]NodeSpec, n)
	for i := range specs {
		specs[i].Name = fmt.Sprintf("%s-%d", prefix, i+1)
	}
	return specs
}

// Complete fills the empty identity fields with generated values (all but
// IP, which needs an allocator) and checks the spec.
func (s NodeSpec) Complete() (NodeSpec, error) {
	if s.Name == "" {
		return s, fmt.Errorf("node spec: name is empty")
	}
	if s.FQDN == "" {
		s.FQDN = s.Name + ".cluster.test"
		if strings.Contains(s.Name, ".") {
			s.FQDN = s.Name // a node named by its FQDN, as a kubelet on such a host names it
		}
	}
	if s.MachineID == "" {
		s.MachineID = randomHex(16)
	}
	switch {
	case s.NVMeTCP && s.SDCGUID != "":
		return s, fmt.Errorf("node spec %s: an NVMe/TCP node has no SDC GUID", s.Name)
	case s.NVMeTCP && s.NQN == "":
		s.NQN = "nqn.2014-08.org.nvmexpress:uuid:" + newUUID()
	case !s.NVMeTCP && s.SDCGUID == "":
		s.SDCGUID = strings.ToUpper(newUUID())
	}
	if s.IQN == "" {
		s.IQN = "iqn.1994-05.com.redhat:" + randomHex(6)
	}
	if len(s.WWPNs) == 0 {
		s.WWPNs = newWWPNs()
	}
	if s.BootID == "" {
		s.BootID = newUUID()
	}
	if s.PowerStorePrefix == "" {
		s.PowerStorePrefix = DefaultPowerStorePrefix
	}
	s.PowerStoreInstances = slices.Clone(s.PowerStoreInstances)
	seen := map[string]bool{DriverPowerStore: true}
	for i, in := range s.PowerStoreInstances {
		if in.Driver == "" || seen[in.Driver] || slices.Contains(Drivers(), in.Driver) {
			return s, fmt.Errorf("node spec %s: PowerStoreInstances[%d]: driver name %q is empty or already taken", s.Name, i, in.Driver)
		}
		seen[in.Driver] = true
		if in.Prefix == "" {
			s.PowerStoreInstances[i].Prefix = DefaultPowerStorePrefix
		}
	}
	if s.IP != "" {
		addr, err := netip.ParseAddr(s.IP)
		if err != nil || !addr.Is4() || !addr.IsLoopback() {
			return s, fmt.Errorf("node spec %s: ip %q is not an IPv4 address in 127.0.0.0/8", s.Name, s.IP)
		}
	}
	return s, nil
}

// CSINodeIDs returns the node ID each Dell CSI driver reports for this node,
// keyed by driver name (each of PowerStoreInstances under its own name),
// in the format the driver builds it:
//   - PowerFlex: the SDC GUID, or for an NVMe/TCP node its NVMe host's
//     name (empty until the Node exists);
//   - PowerStore: <prefix>-<machine ID>-<IP>;
//   - PowerScale: <name>=#=#=<FQDN>=#=#=<IP>;
//   - PowerMax: the node name cut at its first dot (ShortName);
//   - Unity: <UnityShortName>,<node name>.
func (s NodeSpec) CSINodeIDs() map[string]string {
	prefix := s.PowerStorePrefix
	if prefix == "" {
		prefix = DefaultPowerStorePrefix
	}
	pflex := s.SDCGUID
	if s.NVMeTCP {
		pflex = s.NVMeHost
	}
	ids := map[string]string{
		DriverPowerFlex:  pflex,
		DriverPowerStore: prefix + "-" + s.MachineID + "-" + s.IP,
		DriverPowerScale: s.Name + "=#=#=" + s.FQDN + "=#=#=" + s.IP,
		// dell/csi-powermax service/node.go NodeGetInfo: NodeId is
		// opts.NodeName, X_CSI_POWERMAX_NODENAME (the node's name) cut at its
		// first dot by service/service.go BeforeServe.
		DriverPowerMax: s.ShortName(),
		// dell/csi-unity service/node.go NodeGetInfo: NodeId is
		// opts.NodeName + "," + opts.LongNodeName, where LongNodeName is
		// X_CSI_UNITY_NODENAME (the node's name) and NodeName the same cut
		// at its first dot (service/service.go BeforeServe).
		DriverUnity: s.UnityShortName() + "," + s.Name,
	}
	for _, in := range s.PowerStoreInstances {
		p := in.Prefix
		if p == "" {
			p = DefaultPowerStorePrefix
		}
		ids[in.Driver] = p + "-" + s.MachineID + "-" + s.IP
	}
	return ids
}

// ShortName is the node name cut at its first dot: csi-powermax's node ID
// (dell/csi-powermax service/service.go BeforeServe:
// strings.Split(name, ".")[0]).
func (s NodeSpec) ShortName() string {
	short, _, _ := strings.Cut(s.Name, ".")
	return short
}

// UnityShortName is csi-unity's short name of the node: ShortName, but a
// node name that is an IPv4 address is kept whole (dell/csi-unity
// service/service.go BeforeServe, whose unanchored test this is).
func (s NodeSpec) UnityShortName() string {
	if ipv4InName.MatchString(s.Name) {
		return s.Name
	}
	return s.ShortName()
}

// ipv4InName is csi-unity's test for a node name that is an IP address.
var ipv4InName = regexp.MustCompile(`(25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)(\.(25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)){3}`)

// CSIDrivers returns the names of the CSI drivers whose node plugins run
// on the node: Dell's drivers (Drivers) and then PowerStoreInstances.
func (s NodeSpec) CSIDrivers() []string {
	out := Drivers()
	for _, in := range s.PowerStoreInstances {
		out = append(out, in.Driver)
	}
	return out
}

// newWWPNs returns two random Emulex-style port names. They have only 24
// random bits each: ControlPlane.AddNodes draws again on a clash.
func newWWPNs() []string {
	return []string{"10000090fa" + randomHex(3), "10000090fa" + randomHex(3)}
}

// newUUID returns a random version-4 UUID in lower case.
func newUUID() string {
	h := []byte(randomHex(16))
	h[12] = '4'
	h[16] = "89ab"[h[16]%4]
	return string(h[0:8]) + "-" + string(h[8:12]) + "-" + string(h[12:16]) + "-" + string(h[16:20]) + "-" + string(h[20:32])
}
