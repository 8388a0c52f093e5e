package detector

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Corroboration names what must confirm a stale heartbeat before a node is
// declared failed.
type Corroboration string

// Corroboration values.
const (
	// CorroborateKubelet requires the node's kubelet port to be unreachable
	// from a majority of the replicas (fresh probes).
	CorroborateKubelet Corroboration = "kubelet"
	// CorroborateArray requires every array where the node has an identity to
	// see no connection and no I/O from it for the whole I/O sample window.
	CorroborateArray Corroboration = "array"
	// CorroborateEither requires the kubelet or the array condition.
	CorroborateEither Corroboration = "either"
	// CorroborateBoth requires the kubelet and the array condition.
	CorroborateBoth Corroboration = "both"
	// CorroborateNone fences on the stale heartbeat alone (pure heartbeat
	// STONITH).
	CorroborateNone Corroboration = "none"
)

// PartitionAction says what a stale heartbeat means when some replica can
// still reach the node's kubelet ("partitioned").
type PartitionAction string

// PartitionAction values.
const (
	// PartitionHold never counts the kubelet as corroboration while any
	// replica reaches it: the node stays Suspect (reason partitioned) unless
	// the arrays corroborate on their own under the policy. Corroboration
	// "none" still fences on the heartbeat alone.
	PartitionHold PartitionAction = "hold"
	// PartitionFence applies the corroboration policy unchanged: a majority
	// of replicas not reaching the kubelet is enough even if one reaches it.
	PartitionFence PartitionAction = "fence"
)

// Limit is a count ("3") or a percentage of the cluster's nodes ("33%").
type Limit struct {
	// Value is the count, or the percentage when Percent is set.
	Value int
	// Percent marks Value as a percentage of the cluster's nodes.
	Percent bool
}

// ParseLimit reads "3" or "33%".
func ParseLimit(s string) (Limit, error) {
	t := strings.TrimSpace(s)
	pct := strings.HasSuffix(t, "%")
	n, err := strconv.Atoi(strings.TrimSuffix(t, "%"))
	if err != nil || n < 0 || (pct && n > 100) {
		return Limit{}, fmt.Errorf("limit %q: want a count >= 0 or a percentage 0%%..100%%", s)
	}
	return Limit{Value: n, Percent: pct}, nil
}

// String renders the limit as it is written in configuration.
func (l Limit) String() string {
	if l.Percent {
		return strconv.Itoa(l.Value) + "%"
	}
	return strconv.Itoa(l.Value)
}

// Of resolves the limit for a cluster of total nodes. A percentage rounds
// down but never below 1 when the cluster has nodes, so that one failed node
// of a small cluster can still be fenced; a count is used as it is (0 blocks
// every fence).
func (l Limit) Of(total int) int {
	if !l.Percent {
		return l.Value
	}
	n := int(math.Floor(float64(total) * float64(l.Value) / 100))
	if n < 1 && total > 0 && l.Value > 0 {
		n = 1
	}
	return n
}

