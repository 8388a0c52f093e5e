package detector

import (
	"fmt"
	"slices"
	"time"

	"github.com/fenced-project/fenced/arrayclients"
)

// Machine is the detector's deterministic core for one cluster. It is fed
// observations and evaluated at a time passed in; it starts no goroutines,
// does no I/O and reads no clock, so equal inputs give equal verdicts. It is
// not safe for concurrent use: one goroutine (the Runner's loop) owns it.
type Machine struct {
	cluster string
	policy  Policy
	nodes   map[string]*nodeState
	// lags records Lease read-backs that showed a renewal the watch had not
	// delivered yet, by node.
	lags map[string]watchLag
	// doubt is the self-doubt reason of the last evaluation.
	doubt Reason
	// viewRestoredAt is when the last self-doubt ended; heartbeat ages are
	// never measured from before it.
	viewRestoredAt time.Time
	storm          stormTracker
}

type phase int

const (
	phaseHealthy phase = iota
	phaseSuspect
	phaseFailed
)

type nodeState struct {
	// known is set once the Node object has been seen.
	known     bool
	firstSeen time.Time
	ready     string

	hasLease         bool
	leaseMissing     bool
	renewTime        time.Time
	holder           string
	leaseDuration    time.Duration
	renewObservedAt  time.Time
	leaseConfirmedAt time.Time

	probes map[string]ProbeObservation
	// unreachableSince is, per replica, when its run of unreachable
	// kubelet probes began (absent while it reaches the kubelet).
	unreachableSince map[string]time.Time
	arrays           map[string]*arrayState
	idArrays         []string
	ambiguous        []string
	// witnesses are the arrays an early verdict needs in agreement (see
	// witnessArrays); witnessesOK is false when the footprint cannot be
	// witnessed whole.
	witnesses   []string
	witnessesOK bool

	phase          phase
	staleSince     time.Time
	freshSince     time.Time
	failedAt       time.Time
	suspectReason  Reason
	partitioned    bool
	corroboratedBy []string
	// early is set when the Failed verdict was an early one.
	early bool

	// Last verdict given.
	state  State
	reason Reason
	since  time.Time
}

type arrayState struct {
	last       ArrayObservation
	quietSince time.Time
}

type watchLag struct {
	since     time.Time
	renewTime time.Time
}

// NewMachine returns a machine for the named cluster, or an error naming the
// policy field that is out of range.
func NewMachine(cluster string, p Policy) (*Machine, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("detector for cluster %q: %w", cluster, err)
	}
	return &Machine{
		cluster: cluster,
		policy:  p,
		nodes:   map[string]*nodeState{},
		lags:    map[string]watchLag{},
	}, nil
}

// Policy returns the machine's policy.
func (m *Machine) Policy() Policy { return m.policy }

func (m *Machine) node(name string) *nodeState {
	n, ok := m.nodes[name]
	if !ok {
		n = &nodeState{
			probes: map[string]ProbeObservation{},
			arrays: map[string]*arrayState{},
			state:  Healthy,
		}
		m.nodes[name] = n
	}
	return n
}

// ObserveNode records a sighting of a Node object. A deleted Node is
// forgotten together with everything observed about it.
func (m *Machine) ObserveNode(o NodeObservation) {
	if o.Node == "" {
		return
	}
	if o.Deleted {
		delete(m.nodes, o.Node)
		delete(m.lags, o.Node)
		return
	}
	n := m.node(o.Node)
	if !n.known {
		n.known = true
		n.firstSeen = o.ObservedAt
	}
	n.ready = o.Ready
}

// ObserveLease records a sighting of a node's Lease. Only a change of
// renewTime (or the first sighting) counts as a renewal, timed by
// ObservedAt. A read-back that agrees with the watch confirms it; one that
// shows a renewal the watch has not delivered counts as the renewal and marks
// the watch as lagging until the watch catches up.
func (m *Machine) ObserveLease(o LeaseObservation) {
	if o.Node == "" {
		return
	}
	n, ok := m.nodes[o.Node]
	if !ok && o.Deleted {
		return
	}
	if !ok {
		n = m.node(o.Node)
	}
	if o.Duration > 0 {
		n.leaseDuration = o.Duration
	}
	if o.Deleted {
		if o.ReadBack {
			if n.hasLease {
				m.lags[o.Node] = watchLag{since: o.ObservedAt}
			}
			n.leaseConfirmedAt = o.ObservedAt
		} else {
			delete(m.lags, o.Node)
		}
		n.hasLease = false
		n.leaseMissing = true
		if !n.known {
			delete(m.nodes, o.Node)
		}
		return
	}
	if o.ReadBack {
		switch {
		case n.hasLease && o.RenewTime.Equal(n.renewTime):
			n.leaseConfirmedAt = laterOf(n.leaseConfirmedAt, o.ObservedAt)
			return
		case n.hasLease && o.RenewTime.Before(n.renewTime):
			return
		}
		if lag, ok := m.lags[o.Node]; !ok || lag.renewTime.Before(o.RenewTime) {
			since := o.ObservedAt
			if ok {
				since = lag.since
			}
			m.lags[o.Node] = watchLag{since: since, renewTime: o.RenewTime}
		}
	} else {
		if lag, ok := m.lags[o.Node]; ok && !o.RenewTime.Before(lag.renewTime) {
			delete(m.lags, o.Node)
		}
		if n.hasLease && o.RenewTime.Equal(n.renewTime) {
			n.holder = o.Holder
			return
		}
	}
	m.renewal(n, o)
}

