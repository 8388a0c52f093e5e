package detector

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/fenced-project/fenced/arrayclients"
)

// Storage path loss reasons.
const (
	// ReasonStoragePathDegraded: the heartbeat is fresh but an array holding
	// one of the node's protected volumes reports it disconnected with no
	// I/O, for less than the storage path grace so far.
	ReasonStoragePathDegraded Reason = "storage-path-degraded"
	// ReasonStoragePathLost: the node is alive (fresh heartbeat) but has
	// lost its storage path for longer than the grace. A Failed verdict with
	// this reason runs the fencing sequence like any other.
	ReasonStoragePathLost Reason = "storage-path-lost"
	// ReasonStorageStorm: the node would be failed for a lost storage path,
	// but the storage storm guard of one of its arrays is active.
	ReasonStorageStorm Reason = "storage-storm"
)

// PathLossPolicy is a cluster's storage path loss policy (the second
// verdict path: a live node that lost its array paths).
type PathLossPolicy struct {
	// Enabled turns the path on. Default false.
	Enabled bool
	// Grace is how long an array must continuously report the node
	// disconnected with no I/O. Default 2m.
	Grace time.Duration
	// MaxDisconnected is the storage storm limit: when an array reports
	// more of the cluster's nodes disconnected than this (a count or a
	// percentage of the cluster's nodes), the array or its network failed,
	// not the nodes. Default 1.
	MaxDisconnected Limit
	// SampleInterval is how often every node's array health is sampled.
	// Default: a sixth of the grace, at least the poll interval, at most 30s.
	SampleInterval time.Duration
	// SampleMaxAge is the oldest sample that still counts. Default: two
	// sample intervals plus the probe timeout.
	SampleMaxAge time.Duration
}

// DefaultPathLossPolicy returns the documented defaults (off).
func DefaultPathLossPolicy() PathLossPolicy {
	return PathLossPolicy{Grace: 2 * time.Minute, MaxDisconnected: Limit{Value: 1}}
}

// WithDefaults fills the sample interval and age from the detection policy.
func (p PathLossPolicy) WithDefaults(d Policy) PathLossPolicy {
	if p.SampleInterval <= 0 {
		p.SampleInterval = min(max(p.Grace/6, d.PollInterval), 30*time.Second)
	}
	if p.SampleMaxAge <= 0 {
		p.SampleMaxAge = 2*p.SampleInterval + d.ProbeTimeout
	}
	return p
}

// Validate names the first bad field.
func (p PathLossPolicy) Validate() error {
	if !p.Enabled {
		return nil
	}
	switch {
	case p.Grace <= 0:
		return fmt.Errorf("storagePathLoss grace: %v must be positive", p.Grace)
	case p.SampleInterval <= 0 || p.SampleMaxAge < p.SampleInterval:
		return fmt.Errorf("storagePathLoss sample interval %v / max age %v out of range", p.SampleInterval, p.SampleMaxAge)
	case p.MaxDisconnected.Value < 0 || (p.MaxDisconnected.Percent && p.MaxDisconnected.Value > 100):
		return fmt.Errorf("storagePathLoss maxDisconnected: %s is out of range", p.MaxDisconnected)
	}
	return nil
}

// ArraySweep summarises one sampling round of an array: how many nodes were
// asked and how many calls failed, or the error that stopped the round.
type ArraySweep struct {
	Array   string
	Samples int
	Errors  int
	Err     string
	At      time.Time
}

// StorageStormState is one array's storage storm guard, for /status.
type StorageStormState struct {
	Array  string `json:"array"`
	Active bool   `json:"active"`
	// Reason is "disconnected" (too many nodes reported disconnected) or
	// "api-error" (the array's API is unreachable or erroring).
	Reason       string    `json:"reason,omitempty"`
	Disconnected int       `json:"disconnected"`
	Limit        int       `json:"limit"`
	Nodes        int       `json:"nodes"`
	Error        string    `json:"error,omitempty"`
	Since        time.Time `json:"since,omitzero"`
}

// PathMachine is the deterministic core of the storage path loss path for
// one cluster. Like Machine it does no I/O, reads no clock and starts no
// goroutine; one goroutine owns it.
type PathMachine struct {
	policy PathLossPolicy
	nodes  map[string]*pathNode
	arrays map[string]*pathArray
	// published is the last verdict given per node after the merge.
	published map[string]Verdict
}

