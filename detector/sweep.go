package detector

import (
	"context"
	"errors"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/fenced-project/fenced/arrayclients"
)

// sweeper keeps a low-rate history of every node's view on the arrays
// whose API lists many nodes' connection state in one request
// (arrayclients.Sweeper), so that an early verdict's I/O window is already
// running, from the first sample that showed the node gone, when its
// heartbeat turns late; and a node whose witness shows it gone has its
// kubelet probed from then on (witnessSeesItGone). One request per array
// and poll interval on a follower, two on the leader (see run), whatever
// the number of nodes, plus, on the leader, the statistics of the nodes
// shown disconnected (PowerFlex: one request for all of them). It runs only with
// early verdicts on: nothing else needs samples before ProbeFrom.
type sweeper struct {
	r *Runner
	// none names the arrays that answered ErrNoSweep: they are not asked
	// again. Sweep goroutine only.
	none map[string]bool
	// list is the identities asked for, by array, kept from poll to poll
	// (see identityList). Sweep goroutine only.
	list sweepList
	// gone is how many nodes the last sweep showed disconnected, on all
	// arrays together (see sweepDue). Sweep goroutine only.
	gone int
}

// sweepList is the per-array identity list of one set of nodes, and what
// it was built from: rebuilt only when the node set, the identities'
// version (VersionedIdentities) or the arrays left out change. Without a
// version, it is rebuilt every poll.
type sweepList struct {
	built   bool
	nodes   map[string]bool
	version uint64
	none    int
	arrays  []string
	byArray map[string][]arrayclients.Identity
}

// run sweeps until ctx ends: every poll interval, and on the leader also
// half-way between (see sweepDue). The leader's sweep starts a node's
// early I/O window (the first sample that shows it disconnected and idle),
// so the window of a node that lost its storage starts at most half a
// poll interval after the array shows it. A follower's sweep only starts
// its kubelet probes, whose run (KubeletProbes polls, 4 s by default) is
// shorter than the window (6 s) by more than the extra half interval.
func (s *sweeper) run(ctx context.Context) {
	every := s.r.cfg.Policy.PollInterval
	t := s.r.clk.NewTicker(every / 2)
	defer t.Stop()
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		now := s.r.clk.Now()
		if !sweepDue(s.r.cfg.Lead == nil || s.r.cfg.Lead.Leading(), last, now, every, s.gone) {
			continue
		}
		last = now
		s.once(ctx)
	}
}

// extraSweepMaxGone is how many nodes the last sweep may have shown
// disconnected for the leader to sweep again half a poll interval later.
// The leader's sweep reads the statistics of every node it shows
// disconnected, one request each: when many are (nodes dying together,
// whose fences need the same array), the extra sweep would double that
// load on the array for nodes whose windows are already running; it is
// for the first sign of a death.
const extraSweepMaxGone = 4

// sweepDue reports whether a sweep is due at a tick (every half poll
// interval) at now, after the last one at last, which showed gone nodes
// disconnected: every other tick (every poll interval) on any replica,
// and every tick on the leader while at most extraSweepMaxGone nodes
// were shown disconnected. A follower that just became leader sweeps at
// its next tick.
func sweepDue(leading bool, last, now time.Time, poll time.Duration, gone int) bool {
	return last.IsZero() || now.Sub(last) >= poll*3/4 || (leading && gone <= extraSweepMaxGone)
}

// once sweeps each array once, for the identities of the nodes of the last
// evaluation, and records every answer as an array sample of its node.
// Only the leader reads I/O (statistics): as with the probes, a follower's
// samples feed only its own status, and it needs only the connection state
// to start probing a node's kubelet.
func (s *sweeper) once(ctx context.Context) {
	r := s.r
	s.gone = 0
	arrays, byArray := s.identityList()
	withIO := r.cfg.Lead == nil || r.cfg.Lead.Leading()
	for _, array := range arrays {
		sw, ok := r.cfg.Arrays[array].(arrayclients.Sweeper)
		if !ok {
			s.none[array] = true
			continue
		}
		ids := byArray[array]
		sctx, cancel := context.WithTimeout(ctx, r.cfg.Policy.ProbeTimeout)
		hs, err := sw.Sweep(sctx, ids, withIO)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, arrayclients.ErrNoSweep) {
			s.none[array] = true
			continue
		}
		at := r.clk.Now()
		obs := make([]ArrayObservation, len(ids))
		var gone []IdentityObservation
		for i, id := range ids {
			obs[i] = ArrayObservation{Node: id.Node, Array: array, ObservedAt: at}
			if err != nil {
				// An array that cannot be read ends the quiet runs, as a
				// failed health call does.
				obs[i].Health = arrayclients.Health{Array: array, Node: id.Node, Connectivity: arrayclients.ConnectivityUnknown, IO: arrayclients.IOUnknown, Reason: err.Error()}
				obs[i].Err = err.Error()
				continue
			}
			obs[i].Health = hs[i]
			if hs[i].Connectivity == arrayclients.Disconnected {
				s.gone++
			}
			if withIO && hs[i].Connectivity == arrayclients.Disconnected && hs[i].IO == arrayclients.IOUnknown {
				// The leader asked for its I/O and the sweep could not
				// read it (time ran out with many nodes gone at once):
				// no evidence either way, so no sample. Recorded, it
				// would end the node's quiet run every poll and lose
				// the early verdict; the node's own probes read its
				// I/O from ProbeFrom, as without sweeps.
				obs[i] = ArrayObservation{}
				continue
			}
			if hs[i].Connectivity == arrayclients.Disconnected {
				// Its witnesses decide whether it is probed: read them
				// now (only for such nodes: at rest, none).
				_, idObs := r.identities(id.Node)
				gone = append(gone, idObs)
			}
		}
		if err != nil {
			r.log.Debug("array sweep", "array", array, "nodes", len(ids), "error", err)
		}
		r.swept.record(array, ids, hs, err, withIO, at)
		r.enqueue(func(m *Machine) {
			for _, o := range gone {
				m.ObserveIdentities(o)
			}
			for _, o := range obs {
				if o.Node != "" {
					m.ObserveArray(o)
				}
			}
		}, len(gone) > 0)
	}
}

