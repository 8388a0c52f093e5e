// Package arrayclients fences Kubernetes nodes at Dell storage arrays.
//
// One adapter per array family (PowerFlex, PowerStore, PowerScale, PowerMax,
// Unity) wraps the official Dell Go client. Every adapter follows the same
// life cycle so that the fencing ledger can hold the plan before anything on
// the array changes:
//
//	Resolve(node)            -> Identity     (learned while the node is healthy)
//	Cover(identity, volume)  -> Cut or Gap   (no I/O: how a footprint volume is cut)
//	Plan(identity, volumes)  -> Plan         (read-only: exactly what a fence removes,
//	                                          and the cut of each footprint volume)
//	Apply(plan)                              (removes it; idempotent)
//	Verify(plan)             -> Verification (read-back: fenced or not, per volume)
//	Undo(plan, scope)                        (gives back the host-level identity, and
//	                                          per-volume access only within scope)
//	VerifyRestore(plan, scope) -> Verification (read-back of the restore)
//	Health(identity)         -> Health       (the array's own view of the node)
//
// The storage footprint (footprint.go, docs/footprint.md) is what a fence
// must cut: every volume Kubernetes attached to the node, placed on an
// array by its volume handle, plus whatever the array maps to the node.
//
// This package holds what every family shares: the Adapter interface and
// its types, the registry and its decorator, volume handle parsing, the
// restore scope rules, retries, metrics and the library log bridges. Each
// family lives in its own package, which imports this one and no other
// family, and exports its Constructor:
//
//	arrayclients/powerflex   PowerFlex: SDC (or NVMe host) unmaps, NFS export IPs
//	arrayclients/powerstore  PowerStore: host initiators (or detach), NFS export hosts
//	arrayclients/powerscale  PowerScale: NFS export client lists
//	arrayclients/powermax    PowerMax: host initiators
//	arrayclients/unity       Unity: LUN host access, NFS share hosts
//
// arrayclients/all hands every family to New (Options.Families).
package arrayclients

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// Family names an array family. The values are the ones used in configuration.
type Family string

// The supported array families.
const (
	PowerFlex  Family = "powerflex"
	PowerStore Family = "powerstore"
	PowerScale Family = "powerscale"
	PowerMax   Family = "powermax"
	Unity      Family = "unity"
)

// Families lists every supported family in a stable order.
var Families = []Family{PowerFlex, PowerStore, PowerScale, PowerMax, Unity}

// CSI driver names whose CSINode node IDs identify a node on an array.
const (
	DriverPowerFlex  = "csi-vxflexos.dellemc.com"
	DriverPowerStore = "csi-powerstore.dellemc.com"
	DriverPowerScale = "csi-isilon.dellemc.com"
	DriverPowerMax   = "csi-powermax.dellemc.com"
	DriverUnity      = "csi-unity.dellemc.com"
)

// Sentinel errors. Adapters wrap them with the array, node and operation.
var (
	// ErrNoIdentity means no array object was found for the node. It is
	// nothing to fence only while the node has no footprint volume on the
	// array; otherwise it is a gap (GapIdentityNotFound) and the node is
	// unprotected.
	ErrNoIdentity = errors.New("node has no identity on this array")
	// ErrAmbiguousIdentity means more than one array object could be this
	// node. Fencing is blocked until an operator resolves it (for example
	// with a per-node override in the configuration).
	ErrAmbiguousIdentity = errors.New("node identity on this array is ambiguous")
	// ErrUnreachable means the array's API could not be reached or did not
	// authenticate; the array's view of the node is unknown.
	ErrUnreachable = errors.New("array unreachable")
	// ErrPlanMismatch means a plan was handed to an adapter of another array
	// or family, or its entries do not decode.
	ErrPlanMismatch = errors.New("plan does not belong to this array")
	// ErrIdentityConflict means what an unfence would give back to the
	// node is registered on the array with an object that is not the
	// node's (a PowerStore initiator on another node's host). Retrying
	// the same call cannot cure it: an operator must look.
	ErrIdentityConflict = errors.New("node identity is registered with another node's object")
)

