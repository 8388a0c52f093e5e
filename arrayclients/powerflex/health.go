package powerflex

import (
	"context"
	"fmt"
	"time"

	siotypes "github.com/dell/goscaleio/types/v1"

	"github.com/fenced-project/fenced/arrayclients"
)

// Health reports, for an NVMe host, unknown connectivity and I/O (see the
// reason). For an SDC it reports its mdmConnectionState (Connected / Disconnected)
// and whether its statistics window shows reads or writes (csi-powerflex's
// signals). When the array cannot be read, both are unknown with the
// reason and the error wraps ErrUnreachable.
func (a *PowerFlexAdapter) Health(ctx context.Context, id arrayclients.Identity) (arrayclients.Health, error) {
	h := arrayclients.Health{Array: a.cfg.Name, Node: id.Node, Connectivity: arrayclients.ConnectivityUnknown, IO: arrayclients.IOUnknown}
	if id.Array == a.cfg.Name && id.Family == arrayclients.PowerFlex && id.Kind == PowerFlexKindNFSClient {
		h.Reason = "the node has no SDC: PowerFlex shows no connection or I/O of an NFS client"
		h.SampledAt = time.Now().UTC()
		return h, nil
	}
	if id.Array == a.cfg.Name && id.Family == arrayclients.PowerFlex && id.Kind == PowerFlexKindNVMeHost {
		// goscaleio's NVMe host has no mdmConnectionState and no
		// statistics; its NVMe controllers (Host::<id>/relationships/
		// NvmeController) are not read yet.
		h.Reason = "the node is an NVMe/TCP host: fenced reads no connection or I/O signal of a PowerFlex NVMe host"
		h.SampledAt = time.Now().UTC()
		return h, nil
	}
	if id.Array != a.cfg.Name || id.Family != arrayclients.PowerFlex || id.ObjectID == "" {
		err := fmt.Errorf("%w: identity %s/%s/%s", arrayclients.ErrPlanMismatch, id.Family, id.Array, id.ObjectID)
		h.Reason = err.Error()
		return h, err
	}
	err := a.pool.with(ctx, func(k powerFlexCall) error {
		sdc, err := k.sdcByID(id.ObjectID)
		if powerFlexIs(err, pflexMsgNoSdc) {
			return fmt.Errorf("%w: SDC %s no longer exists", arrayclients.ErrNoIdentity, id.ObjectID)
		}
		if err != nil {
			return fmt.Errorf("read SDC %s: %w", id.ObjectID, err)
		}
		h.SampledAt = time.Now().UTC()
		state := sdc.Sdc.MdmConnectionState
		switch state {
		case "Connected":
			h.Connectivity = arrayclients.Connected
		case "Disconnected":
			h.Connectivity = arrayclients.Disconnected
		}
		stats, err := k.sdcStatisticsByID(sdc.Sdc.ID)
		if err != nil {
			h.Reason = fmt.Sprintf("mdmConnectionState %q; statistics unreadable: %v", state, err)
			return nil
		}
		h.IO, h.Reason = powerFlexIO(stats, state)
		return nil
	})
	if err != nil {
		h.Connectivity, h.IO, h.Reason = arrayclients.ConnectivityUnknown, arrayclients.IOUnknown, err.Error()
		return h, err
	}
	return h, nil
}

// powerFlexIO judges an SDC's statistics window as csi-powerflex does: I/O
// when it counts reads or writes.
func powerFlexIO(stats *siotypes.SdcStatistics, state string) (arrayclients.IOState, string) {
	ops := stats.UserDataReadBwc.NumOccured + stats.UserDataWriteBwc.NumOccured
	io := arrayclients.IOIdle
	if ops > 0 {
		io = arrayclients.IOActive
	}
	return io, fmt.Sprintf("mdmConnectionState %q; %d read+write I/Os in the last %ds",
		state, ops, max(stats.UserDataReadBwc.NumSeconds, stats.UserDataWriteBwc.NumSeconds))
}

// Check logs in (if needed), reads the systems and finds the configured one.
func (a *PowerFlexAdapter) Check(ctx context.Context) arrayclients.CheckResult {
	r := arrayclients.CheckResult{Array: a.cfg.Name, Family: arrayclients.PowerFlex}
	err := a.pool.with(ctx, func(k powerFlexCall) error {
		all, err := k.systems()
		if err != nil {
			return fmt.Errorf("list systems: %w", err)
		}
		_, err = a.selectSystem(all)
		return err
	})
	r.CheckedAt = time.Now().UTC()
	if err != nil {
		r.Error = err.Error()
		return r
	}
	r.Reachable = true
	r.APIVersion = a.pool.apiVersion()
	return r
}
