package configs

import (
	"log/slog"
	"time"

	"github.com/fenced-project/fenced/arrayclients"
)

// Array is one storage array fenced can fence nodes at.
type Array struct {
	// Name identifies the array in clusters[].arrays, logs and metrics; a
	// DNS label, unique in the file.
	Name string `mapstructure:"name"`
	// Family is powerflex, powerstore, powerscale, powermax or unity.
	Family arrayclients.Family `mapstructure:"family"`
	// Endpoint is the management REST API's URL (https://host[:port]).
	Endpoint string `mapstructure:"endpoint"`
	// Username authenticates to the REST API.
	Username string `mapstructure:"username"`
	// PasswordFile holds the password (path or credential:NAME); one
	// trailing newline is ignored. Exactly one of PasswordFile and Password.
	PasswordFile string `mapstructure:"passwordFile"`
	// Password is an inline password, refused unless allowInlineSecrets is
	// true. Meant for throw-away test setups only.
	Password Secret `mapstructure:"password"`
	// CAFile is a PEM bundle that signs the array's certificate (path or
	// credential:NAME). Default: the system's roots.
	CAFile string `mapstructure:"caFile"`
	// Insecure skips TLS verification. Test arrays only; conflicts with CAFile.
	Insecure bool `mapstructure:"insecure"`
	// RequestTimeout bounds every request to the array. Default 10s.
	RequestTimeout time.Duration `mapstructure:"requestTimeout"`
	// CSIDefault marks this array as its family's default array in the CSI
	// driver's configuration (isDefault in the driver's secret): volumes
	// whose handles name no array (handles of old driver versions) are
	// placed on it. At most one array per family. Default false.
	CSIDefault bool `mapstructure:"csiDefault"`
	// MaxConcurrentCalls bounds the fencing calls (plan, apply, read-back,
	// undo) in flight to the array at once, over every node being fenced or
	// restored; more wait in fenced instead of timing out at a busy
	// management API. A call runs requests side by side (a PowerFlex
	// fence's per-volume unmaps) only on slots that are free. Default 8.
	MaxConcurrentCalls int `mapstructure:"maxConcurrentCalls"`
	// DriverName is the name of the CSI driver instance whose secret lists
	// this array (csi-powerstore's X_CSI_DRIVER_NAME, the Helm chart's
	// driverName): a node is resolved on this array with the node ID that
	// instance reported in the node's CSINode, and volumes of that driver
	// are taken to be of this array's family. Needed when one family has
	// several driver instances, each with its own name and node IDs (two
	// csi-powerstore installs with their own nodeNamePrefix). Default: the
	// family's Dell driver name (csi-powerstore.dellemc.com, ...), or the
	// one other name clusters[].drivers maps to the family (a single
	// driver installed under another name). A DNS subdomain of at most 63
	// characters.
	DriverName string `mapstructure:"driverName"`

	// PowerFlex holds PowerFlex-only settings.
	PowerFlex PowerFlexOptions `mapstructure:"powerflex"`
	// PowerMax holds PowerMax-only settings.
	PowerMax PowerMaxOptions `mapstructure:"powermax"`
	// PowerScale holds PowerScale-only settings.
	PowerScale PowerScaleOptions `mapstructure:"powerscale"`
	// PowerStore holds PowerStore-only settings.
	PowerStore PowerStoreOptions `mapstructure:"powerstore"`
	// Unity holds Unity-only settings.
	Unity UnityOptions `mapstructure:"unity"`
}

// UnityOptions are Unity XT settings.
type UnityOptions struct {
	// ArrayID is the array's ID as csi-unity's secret names it (arrayId,
	// e.g. APM00123456789): the driver writes it into every volume handle,
	// so fenced places a volume on this array by it (case-insensitive).
	// Without it only the driver's default array (csiDefault) can be
	// placed, and volumes of any other array are unprotected gaps.
	ArrayID string `mapstructure:"arrayID"`
}

// PowerFlexOptions select the PowerFlex system. At least one is required.
type PowerFlexOptions struct {
	// SystemID is the system's ID (as in the CSI driver's secret).
	// csi-vxflexos names the system by ID (or by name) in every volume
	// handle, so volumes are placed on this array by it.
	SystemID string `mapstructure:"systemID"`
	// SystemName is the system's name.
	SystemName string `mapstructure:"systemName"`
	// ExternalAccess lists the external (NAT) access addresses or CIDR
	// subnets csi-vxflexos adds to NFS exports beside each node's IP
	// (ExternalAccess in the driver's configuration). An export of a
	// node's volume that lists one makes the node unprotected
	// (external-access).
	ExternalAccess []string `mapstructure:"externalAccess"`
}