// Node is what fenced knows of a Kubernetes node when it resolves the node's
// identity on an array. It is filled from the Node and CSINode objects while
// the node is healthy, plus per-node overrides from the configuration.
type Node struct {
	// Cluster is the configured name of the Kubernetes cluster.
	Cluster string `json:"cluster"`
	// Name is the Kubernetes node name.
	Name string `json:"name"`
	// Addresses holds the node's InternalIP and ExternalIP addresses.
	Addresses []string `json:"addresses,omitempty"`
	// Hostname is the node's Hostname address (short name), if any.
	Hostname string `json:"hostname,omitempty"`
	// FQDN is the node's fully qualified name, if known.
	FQDN string `json:"fqdn,omitempty"`
	// CSINodeIDs maps a CSI driver name to the node ID that driver reported
	// in the node's CSINode object.
	CSINodeIDs map[string]string `json:"csiNodeIDs,omitempty"`
	// LabelIPs are further addresses the node's labels give CSI drivers to
	// publish to: csi-isilon's AzNetwork labels (PowerScaleLabelIPs).
	LabelIPs []string `json:"labelIPs,omitempty"`
	// Override, when set, names the array object that is this node, in the
	// family's own terms (SDC GUID, host name, export client strings
	// separated by commas). It replaces CSINode-based resolution.
	Override string `json:"override,omitempty"`
}

// Identity is a node's resolved identity on one array. It is serializable so
// the ledger can keep it: a fence never depends on reading a dead node's
// CSINode for the first time.
type Identity struct {
	Array  string `json:"array"`
	Family Family `json:"family"`
	// Node is the Kubernetes node name.
	Node string `json:"node"`
	// ObjectID is the array object's ID (SDC ID, host ID); empty for
	// PowerScale, which has no host object.
	ObjectID string `json:"objectID,omitempty"`
	// ObjectName is the array object's name (SDC name, host name).
	ObjectName string `json:"objectName,omitempty"`
	// Kind is the kind of array object, where a family has several (for
	// example "sdc" or "nvme-host" on PowerFlex, "host" or "shared-host"
	// on PowerMax); empty means the family's usual one.
	Kind string `json:"kind,omitempty"`
	// Keys are further exact identifiers: SDC GUID and IPs, initiator
	// port names, PowerScale export client strings (IP, name, FQDN).
	Keys []string `json:"keys,omitempty"`
	// ResolvedAt is when the identity was read from the array.
	ResolvedAt time.Time `json:"resolvedAt"`
}

// Plan is the serializable record of exactly what a fence removes on one
// array. It is committed to the ledger before the array is changed, and it is
// everything Undo needs.
type Plan struct {
	Array    string   `json:"array"`
	Family   Family   `json:"family"`
	Identity Identity `json:"identity"`
	// Entries is the family-specific list of what will be removed (volume
	// mappings with access modes and limits, initiators, export client
	// entries with their list, LUN host-access entries).
	Entries json.RawMessage `json:"entries"`
	// Summary is a short human-readable description for status and logs.
	Summary string `json:"summary"`
	// Volumes is, for each footprint volume on this array given to Plan,
	// the cut that removes the node's access, or the gap. Plans written
	// before footprints (ledger v1) have none.
	Volumes []VolumeCut `json:"volumes,omitempty"`
	// CreatedAt is when the plan was read from the array.
	CreatedAt time.Time `json:"createdAt"`
}

