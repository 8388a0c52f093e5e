package detector

import (
	"time"

	"github.com/fenced-project/fenced/arrayclients"
)

// State is a node's health verdict.
type State string

// Verdict states.
const (
	// Healthy: the heartbeat is fresh (and, for a returning node, has been
	// fresh for the settle period).
	Healthy State = "healthy"
	// Suspect: the heartbeat is stale past the grace but the policy's
	// corroboration does not hold (yet), or a returning node is settling.
	Suspect State = "suspect"
	// Failed: the heartbeat is stale and the corroboration holds. Only this
	// state lets the fencing pipeline act.
	Failed State = "failed"
	// Blocked: no Failed verdict can be given, for the reason attached:
	// either this replica doubts its own view (every node is Blocked) or a
	// guard stops a node that would otherwise be Failed.
	Blocked State = "blocked"
)

// States lists every state in a stable order.
var States = []State{Healthy, Suspect, Failed, Blocked}

// Reason qualifies a verdict.
type Reason string

// Reasons.
const (
	// ReasonNone is the reason of a Healthy verdict.
	ReasonNone Reason = ""
	// ReasonHeartbeatStale: the Lease has not been renewed within the grace.
	ReasonHeartbeatStale Reason = "heartbeat-stale"
	// ReasonPartitioned: the heartbeat is stale but the kubelet answers from
	// some replica.
	ReasonPartitioned Reason = "partitioned"
	// ReasonStorm: more nodes are late or failed than the storm limit allows.
	ReasonStorm Reason = "storm"
	// ReasonAPIServerUnreachable: this replica cannot reach the API server.
	ReasonAPIServerUnreachable Reason = "apiserver-unreachable"
	// ReasonWatchStale: this replica's watches are not synced, broken, or
	// lag behind what a direct read of the API server shows.
	ReasonWatchStale Reason = "watch-stale"
	// ReasonNoQuorum: the replica group has no quorum.
	ReasonNoQuorum Reason = "no-quorum"
	// ReasonPaused: fencing is paused.
	ReasonPaused Reason = "paused"
	// ReasonIdentityAmbiguous: the node's identity on some array is
	// ambiguous; an operator has to resolve it.
	ReasonIdentityAmbiguous Reason = "identity-ambiguous"
)

// Verdict is one node's verdict with its evidence.
type Verdict struct {
	Cluster string `json:"cluster"`
	Node    string `json:"node"`
	State   State  `json:"state"`
	Reason  Reason `json:"reason,omitempty"`
	// Partitioned marks a stale heartbeat with a kubelet that answers from
	// some replica.
	Partitioned bool `json:"partitioned,omitempty"`
	// Since is when the node entered this state and reason.
	Since time.Time `json:"since"`
	// EvaluatedAt is the evaluation time that produced the verdict.
	EvaluatedAt time.Time `json:"evaluatedAt"`
	Evidence    Evidence  `json:"evidence"`
}

// Evidence is what a verdict rests on.
type Evidence struct {
	// LeaseRenewTime is the Lease's spec.renewTime as written by the
	// kubelet (its clock); informational only.
	LeaseRenewTime time.Time `json:"leaseRenewTime,omitzero"`
	// RenewObservedAt is when this replica saw the last renewal (its clock).
	RenewObservedAt time.Time `json:"renewObservedAt,omitzero"`
	// HeartbeatAge is the age the decision used (see README on clocks).
	HeartbeatAge time.Duration `json:"heartbeatAge"`
	// LeaseMissing is set when the node has no Lease.
	LeaseMissing bool `json:"leaseMissing,omitempty"`
	// LeaseConfirmedAt is when a direct read of the Lease last agreed with
	// the watch.
	LeaseConfirmedAt time.Time `json:"leaseConfirmedAt,omitzero"`
	// Ready is the Node's Ready condition status ("True", "False",
	// "Unknown", or empty when absent).
	Ready string `json:"ready,omitempty"`
	// StaleSince is when the heartbeat went stale.
	StaleSince time.Time `json:"staleSince,omitzero"`
	// SettlingSince is when a returning node's heartbeat became fresh again.
	SettlingSince time.Time `json:"settlingSince,omitzero"`
	// FailedAt is when the node was declared failed.
	FailedAt time.Time `json:"failedAt,omitzero"`
	// Kubelet summarises the fresh kubelet probes.
	Kubelet KubeletEvidence `json:"kubelet"`
	// Arrays holds the latest array samples, one per array.
	Arrays []ArrayEvidence `json:"arrays,omitempty"`
	// CorroboratedBy lists what confirmed the stale heartbeat ("kubelet",
	// "array", "heartbeat-only").
	CorroboratedBy []string `json:"corroboratedBy,omitempty"`
	// Early is set on a Failed verdict given before the heartbeat grace
	// because every witness agreed (Policy.Early).
	Early bool `json:"early,omitempty"`
	// WouldFail is set on a Blocked verdict whose node would otherwise be
	// Failed.
	WouldFail bool `json:"wouldFail,omitempty"`
	// AmbiguousArrays names arrays where the node's identity is ambiguous.
	AmbiguousArrays []string `json:"ambiguousArrays,omitempty"`
	// StoragePath is set on a storage path loss verdict (see PathMachine).
	StoragePath *StoragePathEvidence `json:"storagePath,omitempty"`
}

// KubeletEvidence counts fresh kubelet probes by outcome.
type KubeletEvidence struct {
	Replicas    int                `json:"replicas"`
	Unreachable int                `json:"unreachable"`
	Reachable   int                `json:"reachable"`
	Majority    bool               `json:"majorityUnreachable"`
	Probes      []ProbeObservation `json:"probes,omitempty"`
}

// ArrayEvidence is the latest sample of one array with the start of its
// current "no connection, no I/O" run.
type ArrayEvidence struct {
	Array        string                    `json:"array"`
	Connectivity arrayclients.Connectivity `json:"connectivity,omitempty"`
	IO           arrayclients.IOState      `json:"io,omitempty"`
	Error        string                    `json:"error,omitempty"`
	SampledAt    time.Time                 `json:"sampledAt,omitzero"`
	// QuietSince is the first sample of the current run without connection
	// and without I/O.
	QuietSince time.Time `json:"quietSince,omitzero"`
	// Quiet is true when the run covers the I/O sample window and the latest
	// sample is fresh.
	Quiet bool `json:"quiet"`
}