// PowerMaxOptions select the array behind a Unisphere endpoint.
type PowerMaxOptions struct {
	// SymmetrixID is the 12-digit array ID. Required.
	SymmetrixID string `mapstructure:"symmetrixID"`
	// ClusterPrefix is csi-powermax's cluster prefix
	// (X_CSI_K8S_CLUSTER_PREFIX, 1 to 3 letters or digits). With it a node's
	// host is found as csi-node-<prefix>-<node ID>; without it every node
	// needs a per-node override (clusters[].nodes).
	ClusterPrefix string `mapstructure:"clusterPrefix"`
	// NodeNameTemplate is csi-powermax's node name template
	// (X_CSI_IG_NODENAME_TEMPLATE, e.g. "k8s-%node%-host"), when the driver
	// has one: a node's host is then <prefix><node ID><suffix> (with -FC or
	// -NVMETCP for those protocols) instead of csi-node-<prefix>-<node ID>.
	NodeNameTemplate string `mapstructure:"nodeNameTemplate"`
	// VSphereHost is the host or host group csi-powermax uses for every
	// node in vSphere mode (X_CSI_VSPHERE_HOSTNAME, with
	// X_CSI_VSPHERE_ENABLED=true). Every node then resolves to that shared
	// host, and its volumes on this array are reported as not fenceable.
	VSphereHost string `mapstructure:"vsphereHost"`
}

// PowerScaleOptions are PowerScale (OneFS) settings.
type PowerScaleOptions struct {
	// ClusterName is the name csi-isilon's secret gives this cluster
	// (clusterName): the driver writes it into every volume handle, so
	// fenced places a volume on this array by it. Without it only the
	// driver's default cluster (csiDefault) can be placed, and volumes of
	// any other cluster are unprotected gaps.
	ClusterName string `mapstructure:"clusterName"`
	// Zone is the access zone of the exports. Default System.
	Zone string `mapstructure:"zone"`
	// SessionAuth uses session authentication instead of Basic
	// authentication on every request. Default false.
	SessionAuth bool `mapstructure:"sessionAuth"`
}

// PowerStoreOptions are PowerStore settings.
type PowerStoreOptions struct {
	// GlobalID is the array's global ID (globalID in csi-powerstore's
	// secret, e.g. PS4ebb8d4e8488): the driver writes it into every volume
	// handle, so fenced places a volume on this array by it (or by the
	// endpoint's IP, which old handles carry instead). Without it only
	// volumes with the endpoint's IP or, with csiDefault, bare UUIDs can be
	// placed; the rest are unprotected gaps.
	GlobalID string `mapstructure:"globalID"`
	// FenceMode is initiators (remove the host's initiators; default) or
	// detach (detach each volume from the host).
	FenceMode string `mapstructure:"fenceMode"`
	// ChapSecretsFile (path or credential:NAME) is a YAML map from initiator
	// port name to CHAP secret. Deprecated and ignored (a validation
	// warning): csi-powerstore's node plugin sets a new CHAP secret at every
	// start, and an unfence lets it set its own. A file still named is
	// read, checked and its secrets redacted from logs.
	ChapSecretsFile string `mapstructure:"chapSecretsFile"`
	// ExternalAccess lists the external (NAT) access addresses or CIDR
	// subnets csi-powerstore adds to NFS exports beside each node's IP
	// (X_CSI_POWERSTORE_EXTERNAL_ACCESS). An export of a node's volume
	// that lists one makes the node unprotected (external-access).
	ExternalAccess []string `mapstructure:"externalAccess"`
}

// PowerStore fence modes.
const (
	FenceModeInitiators = "initiators"
	FenceModeDetach     = "detach"
)

// DefaultPowerScaleZone is the access zone used when none is configured.
const DefaultPowerScaleZone = "System"

// DefaultMaxConcurrentCalls is the default of arrays[].maxConcurrentCalls.
const DefaultMaxConcurrentCalls = 8

// DefaultArray returns the values every arrays[] entry starts from.
// Family-specific defaults (PowerScale zone, PowerStore fence mode) are
// applied to arrays of that family only.
func DefaultArray() Array {
	return Array{RequestTimeout: arrayclients.DefaultRequestTimeout, MaxConcurrentCalls: DefaultMaxConcurrentCalls}
}

// applyFamilyDefaults fills the defaults that depend on the family.
func (a *Array) applyFamilyDefaults() {
	switch a.Family {
	case arrayclients.PowerScale:
		if a.PowerScale.Zone == "" {
			a.PowerScale.Zone = DefaultPowerScaleZone
		}
	case arrayclients.PowerStore:
		if a.PowerStore.FenceMode == "" {
			a.PowerStore.FenceMode = FenceModeInitiators
		}
	}
}

// Secret is a string that never shows itself: it prints, logs and encodes
// as [REDACTED]. Use Reveal to get the value.
type Secret string

const redacted = "[REDACTED]"

// Reveal returns the secret's value.
func (s Secret) Reveal() string { return string(s) }

// String implements fmt.Stringer.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return redacted
}

// GoString implements fmt.GoStringer.
func (s Secret) GoString() string { return s.String() }

// MarshalText implements encoding.TextMarshaler (and so JSON and YAML).
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// LogValue implements slog.LogValuer.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }
