package powerflex

import (
	"context"
	"fmt"
	"time"

	"github.com/dell/goscaleio"
	siotypes "github.com/dell/goscaleio/types/v1"

	"github.com/fenced-project/fenced/arrayclients"
)

var _ arrayclients.Sweeper = (*PowerFlexAdapter)(nil)

// Sweep lists the system's SDCs in one request (goscaleio System.GetSdc:
// GET /api/instances/System::<id>/relationships/Sdc, each SDC with its
// mdmConnectionState) and gives each SDC identity of ids the connectivity
// Health reads from the same field. With withIO, an SDC listed
// Disconnected also has its statistics read (one request each), judged as
// Health judges them, as many as ctx gives time for (the I/O of the rest
// stays unknown; the listing is not failed for it); a connected SDC's I/O
// stays unknown (not read). NFS
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
		all, err := k.sdcs(sys)
		if err != nil {
			return fmt.Errorf("list SDCs: %w", err)
		}
		listedAt := time.Now().UTC()
		byID := make(map[string]*siotypes.Sdc, len(all))
		for j := range all {
			byID[all[j].ID] = &all[j]
		}
		for _, i := range sdcAt {
			h := &out[i]
			sdc, ok := byID[ids[i].ObjectID]
			if !ok {
				h.Reason = fmt.Sprintf("SDC %s is not in the system's SDC list", ids[i].ObjectID)
				h.SampledAt = listedAt
				continue
			}
			h.SampledAt = listedAt
			state := sdc.MdmConnectionState
			switch state {
			case "Connected":
				h.Connectivity = arrayclients.Connected
			case "Disconnected":
				h.Connectivity = arrayclients.Disconnected
			}
			h.Reason = fmt.Sprintf("mdmConnectionState %q (system SDC list)", state)
			if !withIO || h.Connectivity != arrayclients.Disconnected {
				continue
			}
			if ctx.Err() != nil {
				// Out of time (many SDCs gone at once): the connection
				// states stand, the I/O of the rest stays unknown.
				h.Reason = fmt.Sprintf("mdmConnectionState %q; statistics not read within the sweep's time", state)
				continue
			}
			stats, err := k.sdcStatistics(goscaleio.NewSdc(k.c, sdc))
			if ctx.Err() != nil {
				h.Reason = fmt.Sprintf("mdmConnectionState %q; statistics not read within the sweep's time", state)
				continue
			}
			if err != nil {
				h.Reason = fmt.Sprintf("mdmConnectionState %q; statistics unreadable: %v", state, err)
				continue
			}
			h.IO, h.Reason = powerFlexIO(stats, state)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
