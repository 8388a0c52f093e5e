package detector

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/fenced-project/fenced/arrayclients"
)

// Result is the outcome of one evaluation.
type Result struct {
	Cluster string
	// Verdicts holds every known node's verdict, sorted by node name.
	Verdicts []Verdict
	// Changes holds the verdicts whose state or reason changed at this
	// evaluation (the ones to publish).
	Changes []Verdict
	// Counts holds the number of nodes per state.
	Counts map[State]int
	// Probe names the nodes to probe before the next evaluation (kubelet
	// port, Lease read-back, arrays), sorted.
	Probe []string
	// WitnessesOnly names the nodes of Probe probed only for an early
	// verdict (heartbeat not yet ProbeAfter old), sorted: their arrays are
	// asked only where the early verdict needs a witness (see
	// witnessArrays). The other arrays, which only the array
	// corroboration at the grace reads, are asked from ProbeAfter, as
	// without early verdicts.
	WitnessesOnly []string
	// Doubt is set when this replica doubts its own view; every node is then
	// Blocked with this reason.
	Doubt Reason
	// Storm is the storm guard's state.
	Storm StormState
	// NextCheck is when the machine should be evaluated again if no
	// observation arrives first. It is always after the evaluation time.
	NextCheck time.Time
	// EarlyEnabled is set when the policy allows early verdicts.
	EarlyEnabled bool
	// LeaseTiming is set when nodes renew their Leases no sooner than the
	// heartbeat age at which they count as late.
	LeaseTiming *LeaseTiming
}

// LeaseTiming says that nodes renew their Leases too seldom for the
// cluster's timing: a kubelet renews every quarter of its Lease's
// duration (nodeLeaseDurationSeconds, 40 s by default: every 10 s), and a
// node whose heartbeat reaches LateFrom between two renewals on time is
// probed at every renewal and, from earlyVerdict.after, counted towards
// the storm limit: enough of them hold the storm guard, and no node is
// fenced. The defaults suit the kubelet's default.
type LeaseTiming struct {
	// Nodes is how many nodes renew every LateFrom or less often.
	Nodes int `json:"nodes"`
	// RenewEvery is the longest renewal interval among them (a quarter of
	// their Lease duration), and Example one node renewing so.
	RenewEvery time.Duration `json:"renewEvery"`
	Example    string        `json:"example"`
	// LateFrom is the heartbeat age from which a node is probed, and
	// Setting the configuration key that sets it.
	LateFrom time.Duration `json:"lateFrom"`
	Setting  string        `json:"setting"`
}

// String says what is wrong and what to set.
func (l LeaseTiming) String() string {
	return fmt.Sprintf("%d nodes renew their Leases every %v (node %s: a kubelet renews every quarter of nodeLeaseDurationSeconds), "+
		"but a heartbeat %v old counts as late (%s): live nodes are probed at every renewal and, with early verdicts, "+
		"counted towards stormLimit; scale heartbeatGrace, earlyVerdict.after and earlyVerdict.probeFrom with the Lease duration",
		l.Nodes, l.RenewEvery, l.Example, l.LateFrom, l.Setting)
}

// lateFrom is the heartbeat age from which a live node is probed, and the
// configuration key that sets it.
func (p Policy) lateFrom() (time.Duration, string) {
	if p.Early.Enabled && p.Early.ProbeFrom < p.ProbeAfter {
		return p.Early.ProbeFrom, "earlyVerdict.probeFrom"
	}
	return p.ProbeAfter, "half of heartbeatGrace"
}

// StormState is the storm guard's state.
type StormState struct {
	Active bool `json:"active"`
	// Unhealthy is the number of nodes that were late or failed.
	Unhealthy int `json:"unhealthy"`
	// Limit is the storm limit resolved for Total nodes.
	Limit int `json:"limit"`
	Total int `json:"total"`
	// Since is when the guard became active.
	Since time.Time `json:"since,omitzero"`
	// CooldownUntil is set once the count is back under the limit.
	CooldownUntil time.Time `json:"cooldownUntil,omitzero"`
}

type stormTracker struct {
	state StormState
	over  bool
}

