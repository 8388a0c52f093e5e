package detector

import (
	"context"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/kube"
)

// ClusterAPI is what the Runner needs of one cluster's API server.
// *kube.Cluster implements it.
type ClusterAPI interface {
	// StartWatches starts the Node, Lease and CSINode informers, delivering
	// their events to h, and returns at once.
	StartWatches(ctx context.Context, h kube.Handler) error
	// WatchState reports whether the informers synced and whether the Lease
	// watch is broken.
	WatchState() kube.WatchState
	// Node and CSINode return cached objects (never to be modified).
	Node(name string) (*corev1.Node, bool)
	CSINode(name string) (*storagev1.CSINode, bool)
	// ReadLease reads a node's Lease from the API server, bypassing the
	// cache; NotFound is reported with an error apierrors.IsNotFound knows.
	ReadLease(ctx context.Context, node string) (*coordinationv1.Lease, error)
	// CheckAPIServer checks that the API server is ready.
	CheckAPIServer(ctx context.Context) error
	// ProbeKubelet dials the node's kubelet port and returns the address.
	ProbeKubelet(ctx context.Context, node *corev1.Node) (string, error)
}

var _ ClusterAPI = (*kube.Cluster)(nil)

// HealthSource is one array's view of a node. arrayclients.Adapter
// implements it.
type HealthSource interface {
	Health(ctx context.Context, id arrayclients.Identity) (arrayclients.Health, error)
}

var _ HealthSource = arrayclients.Adapter(nil)

// IdentitySource returns the identities learned (through the ledger) for a
// node, and names the arrays where its identity is ambiguous.
type IdentitySource interface {
	NodeIdentities(cluster, node string) (ids []arrayclients.Identity, ambiguous []string)
}

// VersionedIdentities is an IdentitySource that tells when its identities
// may have changed: IdentitiesVersion returns a value that changes
// whenever any node's identities do (it may change more often). A reader
// that keeps identities it read reads them again only when it changed.
type VersionedIdentities interface {
	IdentitySource
	IdentitiesVersion() uint64
}

// FootprintSource names the arrays that hold part of a node's storage
// footprint as Kubernetes shows it now, the early verdict's array
// witnesses. complete is false when some footprint volume cannot be placed
// on a configured array or has no identity to cut there: such a node never
// gets an early verdict.
type FootprintSource interface {
	WitnessArrays(cluster, node string) (arrays []string, complete bool)
}

// ObservationSink records what this replica learned, through the ledger:
// its kubelet probes (vantage observations the other replicas read back
// through a VantageSource) and the identity inputs of healthy nodes.
type ObservationSink interface {
	RecordProbe(ctx context.Context, obs ProbeObservation) error
	RecordNodeInputs(ctx context.Context, node arrayclients.Node) error
}

// VantageSource returns the other replicas' fresh kubelet probes of the
// node (on the leader: a VantageBoard fed by the followers' reports). The
// Runner replaces what it held of the other replicas with the answer, so a
// replica left out counts as no vantage, never as unreachable.
type VantageSource interface {
	Probes(cluster, node string) []ProbeObservation
}

// Guard reports the replica group's state.
type Guard interface {
	// Quorum reports whether the replica group has a quorum.
	Quorum() bool
	// Paused reports whether fencing is paused for the cluster.
	Paused(cluster string) bool
}

// Lead reports whether this replica leads the replica group now.
type Lead interface {
	Leading() bool
}

// Publisher receives verdict changes (the fencing pipeline). It is called
// from the Runner's loop and must not block for long.
type Publisher interface {
	PublishVerdicts(ctx context.Context, changes []Verdict)
}
