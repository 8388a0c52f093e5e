package stonith

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/cluster/ledger"
	"github.com/fenced-project/fenced/detector"
	"github.com/fenced-project/fenced/kube"
)

// Leadership is one term of this replica's Raft leadership. The daemon
// hands one to Controller.Lead each time the replica becomes leader.
type Leadership interface {
	// Context is cancelled when the leadership ends; every leader-only
	// goroutine and call derives from it.
	Context() context.Context
	// Term is the Raft term of this leadership. Commands are composed with
	// it, and the ledger refuses them under any other term.
	Term() uint64
	// VerifyLeader confirms with a quorum that this replica still leads.
	VerifyLeader(ctx context.Context) error
	// Apply commits a ledger command through Raft in this term and returns
	// once this replica's ledger has applied it: nil when applied, the
	// ledger's refusal (ledger.ErrConflict, ...) or a Raft error otherwise.
	Apply(ctx context.Context, cmd ledger.Command) error
	// SafeAt is when the previous leader's lease has surely run out: a step
	// that conflicts with what it was doing may start then (plus the array
	// request timeout, for a request it may still have in flight).
	SafeAt() time.Time
	// PeerArrayTimeout is the longest array request timeout another
	// replica advertised (0 when unknown): a previous leader's request
	// may run that long, when it is longer than this replica's own.
	PeerArrayTimeout() time.Duration
}

// LedgerReader reads the replicated ledger. *ledger.FSM implements it.
type LedgerReader interface {
	// Read calls fn with the current state under a read lock; fn must not
	// keep references into it.
	Read(fn func(s *ledger.State))
}

var _ LedgerReader = (*ledger.FSM)(nil)

// Array is what the pipeline needs of an array adapter.
// arrayclients.Adapter implements it.
type Array interface {
	Name() string
	Family() arrayclients.Family
	Holds(loc arrayclients.VolumeLocation) bool
	Cover(id arrayclients.Identity, v arrayclients.VolumeRef) (arrayclients.Cut, *arrayclients.Gap)
	Plan(ctx context.Context, id arrayclients.Identity, vols []arrayclients.VolumeRef) (arrayclients.Plan, error)
	Apply(ctx context.Context, plan arrayclients.Plan) error
	Verify(ctx context.Context, plan arrayclients.Plan) (arrayclients.Verification, error)
	Undo(ctx context.Context, plan arrayclients.Plan, scope arrayclients.RestoreScope) error
	VerifyRestore(ctx context.Context, plan arrayclients.Plan, scope arrayclients.RestoreScope) (arrayclients.Verification, error)
}

var _ Array = arrayclients.Adapter(nil)

// KubeAPI is what the pipeline needs of one cluster's API server: direct
// reads and the writes. *kube.Writer implements it.
type KubeAPI interface {
	CheckAPIServer(ctx context.Context) error
	GetNode(ctx context.Context, name string) (*corev1.Node, error)
	PodsOnNode(ctx context.Context, node string) ([]corev1.Pod, error)
	PendingDetaches(ctx context.Context, node string) ([]string, error)
	// AttachedPVs names the PersistentVolumes attached or attaching to
	// the node as the API server has them now (not a cache).
	AttachedPVs(ctx context.Context, node string) ([]string, error)
	AddTaints(ctx context.Context, node string, taints ...corev1.Taint) (bool, error)
	RemoveTaints(ctx context.Context, node string, taints ...corev1.Taint) (bool, error)
	ForceDeletePod(ctx context.Context, namespace, name string, uid types.UID) (bool, error)
	Event(ctx context.Context, target kube.EventTarget, eventType, reason, key, message string) error
}

var _ KubeAPI = (*kube.Writer)(nil)

// FootprintSource is one cluster's storage footprints as Kubernetes shows
// them. *kube.Footprints implements it.
type FootprintSource interface {
	// Volumes returns every volume Kubernetes has attached or is attaching
	// to the node; it fails while the caches have not synced.
	Volumes(node string) ([]arrayclients.KubeVolume, error)
	// Wanted names the PersistentVolumes whose attachments to the node are
	// not being deleted.
	Wanted(node string) ([]string, error)
	// Nodes names every node with a volume attachment.
	Nodes() []string
	// PersistentVolumes returns every CSI PersistentVolume, attached or
	// not; it fails while the caches have not synced.
	PersistentVolumes() ([]arrayclients.KubeVolume, error)
}

var _ FootprintSource = (*kube.Footprints)(nil)

// DetectorStatus is this replica's detector view of one cluster: its doubt
// about itself and the storm guard. *detector.Runner implements it.
type DetectorStatus interface {
	Status() detector.Status
}

var _ DetectorStatus = (*detector.Runner)(nil)

// The Controller receives verdict changes as the detector's Publisher.
var _ detector.Publisher = (*Controller)(nil)