// identityList returns the arrays to sweep, sorted, and each one's
// identities of the nodes of the last evaluation, sorted by node: the
// kept list when nothing it was built from changed, at rest every poll.
// The node set is compared with the kept one without sorting or copying;
// the identities are read again (NodeIdentities for every node) only when
// the set, their version or the arrays left out changed.
func (s *sweeper) identityList() ([]string, map[string][]arrayclients.Identity) {
	r := s.r
	versioned, ok := r.cfg.Identities.(VersionedIdentities)
	var version uint64
	if ok {
		version = versioned.IdentitiesVersion()
	}
	l := &s.list
	r.mu.Lock()
	same := ok && l.built && l.version == version && l.none == len(s.none) && len(l.nodes) == len(r.verdicts)
	if same {
		for name := range r.verdicts {
			if !l.nodes[name] {
				same = false
				break
			}
		}
	}
	var nodes []string
	if !same {
		nodes = make([]string, 0, len(r.verdicts))
		for name := range r.verdicts {
			nodes = append(nodes, name)
		}
	}
	r.mu.Unlock()
	if same {
		return l.arrays, l.byArray
	}
	sort.Strings(nodes)
	byArray := map[string][]arrayclients.Identity{}
	for _, node := range nodes {
		ids, _ := r.cfg.Identities.NodeIdentities(r.cfg.Cluster, node)
		for _, id := range ids {
			if _, ok := r.cfg.Arrays[id.Array]; ok && !s.none[id.Array] {
				byArray[id.Array] = append(byArray[id.Array], id)
			}
		}
	}
	arrays := make([]string, 0, len(byArray))
	for a := range byArray {
		arrays = append(arrays, a)
	}
	slices.Sort(arrays)
	set := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		set[n] = true
	}
	*l = sweepList{built: true, nodes: set, version: version, none: len(s.none), arrays: arrays, byArray: byArray}
	return arrays, byArray
}

// sweptSamples is, per array, when the leader's last sweep of it gave each
// node shown disconnected a complete sample: its connection state and its
// I/O, read as a health call reads them (PowerFlex: mdmConnectionState
// from the SDC list, then the SDC's statistics). A leader's probe of such
// a node does not ask that array again while the sample is fresh
// (sweptFresh): it would read the same two things a second time. When
// many nodes die at once this halves the witness's requests, and a probe
// no longer waits for the witness behind the fences' calls, so the
// kubelet probes and the Lease read-backs of every dying node keep their
// pace. The sweeper goroutine records; probes read.
type sweptSamples struct {
	mu sync.Mutex
	at map[string]map[string]time.Time // array → node → sampled at
}

// record replaces the array's samples with those of a sweep: none for a
// failed sweep or one without I/O (a follower's).
func (s *sweptSamples) record(array string, ids []arrayclients.Identity, hs []arrayclients.Health, err error, withIO bool, at time.Time) {
	var nodes map[string]time.Time
	if err == nil && withIO {
		for i, h := range hs {
			if h.Connectivity == arrayclients.Disconnected && h.IO != arrayclients.IOUnknown {
				if nodes == nil {
					nodes = map[string]time.Time{}
				}
				nodes[ids[i].Node] = at
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if nodes == nil {
		delete(s.at, array)
		return
	}
	if s.at == nil {
		s.at = map[string]map[string]time.Time{}
	}
	s.at[array] = nodes
}

// fresh reports whether the last sweep of the array gave the node a
// complete sample less than maxAge before now.
func (s *sweptSamples) fresh(array, node string, now time.Time, maxAge time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	at, ok := s.at[array][node]
	return ok && now.Sub(at) < maxAge
}

// sweptFresh is how old a sweep's complete sample of a node may be for
// the leader's probe to skip asking the array: one and a half poll
// intervals, so a probe every poll finds the sample of the sweep that came
// before it (the leader sweeps every poll interval, or every half while
// few nodes are gone), whatever their phases; far inside EvidenceMaxAge.
func sweptFresh(p Policy) time.Duration { return p.PollInterval * 3 / 2 }