// Verification is what a read-back of the array shows.
type Verification struct {
	// Fenced is true when the node's identity has no access left on the
	// array: none of the plan's entries and nothing else.
	Fenced bool `json:"fenced"`
	// Restored is true when every entry of the plan is present again.
	Restored bool `json:"restored"`
	// Remaining lists access the identity still has (evidence for "not fenced").
	Remaining []string `json:"remaining,omitempty"`
	// Missing lists plan entries that are absent (evidence for "not restored").
	Missing []string `json:"missing,omitempty"`
	// Volumes is what the read-back shows of each footprint volume of the
	// plan. A fence read-back is Fenced only when none gives the node
	// access; a restore read-back is Restored only when no volume outside
	// the restore scope (or held by another node) gives it access.
	Volumes []VolumeCheck `json:"volumes,omitempty"`
	// CheckedAt is when the read-back was made.
	CheckedAt time.Time `json:"checkedAt"`
}

// Connectivity is the array's view of a node's storage paths.
type Connectivity string

// Connectivity values.
const (
	Connected    Connectivity = "connected"
	Disconnected Connectivity = "disconnected"
	// ConnectivityUnknown is reported when the array cannot tell (PowerScale
	// has no session state) or cannot be reached. It never means healthy.
	ConnectivityUnknown Connectivity = "unknown"
)

// IOState is the array's view of a node's I/O.
type IOState string

// IOState values.
const (
	IOActive  IOState = "active"
	IOIdle    IOState = "idle"
	IOUnknown IOState = "unknown"
)

// Health is the array's view of a node at one moment.
type Health struct {
	Array        string       `json:"array"`
	Node         string       `json:"node"`
	Connectivity Connectivity `json:"connectivity"`
	IO           IOState      `json:"io"`
	// Reason explains an unknown state or names the signal used.
	Reason string `json:"reason,omitempty"`
	// SampledAt is the time of the array sample the verdict rests on.
	SampledAt time.Time `json:"sampledAt"`
}

// Adapter fences nodes on one array. Implementations are safe for concurrent
// use and bound every call by the context and the array's request timeout.
type Adapter interface {
	// Name is the configured array name.
	Name() string
	// Family is the array's family.
	Family() Family
	// Holds reports, without I/O, whether a volume at loc is on this array
	// (Config.Holds).
	Holds(loc VolumeLocation) bool
	// Resolve finds the array object that is exactly this node. It returns
	// ErrNoIdentity when there is none and ErrAmbiguousIdentity when more
	// than one object could be it. It never writes.
	Resolve(ctx context.Context, node Node) (Identity, error)
	// Cover says, without I/O, which cut removes the identity's access to
	// a volume on this array, or why none can (a Gap).
	Cover(id Identity, v VolumeRef) (Cut, *Gap)
	// Plan reads what fencing the identity will remove: everything the
	// array gives the identity, and for each footprint volume (vols, those
	// of this array) the cut or the gap found by reading the volume. It
	// never writes.
	Plan(ctx context.Context, id Identity, vols []VolumeRef) (Plan, error)
	// Apply removes what the plan lists. Repeating it is harmless.
	Apply(ctx context.Context, plan Plan) error
	// Verify reads the array back after Apply: Fenced when the identity has
	// no access left, to any footprint volume of the plan or anything else.
	Verify(ctx context.Context, plan Plan) (Verification, error)
	// Undo gives back the host-level identity the plan removed and
	// per-volume access only within scope (see RestoreScope). Repeating it
	// is harmless.
	Undo(ctx context.Context, plan Plan, scope RestoreScope) error
	// VerifyRestore reads the array back after Undo: Restored when what
	// Undo gives back under scope is back and no footprint volume outside
	// it gives the node access.
	VerifyRestore(ctx context.Context, plan Plan, scope RestoreScope) (Verification, error)
	// Health reports the array's view of the node.
	Health(ctx context.Context, id Identity) (Health, error)
	// Check reports whether the array is reachable and authenticated.
	Check(ctx context.Context) CheckResult
}

// CheckResult is one array's connectivity check, for /status and /readyz.
type CheckResult struct {
	Array      string    `json:"array"`
	Family     Family    `json:"family"`
	Reachable  bool      `json:"reachable"`
	APIVersion string    `json:"apiVersion,omitempty"`
	Error      string    `json:"error,omitempty"`
	CheckedAt  time.Time `json:"checkedAt"`
}
