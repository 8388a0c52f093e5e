package arrayclients

import (
	"context"
	"time"
)

// Config is what an adapter needs to talk to one array. The daemon fills it
// from the validated configuration file; secrets arrive already read from
// their files and must never be logged.
type Config struct {
	// Name is the array's configured name, unique in the configuration.
	Name string
	// Family selects the adapter.
	Family Family
	// Endpoint is the array's management URL (scheme, host, port; PowerStore
	// adapters append /api/rest themselves when it is missing).
	Endpoint string
	// Username and Password authenticate to the array's REST API.
	Username string
	Password string `json:"-"`
	// Insecure skips TLS verification (test arrays only).
	Insecure bool
	// CAFile is a PEM bundle that signs the array's certificate.
	CAFile string
	// RequestTimeout bounds every request to the array.
	RequestTimeout time.Duration
	// ArrayIDs are the identifiers under which the family's CSI driver
	// names this array in volume handles (PowerFlex system ID and name,
	// PowerStore global ID and management IP, PowerMax symmetrix ID, Unity
	// array ID, PowerScale cluster name); see Holds.
	ArrayIDs []string
	// CSIDefault marks the driver's default array: volumes whose handles
	// name no array (legacy handles) are placed on it.
	CSIDefault bool

	// SystemID selects the PowerFlex system (by ID or, when SystemName is
	// set, by name).
	SystemID   string
	SystemName string
	// SymmetrixID selects the PowerMax array behind a Unisphere endpoint.
	SymmetrixID string
	// PowerMaxClusterPrefix is csi-powermax's cluster prefix
	// (X_CSI_K8S_CLUSTER_PREFIX, 1..3 letters or digits): the PowerMax
	// adapter names a node's host csi-node-<prefix>-<nodeID>. Empty: nodes
	// resolve only through per-node overrides.
	PowerMaxClusterPrefix string
	// PowerMaxNodeNameTemplate is csi-powermax's node name template
	// (X_CSI_IG_NODENAME_TEMPLATE, e.g. "k8s-%node%-host"): the node's host
	// is then <prefix><nodeID><suffix> (ParsePowerMaxNodeNameTemplate).
	PowerMaxNodeNameTemplate string
	// PowerMaxVSphereHost is the host or host group csi-powermax shares
	// between every node in vSphere mode (X_CSI_VSPHERE_HOSTNAME, with
	// X_CSI_VSPHERE_ENABLED): nodes resolve to it as a shared host, whose
	// volumes cannot be fenced per node.
	PowerMaxVSphereHost string
	// Zone is the PowerScale access zone of the exports (default "System").
	Zone string
	// SessionAuth selects PowerScale session authentication instead of
	// Basic authentication on every request.
	SessionAuth bool
	// PowerStoreFenceMode is "initiators" (remove the host's initiators,
	// default) or "detach" (detach each volume from the host).
	PowerStoreFenceMode string
	// ExternalAccess lists the external (NAT) access addresses or CIDR
	// subnets the PowerStore or PowerFlex CSI driver adds to NFS exports
	// beside each node's IP (X_CSI_POWERSTORE_EXTERNAL_ACCESS, csi-vxflexos
	// ExternalAccess). An export of a footprint volume listing one is a
	// GapExternalAccess.
	ExternalAccess []string
	// ChapSecrets maps a PowerStore initiator port name to a CHAP secret
	// from the deprecated chapSecretsFile. The adapter never uses them
	// (csi-powerstore's node plugin sets its own at every start:
	// powerstore/chap.go); they are kept only to be redacted from logs.
	ChapSecrets map[string]string `json:"-"`
}

// DefaultRequestTimeout bounds array requests when the configuration does not.
const DefaultRequestTimeout = 10 * time.Second

// WithRequestTimeout bounds one array request by the configured request
// timeout d (DefaultRequestTimeout when d is not positive).
func WithRequestTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		d = DefaultRequestTimeout
	}
	return context.WithTimeout(ctx, d)
}

// PowerStore fence modes (Config.PowerStoreFenceMode).
const (
	PowerStoreModeInitiators = "initiators"
	PowerStoreModeDetach     = "detach"
)