// Policy is one cluster's detection policy. DefaultPolicy documents the
// defaults; the configuration maps its YAML onto this struct.
type Policy struct {
	// HeartbeatGrace is how long a node's Lease may go without a renewal
	// (measured on this replica's clock, see README) before its heartbeat is
	// stale. Default 40s.
	HeartbeatGrace time.Duration
	// PollInterval is how often suspect nodes are probed and verdicts
	// re-evaluated. Default 2s.
	PollInterval time.Duration
	// ProbeAfter is the heartbeat age at which a node counts as late: it is
	// probed (kubelet port, Lease read-back, arrays) every poll so evidence is
	// ready when the grace runs out, and it counts towards the storm limit.
	// Default 20s (half the grace).
	ProbeAfter time.Duration
	// ProbeTimeout bounds one kubelet dial, Lease read-back or array health
	// call. Default 2s.
	ProbeTimeout time.Duration
	// EvidenceMaxAge is how old a kubelet probe, array sample or Lease
	// read-back may be and still count. Default 10s.
	EvidenceMaxAge time.Duration
	// Corroboration is what must confirm a stale heartbeat. Default "either".
	Corroboration Corroboration
	// Partitioned is what a stale heartbeat with a kubelet that answers from
	// some replica leads to. Default "hold".
	Partitioned PartitionAction
	// IOSampleWindow is how long the arrays must have seen no connection and
	// no I/O from the node for the array condition to hold. Default 10s.
	IOSampleWindow time.Duration
	// MaxUnhealthy is the storm limit: when more nodes than this are late or
	// failed at once, no new Failed verdict is given (Blocked, reason storm).
	// Default 33%.
	MaxUnhealthy Limit
	// StormCooldown is how long the storm guard stays active after the count
	// fell back under the limit. Default 5m.
	StormCooldown time.Duration
	// SettlePeriod is how long a returning node's heartbeat must stay fresh
	// before it counts as healthy again. Default 60s.
	SettlePeriod time.Duration
	// APICheckInterval is how often this replica checks the API server's
	// /readyz. Default 5s.
	APICheckInterval time.Duration
	// APICheckTimeout bounds one /readyz check. Default 2s.
	APICheckTimeout time.Duration
	// APICheckMaxAge is how old the last successful check may be before the
	// API server counts as unreachable. Default 15s.
	APICheckMaxAge time.Duration
	// WatchLagTolerance is how long a Lease read-back may show a renewal
	// that the watch has not delivered before the watches count as stale.
	// Default 5s.
	WatchLagTolerance time.Duration
	// Early is the early verdict on agreeing witnesses. Off in
	// DefaultPolicy; the configuration turns it on by default (see
	// configs.Cluster.EarlyVerdictOn).
	Early EarlyPolicy
}

// EarlyPolicy lets a node be declared Failed before HeartbeatGrace when
// every independent witness agrees that it is dead: its Lease missed a
// renewal (heartbeat older than After), its kubelet has been unreachable
// from a majority of the replicas, and from none, for KubeletProbes
// consecutive polls, and every array holding part of its storage footprint
// (every array where it has an identity, for a node without volumes)
// reports it disconnected with no I/O, freshly, for IOWindow. A footprint
// volume fenced cannot place or cut, or an unknown, stale or
// disagreeing signal (an array without session state, PowerMax's
// minutes-old performance samples, an array error) falls back to the full
// grace. The storm guard, pause, quorum and Lease read-back apply as at
// the grace.
type EarlyPolicy struct {
	// Enabled turns early verdicts on. Default false.
	Enabled bool
	// After is the heartbeat age from which a node may get an early
	// verdict: a missed renewal (kubelets renew every 10s). Default 12s;
	// less than HeartbeatGrace.
	After time.Duration
	// ProbeFrom is the heartbeat age from which a node is probed for an
	// early verdict, so that the runs KubeletProbes and IOWindow count
	// are already under way when the heartbeat reaches After: the
	// evidence asked for is the same, it is only looked for sooner.
	// Probing does not count a node towards the storm limit. Default 11s:
	// a kubelet renews every 10 s plus up to 4 % jitter, so an 11 s old
	// heartbeat is overdue. Positive and at most After.
	ProbeFrom time.Duration
	// KubeletProbes is how many consecutive polls the kubelet must have
	// been unreachable from each replica counted. Default 3.
	KubeletProbes int
	// IOWindow is how long every array must have reported the node
	// disconnected with no I/O. Default 6s.
	IOWindow time.Duration
}