func (m *Machine) renewal(n *nodeState, o LeaseObservation) {
	at := laterOf(o.ObservedAt, n.renewObservedAt)
	prev := laterOf(n.renewObservedAt, n.firstSeen)
	if n.phase != phaseHealthy && (n.freshSince.IsZero() || (!prev.IsZero() && at.Sub(prev) >= m.policy.HeartbeatGrace)) {
		n.freshSince = at
	}
	n.hasLease = true
	n.leaseMissing = false
	n.renewTime = o.RenewTime
	n.holder = o.Holder
	n.renewObservedAt = at
}

// ObserveProbe records one replica's kubelet probe of a node. Only the
// newest probe per replica is kept. A run of unreachable probes starts
// again after a gap in that replica's probes (see gap).
func (m *Machine) ObserveProbe(o ProbeObservation) {
	n, ok := m.nodes[o.Node]
	if !ok || o.Replica == "" {
		return
	}
	prev, seen := n.probes[o.Replica]
	if seen && prev.At.After(o.At) {
		return
	}
	n.probes[o.Replica] = o
	switch {
	case o.Reachable:
		delete(n.unreachableSince, o.Replica)
	case !seen || prev.Reachable || n.unreachableSince[o.Replica].IsZero() || m.gap(prev.At, o.At):
		if n.unreachableSince == nil {
			n.unreachableSince = map[string]time.Time{}
		}
		n.unreachableSince[o.Replica] = o.At
	}
}

// ObserveArray records one array's view of a node. A sample counts as quiet
// when the array answered, sees no connection (disconnected, or unknown for
// families without session state) and reports idle I/O; anything else ends
// the quiet run, and a gap in the samples (see gap) starts a new one.
func (m *Machine) ObserveArray(o ArrayObservation) {
	n, ok := m.nodes[o.Node]
	if !ok || o.Array == "" {
		return
	}
	st, ok := n.arrays[o.Array]
	if !ok {
		st = &arrayState{}
		n.arrays[o.Array] = st
	}
	if st.last.ObservedAt.After(o.ObservedAt) {
		return
	}
	quiet := o.Err == "" && o.Health.Connectivity != arrayclients.Connected && o.Health.IO == arrayclients.IOIdle
	switch {
	case !quiet:
		st.quietSince = time.Time{}
	case st.quietSince.IsZero() || m.gap(st.last.ObservedAt, o.ObservedAt):
		st.quietSince = o.ObservedAt
	}
	st.last = o
}

// gap reports whether an observation at next follows the previous one, at
// prev, from so far that the previous one no longer counted as evidence
// (EvidenceMaxAge): nobody was looking in between, so a run of unreachable
// probes or quiet samples starts again at next rather than spanning the
// gap. Without this a node probed in one episode (a missed renewal, then
// a renewal) carried its runs into the next, whose early verdict then came
// without a window of its own.
func (m *Machine) gap(prev, next time.Time) bool {
	return next.Sub(prev) > m.policy.EvidenceMaxAge
}

// ObserveIdentities records on which arrays the node has a learned identity
// and where it is ambiguous.
func (m *Machine) ObserveIdentities(o IdentityObservation) {
	n, ok := m.nodes[o.Node]
	if !ok {
		return
	}
	n.idArrays = sortedCopy(o.Arrays)
	n.ambiguous = sortedCopy(o.Ambiguous)
	n.witnesses, n.witnessesOK = witnessArrays(o)
}

// witnessArrays returns the arrays whose view of the node an early verdict
// needs: those holding part of its storage footprint, where it is known;
// the arrays where it has an identity when its footprint is empty (a node
// without volumes still needs an array that sees it gone) or not read.
// ok is false when part of the footprint cannot be witnessed.
func witnessArrays(o IdentityObservation) ([]string, bool) {
	switch {
	case !o.FootprintRead:
		return sortedCopy(o.Arrays), true
	case !o.FootprintComplete:
		return nil, false
	case len(o.Footprint) == 0:
		return sortedCopy(o.Arrays), true
	}
	return sortedCopy(o.Footprint), true
}

func sortedCopy(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	c := slices.Clone(s)
	slices.Sort(c)
	return slices.Compact(c)
}

func laterOf(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
