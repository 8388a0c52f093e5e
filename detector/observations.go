package detector

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/fenced-project/fenced/arrayclients"
)

// LeaseObservation is one sighting of a node's Lease in kube-node-lease.
type LeaseObservation struct {
	Node string
	// RenewTime is spec.renewTime (zero when unset). Only a change counts as
	// a renewal; its value is evidence, never a clock.
	RenewTime time.Time
	// Holder is spec.holderIdentity.
	Holder string
	// Duration is spec.leaseDurationSeconds (zero when unset): a kubelet
	// sets its nodeLeaseDurationSeconds and renews every quarter of it.
	Duration time.Duration
	// Deleted is set when the Lease is gone (a watch delete, or NotFound on
	// a direct read).
	Deleted bool
	// ReadBack is set when the sighting comes from a direct read of the API
	// server rather than from the watch.
	ReadBack bool
	// ObservedAt is this replica's clock when the sighting was made.
	ObservedAt time.Time
}

// fromLease takes the renewal time, holder and duration from the Lease.
func (o *LeaseObservation) fromLease(l *coordinationv1.Lease) {
	if l.Spec.RenewTime != nil {
		o.RenewTime = l.Spec.RenewTime.Time
	}
	if l.Spec.HolderIdentity != nil {
		o.Holder = *l.Spec.HolderIdentity
	}
	if d := l.Spec.LeaseDurationSeconds; d != nil {
		o.Duration = time.Duration(*d) * time.Second
	}
}

// NodeObservation is one sighting of a Node object.
type NodeObservation struct {
	Node string
	// Ready is the Ready condition's status ("True", "False", "Unknown"), or
	// empty when the condition is absent.
	Ready string
	// Deleted is set when the Node object is gone.
	Deleted    bool
	ObservedAt time.Time
}

// ProbeObservation is one replica's probe of a node's kubelet port. It is
// shared between replicas through the ledger (vantage points).
type ProbeObservation struct {
	Cluster   string    `json:"cluster"`
	Node      string    `json:"node"`
	Replica   string    `json:"replica"`
	Reachable bool      `json:"reachable"`
	Address   string    `json:"address,omitempty"`
	Error     string    `json:"error,omitempty"`
	At        time.Time `json:"at"`
}

// ArrayObservation is one array's view of a node.
type ArrayObservation struct {
	Node   string
	Array  string
	Health arrayclients.Health
	// Err is set when the array could not be asked; the sample then counts
	// as unknown.
	Err        string
	ObservedAt time.Time
}

// IdentityObservation says on which arrays a node has a learned identity and
// where that identity is ambiguous.
type IdentityObservation struct {
	Node      string
	Arrays    []string
	Ambiguous []string
	// Footprint, when FootprintRead is set, names the arrays holding part
	// of the node's storage footprint (FootprintSource); FootprintComplete
	// is false when part of it cannot be witnessed.
	Footprint         []string
	FootprintRead     bool
	FootprintComplete bool
	ObservedAt        time.Time
}

// Self is this replica's view of itself and its group at evaluation time.
type Self struct {
	// APIReachable is the outcome of the last API server check, made at
	// APICheckedAt.
	APIReachable bool
	APICheckedAt time.Time
	APIError     string
	// WatchSynced is set when every informer has synced and no watch is
	// broken (WatchError empty).
	WatchSynced bool
	WatchError  string
	// Quorum is set when the replica group has a quorum.
	Quorum bool
	// Paused is set when fencing is paused (for this cluster or globally).
	Paused bool
	// Replicas is the number of replicas (vantage points); values below 1
	// count as 1.
	Replicas int
}