// DefaultPolicy returns the documented defaults.
func DefaultPolicy() Policy {
	return Policy{
		HeartbeatGrace:    40 * time.Second,
		PollInterval:      2 * time.Second,
		ProbeAfter:        20 * time.Second,
		ProbeTimeout:      2 * time.Second,
		EvidenceMaxAge:    10 * time.Second,
		Corroboration:     CorroborateEither,
		Partitioned:       PartitionHold,
		IOSampleWindow:    10 * time.Second,
		MaxUnhealthy:      Limit{Value: 33, Percent: true},
		StormCooldown:     5 * time.Minute,
		SettlePeriod:      60 * time.Second,
		APICheckInterval:  5 * time.Second,
		APICheckTimeout:   2 * time.Second,
		APICheckMaxAge:    15 * time.Second,
		WatchLagTolerance: 5 * time.Second,
		Early:             EarlyPolicy{After: 12 * time.Second, ProbeFrom: 11 * time.Second, KubeletProbes: 3, IOWindow: 6 * time.Second},
	}
}

// Validate names the first field that is out of range.
func (p Policy) Validate() error {
	pos := []struct {
		name string
		d    time.Duration
	}{
		{"heartbeatGrace", p.HeartbeatGrace},
		{"pollInterval", p.PollInterval},
		{"probeAfter", p.ProbeAfter},
		{"probeTimeout", p.ProbeTimeout},
		{"evidenceMaxAge", p.EvidenceMaxAge},
		{"ioSampleWindow", p.IOSampleWindow},
		{"settlePeriod", p.SettlePeriod},
		{"apiCheckInterval", p.APICheckInterval},
		{"apiCheckTimeout", p.APICheckTimeout},
		{"apiCheckMaxAge", p.APICheckMaxAge},
		{"watchLagTolerance", p.WatchLagTolerance},
	}
	for _, f := range pos {
		if f.d <= 0 {
			return fmt.Errorf("policy %s: %v must be positive", f.name, f.d)
		}
	}
	if p.StormCooldown < 0 {
		return fmt.Errorf("policy stormCooldown: %v must not be negative", p.StormCooldown)
	}
	if p.ProbeAfter > p.HeartbeatGrace {
		return fmt.Errorf("policy probeAfter: %v must not exceed heartbeatGrace %v", p.ProbeAfter, p.HeartbeatGrace)
	}
	if e := p.Early; e.Enabled {
		switch {
		case e.After <= 0 || e.After >= p.HeartbeatGrace:
			return fmt.Errorf("policy early.after: %v must be positive and less than heartbeatGrace %v", e.After, p.HeartbeatGrace)
		case e.ProbeFrom <= 0 || e.ProbeFrom > e.After:
			return fmt.Errorf("policy early.probeFrom: %v must be positive and at most early.after %v", e.ProbeFrom, e.After)
		case e.KubeletProbes < 1 || e.KubeletProbes > 100:
			return fmt.Errorf("policy early.kubeletProbes: %d must be 1 to 100", e.KubeletProbes)
		case e.IOWindow <= 0:
			return fmt.Errorf("policy early.ioWindow: %v must be positive", e.IOWindow)
		}
	}
	if p.APICheckMaxAge < p.APICheckInterval {
		return fmt.Errorf("policy apiCheckMaxAge: %v must be at least apiCheckInterval %v", p.APICheckMaxAge, p.APICheckInterval)
	}
	switch p.Corroboration {
	case CorroborateKubelet, CorroborateArray, CorroborateEither, CorroborateBoth, CorroborateNone:
	default:
		return fmt.Errorf("policy corroboration: %q is not one of kubelet, array, either, both, none", p.Corroboration)
	}
	switch p.Partitioned {
	case PartitionHold, PartitionFence:
	default:
		return fmt.Errorf("policy partitioned: %q is not one of hold, fence", p.Partitioned)
	}
	if p.MaxUnhealthy.Value < 0 || (p.MaxUnhealthy.Percent && p.MaxUnhealthy.Value > 100) {
		return fmt.Errorf("policy maxUnhealthy: %s is out of range", p.MaxUnhealthy)
	}
	return nil
}
