package detector

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"
)

// VantageObservation is one replica's view of a node's kubelet port, as a
// follower reports it to the leader.
type VantageObservation struct {
	Cluster   string `json:"cluster"`
	Node      string `json:"node"`
	Reachable bool   `json:"reachable"`
	// Since is when the reporting replica first saw this reachability (its
	// clock); it is what the ledger records for a change.
	Since time.Time `json:"since"`
	// At is when the probe was made (the reporting replica's clock).
	At      time.Time `json:"at"`
	Address string    `json:"address,omitempty"`
	Error   string    `json:"error,omitempty"`
}

// VantageReport is a batch of one replica's kubelet probes.
type VantageReport struct {
	Replica      string               `json:"replica"`
	SentAt       time.Time            `json:"sentAt"`
	Observations []VantageObservation `json:"observations"`
}

// MaxVantageObservations bounds the observations of one report.
const MaxVantageObservations = 10000

// Validate names the first bad field of a report.
func (r VantageReport) Validate() error {
	if r.Replica == "" {
		return errors.New("vantage report: replica is empty")
	}
	if len(r.Observations) > MaxVantageObservations {
		return fmt.Errorf("vantage report: %d observations exceed the limit of %d", len(r.Observations), MaxVantageObservations)
	}
	for i, o := range r.Observations {
		switch {
		case o.Cluster == "":
			return fmt.Errorf("vantage report: observations[%d].cluster is empty", i)
		case o.Node == "":
			return fmt.Errorf("vantage report: observations[%d].node is empty", i)
		case o.At.IsZero():
			return fmt.Errorf("vantage report: observations[%d].at is not set", i)
		}
	}
	return nil
}

// VantageMaxAge is how long a replica's report of a node counts on the
// leader for the policy: two poll intervals plus one probe timeout plus a
// second of slack (the follower probes a late node every poll interval,
// each probe taking up to the probe timeout, and reports at once).
func VantageMaxAge(p Policy) time.Duration {
	return 2*p.PollInterval + p.ProbeTimeout + time.Second
}

// VantageBoard keeps, on the leader and in memory only, the latest kubelet
// probe of every node from every other replica, with the leader's clock
// time when it arrived. A report older than the board's maximum age counts
// as no vantage at all: it is never returned, so it can never count as
// "unreachable" (a partitioned follower must not help fence). It does no
// I/O and reads no clock; it is safe for concurrent use.
type VantageBoard struct {
	self     string
	replicas map[string]bool
	maxAge   time.Duration

	mu      sync.Mutex
	entries map[vantageKey]vantageEntry
	last    map[string]time.Time // replica -> last report received
}

type vantageKey struct{ cluster, node, replica string }

type vantageEntry struct {
	obs        VantageObservation
	receivedAt time.Time
}

// NewVantageBoard returns a board for replica self, accepting reports from
// the named other replicas. maxAge is the freshness bound (VantageMaxAge).
func NewVantageBoard(self string, others []string, maxAge time.Duration) *VantageBoard {
	b := &VantageBoard{self: self, replicas: map[string]bool{}, maxAge: maxAge,
		entries: map[vantageKey]vantageEntry{}, last: map[string]time.Time{}}
	for _, r := range others {
		if r != self && r != "" {
			b.replicas[r] = true
		}
	}
	return b
}

// MaxAge returns the board's freshness bound.
func (b *VantageBoard) MaxAge() time.Duration { return b.maxAge }

// Report records a replica's report received at receivedAt (the leader's
// clock) and returns the observations whose reachability differs from what
// the board held for that replica and node (first sightings included):
// the changes to commit to the ledger. A report from an unknown replica or
// from this replica itself is refused.
func (b *VantageBoard) Report(r VantageReport, receivedAt time.Time) ([]VantageObservation, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	if r.Replica == b.self {
		return nil, fmt.Errorf("vantage report: replica %q is this replica", r.Replica)
	}
	if !b.replicas[r.Replica] {
		return nil, fmt.Errorf("vantage report: replica %q is not a configured peer", r.Replica)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.last[r.Replica] = receivedAt
	var changes []VantageObservation
	for _, o := range r.Observations {
		k := vantageKey{o.Cluster, o.Node, r.Replica}
		prev, ok := b.entries[k]
		if ok && prev.obs.At.After(o.At) {
			continue // an older probe arriving late
		}
		if !ok || prev.obs.Reachable != o.Reachable {
			changes = append(changes, o)
		}
		b.entries[k] = vantageEntry{obs: o, receivedAt: receivedAt}
	}
	return changes, nil
}

// Probes returns the fresh probes of the node from the other replicas at
// time now (the leader's clock), sorted by replica. A replica whose latest
// report of the node arrived more than the maximum age ago, or never, is
// left out.
func (b *VantageBoard) Probes(cluster, node string, now time.Time) []ProbeObservation {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []ProbeObservation
	for _, r := range slices.Sorted(maps.Keys(b.replicas)) {
		e, ok := b.entries[vantageKey{cluster, node, r}]
		if !ok || !b.fresh(e.receivedAt, now) {
			continue
		}
		out = append(out, ProbeObservation{Cluster: cluster, Node: node, Replica: r, Reachable: e.obs.Reachable,
			Address: e.obs.Address, Error: e.obs.Error, At: e.obs.At})
	}
	return out
}

func (b *VantageBoard) fresh(receivedAt, now time.Time) bool {
	d := now.Sub(receivedAt)
	return d >= 0 && d <= b.maxAge
}

// VantageReplicaStatus is one other replica's reporting state on the leader.
type VantageReplicaStatus struct {
	Replica      string    `json:"replica"`
	LastReportAt time.Time `json:"lastReportAt,omitzero"`
	// Fresh is set when the last report arrived within the maximum age.
	Fresh bool `json:"fresh"`
}

// Status returns every other replica's last report time, sorted.
func (b *VantageBoard) Status(now time.Time) []VantageReplicaStatus {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]VantageReplicaStatus, 0, len(b.replicas))
	for _, r := range slices.Sorted(maps.Keys(b.replicas)) {
		at := b.last[r]
		out = append(out, VantageReplicaStatus{Replica: r, LastReportAt: at, Fresh: !at.IsZero() && b.fresh(at, now)})
	}
	return out
}

// Forget drops everything the board holds about a node.
func (b *VantageBoard) Forget(cluster, node string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k := range b.entries {
		if k.cluster == cluster && k.node == node {
			delete(b.entries, k)
		}
	}
}

// ReplaceVantage replaces what the machine holds of the other replicas'
// kubelet probes of a node with probes (this replica's own probe, named
// self, is kept). A replica missing from probes no longer counts at all,
// even if its last probe is younger than the evidence age: the caller
// decides what is fresh (see VantageBoard).
func (m *Machine) ReplaceVantage(node, self string, probes []ProbeObservation) {
	n, ok := m.nodes[node]
	if !ok {
		return
	}
	keep := map[string]bool{self: true}
	for _, p := range probes {
		if p.Node == node {
			keep[p.Replica] = true
		}
	}
	for r := range n.probes {
		if !keep[r] {
			delete(n.probes, r)
		}
	}
	for _, p := range probes {
		if p.Node == node && p.Replica != self {
			m.ObserveProbe(p)
		}
	}
}