func (s *stormTracker) update(unhealthy, limit, total int, cooldown time.Duration, now time.Time) {
	s.state.Unhealthy, s.state.Limit, s.state.Total = unhealthy, limit, total
	if unhealthy > limit {
		if !s.state.Active {
			s.state.Since = now
		}
		s.state.Active, s.over = true, true
		s.state.CooldownUntil = time.Time{}
		return
	}
	if s.over {
		s.over = false
		s.state.CooldownUntil = now.Add(cooldown)
	}
	if s.state.Active && !now.Before(s.state.CooldownUntil) {
		s.state.Active = false
		s.state.Since, s.state.CooldownUntil = time.Time{}, time.Time{}
	}
}

// Evaluate gives every known node a verdict at time now, given this
// replica's view of itself. It changes the machine's state (phases, settle
// and storm tracking) but does nothing else.
func (m *Machine) Evaluate(self Self, now time.Time) Result {
	p := m.policy
	res := Result{Cluster: m.cluster, Counts: map[State]int{}, EarlyEnabled: p.Early.Enabled}
	doubt := m.selfDoubt(self, now)
	if doubt == ReasonNone && m.doubt != ReasonNone {
		m.viewRestoredAt = now
	}
	m.doubt = doubt
	res.Doubt = doubt

	names := make([]string, 0, len(m.nodes))
	for name, n := range m.nodes {
		if n.known {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	next := now.Add(p.PollInterval)
	if doubt == ReasonNone {
		next = time.Time{}
	}
	consider := func(t time.Time) {
		if t.After(now) && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}

	type ages struct {
		age                       time.Duration
		late, probe, early, stale bool
	}
	hb := make([]ages, len(names)) // by index in names
	// Nodes a witness array shows gone are probed before ProbeFrom, unless
	// more of them than the storm limit are (an array-wide event: the
	// storm guard would hold their early verdicts anyway, and probing
	// them all every poll would load the API server and the arrays when
	// they can least take it); they are probed from ProbeFrom then.
	var gone []bool
	if p.Early.Enabled {
		gone = make([]bool, len(names))
		count := 0
		for i, name := range names {
			gone[i] = m.witnessSeesItGone(m.nodes[name], now)
			if gone[i] {
				count++
			}
		}
		if count > p.MaxUnhealthy.Of(len(names)) {
			clear(gone)
		}
	}
	lateFrom, setting := p.lateFrom()
	for i, name := range names {
		n := m.nodes[name]
		if every := n.leaseDuration / 4; every > 0 && every >= lateFrom {
			if res.LeaseTiming == nil {
				res.LeaseTiming = &LeaseTiming{LateFrom: lateFrom, Setting: setting}
			}
			res.LeaseTiming.Nodes++
			if every > res.LeaseTiming.RenewEvery {
				res.LeaseTiming.RenewEvery, res.LeaseTiming.Example = every, name
			}
		}
		ref := laterOf(laterOf(n.renewObservedAt, n.firstSeen), m.viewRestoredAt)
		a := now.Sub(ref)
		hb[i] = ages{age: a, late: a >= p.ProbeAfter, stale: a >= p.HeartbeatGrace,
			probe: p.Early.Enabled && (a >= p.Early.ProbeFrom || gone[i]),
			early: p.Early.Enabled && a >= p.Early.After}
		if doubt != ReasonNone {
			continue
		}
		consider(ref.Add(p.ProbeAfter))
		if p.Early.Enabled {
			consider(ref.Add(p.Early.ProbeFrom))
			consider(ref.Add(p.Early.After))
		}
		consider(ref.Add(p.HeartbeatGrace))
		if hb[i].stale {
			if n.phase == phaseHealthy {
				n.phase = phaseSuspect
				n.staleSince = ref.Add(p.HeartbeatGrace)
				n.suspectReason = ReasonHeartbeatStale
			}
			n.freshSince = time.Time{}
		} else if n.phase != phaseHealthy && !n.freshSince.IsZero() {
			if now.Sub(n.freshSince) >= p.SettlePeriod {
				n.phase = phaseHealthy
				n.staleSince, n.freshSince, n.failedAt = time.Time{}, time.Time{}, time.Time{}
				n.partitioned, n.corroboratedBy, n.suspectReason, n.early = false, nil, ReasonNone, false
			} else {
				consider(n.freshSince.Add(p.SettlePeriod))
			}
		}
	}

	if doubt == ReasonNone {
		unhealthy := 0
		for i, name := range names {
			// With early verdicts on, a node counts from the age at which
			// it may be declared Failed: the guard must hold before the
			// first early verdict of a storm, not after it.
			if hb[i].late || hb[i].early || m.nodes[name].phase == phaseFailed {
				unhealthy++
			}
		}
		m.storm.update(unhealthy, p.MaxUnhealthy.Of(len(names)), len(names), p.StormCooldown, now)
		if m.storm.state.Active {
			consider(m.storm.state.CooldownUntil)
		}
		for _, lag := range m.lags {
			consider(lag.since.Add(p.WatchLagTolerance))
		}
	}
	res.Storm = m.storm.state

	res.Verdicts = make([]Verdict, 0, len(names))
	for i, name := range names {
		n := m.nodes[name]
		a := hb[i]
		v := Verdict{Cluster: m.cluster, Node: name, EvaluatedAt: now}
		v.Evidence = m.evidence(n, a.age, self, now)
		if doubt == ReasonNone && (a.late || a.probe) && n.phase != phaseFailed {
			res.Probe = append(res.Probe, name)
			if !a.late {
				res.WitnessesOnly = append(res.WitnessesOnly, name)
			}
			consider(now.Add(p.PollInterval))
		}
		switch {
		case doubt != ReasonNone:
			v.State, v.Reason = Blocked, doubt
		case n.phase == phaseHealthy:
			v.State = Healthy
			if a.early && !a.stale {
				if m.witnessesAgree(n, v.Evidence, now) {
					m.decideEarly(n, &v, self, now)
				} else {
					m.considerEarly(n, consider)
				}
			}
		case n.phase == phaseFailed:
			v.State, v.Reason = Failed, ReasonHeartbeatStale
		case !a.stale:
			v.State, v.Reason = Suspect, n.suspectReason
		default:
			m.decide(n, &v, self, now)
		}
		v.Partitioned = n.partitioned && v.State != Healthy
		if v.State == Failed {
			v.Evidence.CorroboratedBy = slices.Clone(n.corroboratedBy)
			v.Evidence.Early = n.early
		}
		if v.State != n.state || v.Reason != n.reason || n.since.IsZero() {
			n.state, n.reason, n.since = v.State, v.Reason, now
			v.Since = now
			res.Changes = append(res.Changes, v)
		}
		v.Since = n.since
		res.Counts[v.State]++
		res.Verdicts = append(res.Verdicts, v)
	}
	if next.IsZero() {
		next = now.Add(p.HeartbeatGrace)
	}
	res.NextCheck = next
	return res
}

// decide handles a suspect node whose heartbeat is stale: Failed when the
// corroboration holds, the Lease read-back agrees and no guard blocks it.
func (m *Machine) decide(n *nodeState, v *Verdict, self Self, now time.Time) {
	p := m.policy
	k := v.Evidence.Kubelet
	n.partitioned = k.Reachable > 0
	reason := ReasonHeartbeatStale
	if n.partitioned {
		reason = ReasonPartitioned
	}
	n.suspectReason = reason
	kubeletDead := k.Majority && (!n.partitioned || p.Partitioned != PartitionHold)
	arrayDead := len(n.idArrays) > 0
	for _, name := range n.idArrays {
		st, ok := n.arrays[name]
		arrayDead = arrayDead && ok && m.quiet(st, now)
	}
	var by []string
	if kubeletDead {
		by = append(by, "kubelet")
	}
	if arrayDead {
		by = append(by, "array")
	}
	var corroborated bool
	switch p.Corroboration {
	case CorroborateKubelet:
		corroborated = kubeletDead
	case CorroborateArray:
		corroborated = arrayDead
	case CorroborateEither:
		corroborated = kubeletDead || arrayDead
	case CorroborateBoth:
		corroborated = kubeletDead && arrayDead
	case CorroborateNone:
		corroborated, by = true, append(by, "heartbeat-only")
	}
	confirmed := !n.leaseConfirmedAt.IsZero() && now.Sub(n.leaseConfirmedAt) <= p.EvidenceMaxAge
	if !corroborated || !confirmed {
		v.State, v.Reason = Suspect, reason
		return
	}
	block := ReasonNone
	switch {
	case m.storm.state.Active:
		block = ReasonStorm
	case !self.Quorum:
		block = ReasonNoQuorum
	case self.Paused:
		block = ReasonPaused
	case len(n.ambiguous) > 0:
		block = ReasonIdentityAmbiguous
	}
	if block != ReasonNone {
		v.State, v.Reason = Blocked, block
		v.Evidence.WouldFail = true
		return
	}
	n.phase = phaseFailed
	n.failedAt = now
	n.corroboratedBy = by
	v.State, v.Reason = Failed, ReasonHeartbeatStale
	v.Evidence.FailedAt = now
}

// witnessesAgree reports whether every independent witness says the
// node, whose heartbeat missed a renewal but is not stale yet, is dead
// (see EarlyPolicy): its kubelet unreachable from a majority of the
// replicas, and reachable from none, for KubeletProbes consecutive polls;
// and every array holding part of its storage footprint (every array
// where it has an identity, for a node without volumes) reporting it
// disconnected with no I/O, in a fresh sample, for the early I/O window.
// A footprint volume that cannot be placed or cut says no. Anything unknown,
// stale or disagreeing says no.
func (m *Machine) witnessesAgree(n *nodeState, e Evidence, now time.Time) bool {
	p := m.policy
	k := e.Kubelet
	if k.Reachable > 0 || !k.Majority {
		return false
	}
	need := time.Duration(p.Early.KubeletProbes-1) * p.PollInterval
	agree := 0
	for _, pr := range k.Probes {
		if since, ok := n.unreachableSince[pr.Replica]; ok && !pr.Reachable && now.Sub(since) >= need {
			agree++
		}
	}
	if agree < k.Replicas/2+1 || !n.witnessesOK || len(n.witnesses) == 0 {
		return false
	}
	for _, name := range n.witnesses {
		st, ok := n.arrays[name]
		if !ok || st.last.Err != "" || st.last.Health.Connectivity != arrayclients.Disconnected ||
			st.last.Health.IO != arrayclients.IOIdle || now.Sub(st.last.ObservedAt) > p.EvidenceMaxAge ||
			st.quietSince.IsZero() || now.Sub(st.quietSince) < p.Early.IOWindow {
			return false
		}
	}
	return true
}

// considerEarly asks for an evaluation at each moment when a run of early
// evidence already under way reaches its length: a replica's run of
// unreachable kubelet probes reaching KubeletProbes polls, a witness
// array's quiet run reaching the early I/O window. The rule is
// witnessesAgree's; this only takes it when it can first hold. Without
// it the verdict waited for the next poll, up to a poll interval later
// depending on how long the first probe took (the window runs from that
// probe's answer, the polls from its start).
func (m *Machine) considerEarly(n *nodeState, consider func(time.Time)) {
	p := m.policy
	need := time.Duration(p.Early.KubeletProbes-1) * p.PollInterval
	for _, since := range n.unreachableSince {
		if !since.IsZero() {
			consider(since.Add(need))
		}
	}
	for _, name := range n.witnesses {
		if st, ok := n.arrays[name]; ok && !st.quietSince.IsZero() {
			consider(st.quietSince.Add(p.Early.IOWindow))
		}
	}
}

// decideEarly gives a node whose witnesses agree the verdict its grace
// would give (decide: corroboration, Lease read-back, storm guard, pause,
// quorum, ambiguity), now. Only a Failed outcome is taken: anything else
// leaves the node Healthy until its grace runs out, as without early
// verdicts.
func (m *Machine) decideEarly(n *nodeState, v *Verdict, self Self, now time.Time) {
	partitioned, reason := n.partitioned, n.suspectReason
	try := *v
	m.decide(n, &try, self, now)
	if try.State != Failed {
		n.partitioned, n.suspectReason = partitioned, reason
		return
	}
	n.staleSince, n.early = now, true
	*v = try
	v.Evidence.Early = true
}

// witnessSeesItGone reports whether a witness array of the node showed
// it disconnected in its latest sample, still fresh: the node is then
// probed for an early verdict whatever its heartbeat age, so that the
// kubelet's run of unreachable probes starts when its storage went, not
// only once its heartbeat is ProbeFrom old. It only starts the looking:
// the verdict still needs witnessesAgree, from After.
func (m *Machine) witnessSeesItGone(n *nodeState, now time.Time) bool {
	if n.phase != phaseHealthy || !n.witnessesOK {
		return false
	}
	for _, name := range n.witnesses {
		st, ok := n.arrays[name]
		if ok && st.last.Err == "" && st.last.Health.Connectivity == arrayclients.Disconnected &&
			now.Sub(st.last.ObservedAt) <= m.policy.EvidenceMaxAge {
			return true
		}
	}
	return false
}

func (m *Machine) quiet(st *arrayState, now time.Time) bool {
	return !st.quietSince.IsZero() &&
		now.Sub(st.last.ObservedAt) <= m.policy.EvidenceMaxAge &&
		now.Sub(st.quietSince) >= m.policy.IOSampleWindow
}

func (m *Machine) selfDoubt(self Self, now time.Time) Reason {
	p := m.policy
	if !self.APIReachable || self.APICheckedAt.IsZero() || now.Sub(self.APICheckedAt) > p.APICheckMaxAge {
		return ReasonAPIServerUnreachable
	}
	if !self.WatchSynced || self.WatchError != "" {
		return ReasonWatchStale
	}
	for _, lag := range m.lags {
		if now.Sub(lag.since) >= p.WatchLagTolerance {
			return ReasonWatchStale
		}
	}
	return ReasonNone
}

func (m *Machine) evidence(n *nodeState, age time.Duration, self Self, now time.Time) Evidence {
	p := m.policy
	e := Evidence{
		LeaseRenewTime:   n.renewTime,
		RenewObservedAt:  n.renewObservedAt,
		HeartbeatAge:     age,
		LeaseMissing:     !n.hasLease,
		LeaseConfirmedAt: n.leaseConfirmedAt,
		Ready:            n.ready,
		StaleSince:       n.staleSince,
		SettlingSince:    n.freshSince,
		FailedAt:         n.failedAt,
		AmbiguousArrays:  slices.Clone(n.ambiguous),
	}
	replicas := max(self.Replicas, 1)
	e.Kubelet.Replicas = replicas
	replicaNames := make([]string, 0, len(n.probes))
	for r := range n.probes {
		replicaNames = append(replicaNames, r)
	}
	sort.Strings(replicaNames)
	for _, r := range replicaNames {
		pr := n.probes[r]
		if d := now.Sub(pr.At); d > p.EvidenceMaxAge || d < -p.EvidenceMaxAge {
			continue
		}
		e.Kubelet.Probes = append(e.Kubelet.Probes, pr)
		if pr.Reachable {
			e.Kubelet.Reachable++
		} else {
			e.Kubelet.Unreachable++
		}
	}
	e.Kubelet.Majority = e.Kubelet.Unreachable >= replicas/2+1
	arrays := slices.Clone(n.idArrays)
	for a := range n.arrays {
		if !slices.Contains(arrays, a) {
			arrays = append(arrays, a)
		}
	}
	sort.Strings(arrays)
	for _, a := range arrays {
		ae := ArrayEvidence{Array: a}
		if st, ok := n.arrays[a]; ok {
			ae.Connectivity = st.last.Health.Connectivity
			ae.IO = st.last.Health.IO
			ae.Error = st.last.Err
			ae.SampledAt = st.last.ObservedAt
			ae.QuietSince = st.quietSince
			ae.Quiet = m.quiet(st, now)
		}
		if ae.Connectivity == "" {
			ae.Connectivity = arrayclients.ConnectivityUnknown
		}
		if ae.IO == "" {
			ae.IO = arrayclients.IOUnknown
		}
		e.Arrays = append(e.Arrays, ae)
	}
	return e
}