type pathNode struct {
	samples   map[string]ArrayObservation // array -> latest sample
	lostSince map[string]time.Time        // array -> start of the current lost run
	protected []string                    // arrays holding the node's protected volumes
	protAt    time.Time
	failed    bool
	failedAt  time.Time
	lostOn    []string
}

type pathArray struct {
	family arrayclients.Family
	sweep  ArraySweep
	storm  StorageStormState
}

// NewPathMachine returns the path machine, or an error naming the bad field.
func NewPathMachine(p PathLossPolicy) (*PathMachine, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if !p.Enabled {
		return nil, errors.New("storage path loss is disabled")
	}
	return &PathMachine{policy: p, nodes: map[string]*pathNode{}, arrays: map[string]*pathArray{}, published: map[string]Verdict{}}, nil
}

func (pm *PathMachine) node(name string) *pathNode {
	n, ok := pm.nodes[name]
	if !ok {
		n = &pathNode{samples: map[string]ArrayObservation{}, lostSince: map[string]time.Time{}}
		pm.nodes[name] = n
	}
	return n
}

func (pm *PathMachine) array(name string) *pathArray {
	a, ok := pm.arrays[name]
	if !ok {
		a = &pathArray{storm: StorageStormState{Array: name}}
		pm.arrays[name] = a
	}
	return a
}

// SetFamily records an array's family.
func (pm *PathMachine) SetFamily(array string, f arrayclients.Family) { pm.array(array).family = f }

// lost reports whether a sample is a positive report of a lost path: the
// array answered, says Disconnected (never Unknown: PowerScale and an
// unreachable array say Unknown) and reports idle I/O.
func lost(o ArrayObservation) bool {
	return o.Err == "" && o.Health.Connectivity == arrayclients.Disconnected && o.Health.IO == arrayclients.IOIdle
}

// ObserveSample records one array's view of a node. A sample that is not a
// lost path ends the node's lost run on that array; so does a gap in the
// samples longer than SampleMaxAge (the node left the sweep, say, while
// its identity was relearned): the run the grace counts is one the array
// was seen to report continuously, and starts again at the sample after
// the gap.
func (pm *PathMachine) ObserveSample(o ArrayObservation) {
	if o.Node == "" || o.Array == "" {
		return
	}
	n := pm.node(o.Node)
	prev, seen := n.samples[o.Array]
	if seen && prev.ObservedAt.After(o.ObservedAt) {
		return
	}
	n.samples[o.Array] = o
	switch {
	case !lost(o):
		delete(n.lostSince, o.Array)
	case n.lostSince[o.Array].IsZero() || (seen && o.ObservedAt.Sub(prev.ObservedAt) > pm.policy.SampleMaxAge):
		n.lostSince[o.Array] = o.ObservedAt
	}
}

// ObserveSweep records the outcome of a sampling round of an array.
func (pm *PathMachine) ObserveSweep(s ArraySweep) {
	if s.Array == "" {
		return
	}
	a := pm.array(s.Array)
	if a.sweep.At.After(s.At) {
		return
	}
	a.sweep = s
}

// ObserveProtected records which arrays hold the volumes of the node's
// protected pods (StatefulSet pods and pods matching the protection
// selector), as looked up at.
func (pm *PathMachine) ObserveProtected(node string, arrays []string, at time.Time) {
	n := pm.node(node)
	n.protected = sortedCopy(arrays)
	n.protAt = at
}

// Forget drops a node.
func (pm *PathMachine) Forget(node string) {
	delete(pm.nodes, node)
	delete(pm.published, node)
}

// NeedVolumes lists the nodes whose protected volumes should be looked up:
// those with a lost run on some array, sorted.
func (pm *PathMachine) NeedVolumes() []string {
	var out []string
	for name, n := range pm.nodes {
		if len(n.lostSince) > 0 {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

func (pm *PathMachine) fresh(o ArrayObservation, now time.Time) bool {
	d := now.Sub(o.ObservedAt)
	return d >= 0 && d <= pm.policy.SampleMaxAge
}
