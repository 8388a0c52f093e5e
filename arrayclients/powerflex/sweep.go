package powerflex

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fenced-project/fenced/arrayclients"
)

var _ arrayclients.Sweeper = (*PowerFlexAdapter)(nil)

// Sweep lists the system's SDCs in one request (GET
// /api/instances/System::<id>/relationships/Sdc, each SDC with its
// mdmConnectionState, decoding only the fields it reads: rawget.go) and
// gives each SDC identity of ids the connectivity
// Health reads from the same field. With withIO, an SDC listed
// Disconnected also has its statistics read (all of them in one request
// where the gateway allows: see sweepStatistics), judged as Health judges them, as many as ctx
// gives time for (the I/O of the rest stays unknown; the listing is not
// failed for it); a connected SDC's I/O stays unknown (not read). NFS
// clients and NVMe hosts get what Health gives them, without a request.
func (a *PowerFlexAdapter) Sweep(ctx context.Context, ids []arrayclients.Identity, withIO bool) ([]arrayclients.Health, error) {
	out := make([]arrayclients.Health, len(ids))
	var sdcAt []int
	for i, id := range ids {
		out[i] = arrayclients.Health{Array: a.cfg.Name, Node: id.Node, Connectivity: arrayclients.ConnectivityUnknown, IO: arrayclients.IOUnknown}
		switch {
		case id.Array != a.cfg.Name || id.Family != arrayclients.PowerFlex:
			out[i].Reason = fmt.Sprintf("%v: identity %s/%s/%s", arrayclients.ErrPlanMismatch, id.Family, id.Array, id.ObjectID)
		case id.Kind == PowerFlexKindNFSClient || id.Kind == PowerFlexKindNVMeHost:
			h, _ := a.Health(ctx, id) // answers without a request
			out[i] = h
		case id.ObjectID == "":
			out[i].Reason = fmt.Sprintf("%v: identity %s/%s without an SDC ID", arrayclients.ErrPlanMismatch, id.Family, id.Array)
		default:
			sdcAt = append(sdcAt, i)
		}
	}
	if len(sdcAt) == 0 {
		return out, nil
	}
	err := a.pool.with(ctx, func(k powerFlexCall) error {
		sys, err := a.findSystem(k)
		if err != nil {
			return err
		}
		all, err := k.sweepSdcs(sys)
		if err != nil {
			return fmt.Errorf("list SDCs: %w", err)
		}
		listedAt := time.Now().UTC()
		byID := make(map[string]*sweepSdc, len(all))
		for j := range all {
			byID[all[j].ID] = &all[j]
		}
		var statsOf []int // the disconnected SDCs' out indices
		for _, i := range sdcAt {
			h := &out[i]
			sdc, ok := byID[ids[i].ObjectID]
			h.SampledAt = listedAt
			if !ok {
				h.Reason = fmt.Sprintf("SDC %s is not in the system's SDC list", ids[i].ObjectID)
				continue
			}
			state := sdc.MdmConnectionState
			switch state {
			case "Connected":
				h.Connectivity = arrayclients.Connected
			case "Disconnected":
				h.Connectivity = arrayclients.Disconnected
			}
			h.Reason = fmt.Sprintf("mdmConnectionState %q (system SDC list)", state)
			if withIO && h.Connectivity == arrayclients.Disconnected {
				h.Reason = fmt.Sprintf("mdmConnectionState %q; statistics not read within the sweep's time", state)
				statsOf = append(statsOf, i)
			}
		}
		if len(statsOf) > 0 {
			a.sweepStatistics(k, ids, byID, statsOf, out)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// sweepSpareCalls is how many of the pool's clients a sweep's statistics
// reads one by one use besides its own: half the pool, so the fences and
// health probes that need the array at the same time keep the other half.
const sweepSpareCalls = powerFlexClients/2 - 1

// statsBatchMax is how many SDCs one querySelectedStatistics request asks
// for: a rack's worth and more, while the request and its answer stay
// small (about 150 bytes an SDC).
const statsBatchMax = 500

// sweepStatistics reads the statistics of the SDCs at statsOf (listed
// Disconnected), judged as Health judges them, as many as ctx gives time
// for. It asks for them together, statsBatchMax to a request
// (sdcsStatistics), so a sweep that finds a rack's nodes gone reads their
// I/O in one request instead of one each, and leaves the pool's other
// clients to the fences those nodes need. What that does not read (a
// gateway that refuses the action, a failed request, an SDC the answer
// leaves out) it reads one SDC at a time (sweepEach).
func (a *PowerFlexAdapter) sweepStatistics(k powerFlexCall, ids []arrayclients.Identity, byID map[string]*sweepSdc,
	statsOf []int, out []arrayclients.Health) {
	read := make(map[string]time.Time, len(statsOf))
	rest := statsOf
	if !a.statsBatchRefused.Load() {
		rest = a.sweepBatch(k, ids, byID, statsOf, out, read)
	}
	if len(rest) > 0 {
		a.sweepEach(k, ids, byID, rest, out, read)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	last := a.statsReadAt
	next := make(map[string]time.Time, len(statsOf))
	for _, i := range statsOf {
		id := ids[i].ObjectID
		if at, ok := read[id]; ok {
			next[id] = at
		} else if at, ok := last[id]; ok {
			next[id] = at
		}
	}
	a.statsReadAt = next
}

// sweepBatch reads the statistics of the SDCs at statsOf with
// querySelectedStatistics, recording in read when each was read, and
// returns those it did not read. A gateway that answers the action with
// a client error (4xx: an API without it) is not asked again; the
// adapter reads each SDC's statistics from then on.
func (a *PowerFlexAdapter) sweepBatch(k powerFlexCall, ids []arrayclients.Identity, byID map[string]*sweepSdc,
	statsOf []int, out []arrayclients.Health, read map[string]time.Time) []int {
	var rest []int
	for chunk := range slices.Chunk(statsOf, statsBatchMax) {
		if k.ctx.Err() != nil {
			return append(rest, chunk...)
		}
		want := make([]string, len(chunk))
		for j, i := range chunk {
			want[j] = ids[i].ObjectID
		}
		got, err := k.sdcsStatistics(want)
		if err != nil {
			if e, ok := powerFlexAPIError(err); ok && e.HTTPStatusCode >= 400 && e.HTTPStatusCode < 500 {
				if !a.statsBatchRefused.Swap(true) {
					a.logger.Warn("PowerFlex gateway refused querySelectedStatistics: the sweep reads each disconnected SDC's statistics in a request of its own",
						"array", a.cfg.Name, "error", err)
				}
			}
			return append(rest, chunk...)
		}
		at := time.Now()
		for _, i := range chunk {
			sdc := byID[ids[i].ObjectID]
			stats, ok := got[sdc.ID]
			if !ok || stats == nil {
				rest = append(rest, i)
				continue
			}
			out[i].IO, out[i].Reason = powerFlexIO(stats, sdc.MdmConnectionState)
			read[sdc.ID] = at
		}
	}
	return rest
}

// sweepEach reads the statistics of the SDCs at statsOf one request each,
// as many as ctx gives time for: side by side on up to half the pool's
// clients (sweepSpareCalls), those whose statistics a sweep read longest
// ago (or never) first. When many nodes are gone at once (a rack's power),
// a sweep that runs out of time so leaves the I/O of others unknown than
// of the same ones every time, and each gone node's I/O window starts
// within a sweep or two of the listing that showed it gone. Only the SDCs
// listed Disconnected are remembered (sweepStatistics), so the memory is
// bounded by them.
func (a *PowerFlexAdapter) sweepEach(k powerFlexCall, ids []arrayclients.Identity, byID map[string]*sweepSdc,
	statsOf []int, out []arrayclients.Health, read map[string]time.Time) {
	a.mu.Lock()
	last := a.statsReadAt
	slices.SortStableFunc(statsOf, func(x, y int) int { return last[ids[x].ObjectID].Compare(last[ids[y].ObjectID]) })
	a.mu.Unlock()
	var spare atomic.Int32
	ctx := arrayclients.WithSpareCalls(k.ctx, func() (func(), bool) {
		if spare.Add(1) > sweepSpareCalls {
			spare.Add(-1)
			return nil, false
		}
		return func() { spare.Add(-1) }, true
	})
	k.ctx = ctx
	var mu sync.Mutex
	_ = each(a.pool, k, statsOf, func(k powerFlexCall, i int) error {
		if k.ctx.Err() != nil {
			return nil // out of time: this one's I/O stays unknown
		}
		sdc := byID[ids[i].ObjectID]
		state := sdc.MdmConnectionState
		stats, err := k.sdcStatisticsByID(sdc.ID)
		h := &out[i]
		switch {
		case k.ctx.Err() != nil:
		case err != nil:
			h.Reason = fmt.Sprintf("mdmConnectionState %q; statistics unreadable: %v", state, err)
		default:
			h.IO, h.Reason = powerFlexIO(stats, state)
			mu.Lock()
			read[sdc.ID] = time.Now()
			mu.Unlock()
		}
		return nil
	})
}
