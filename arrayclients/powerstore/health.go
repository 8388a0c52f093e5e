package powerstore

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/dell/gopowerstore"

	"github.com/fenced-project/fenced/arrayclients"
)

// PowerStore I/O rule of csi-powerstore: I/O is in progress when one of the
// last powerStoreIOSamples samples has total_iops > 0 and is younger than
// powerStoreIOWindow.
const (
	powerStoreIOSamples = 4
	powerStoreIOWindow  = 60 * time.Second
)

// Health reports the host's paths (initiator active_sessions) and I/O
// (volume metrics of every volume mapped to the host or its group). When
// the array cannot be read, both are unknown and the error wraps
// ErrUnreachable.
func (a *PowerStoreAdapter) Health(ctx context.Context, id arrayclients.Identity) (arrayclients.Health, error) {
	hl := arrayclients.Health{Array: a.cfg.Name, Node: id.Node, Connectivity: arrayclients.ConnectivityUnknown, IO: arrayclients.IOUnknown}
	if err := a.checkIdentity(id); err != nil {
		hl.Reason = err.Error()
		return hl, fmt.Errorf("powerstore array %s: health of node %s: %w", a.cfg.Name, id.Node, err)
	}
	if id.Kind == PowerStoreKindNFSClient {
		// No host, so no initiator sessions; NFS clients have no session
		// state on the array.
		hl.Reason = "NFS client without a host: the array keeps no session state for it"
		hl.SampledAt = time.Now().UTC()
		return hl, nil
	}
	err := a.with(ctx, func(c gopowerstore.Client) error {
		h, ok, err := a.getHost(ctx, c, id.ObjectID)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w: host %s no longer exists", arrayclients.ErrNoIdentity, id.ObjectID)
		}
		now := time.Now().UTC()
		hl.SampledAt = now
		sessions := 0
		for _, in := range h.Initiators {
			sessions += len(in.ActiveSessions)
		}
		reason := fmt.Sprintf("%d active sessions on %d initiators", sessions, len(h.Initiators))
		if sessions > 0 {
			hl.Connectivity = arrayclients.Connected
		} else {
			hl.Connectivity = arrayclients.Disconnected
		}
		vols, err := a.mappedVolumes(ctx, c, h)
		if err != nil {
			return err
		}
		if len(vols) == 0 {
			hl.IO = arrayclients.IOIdle
			hl.Reason = reason + "; no volumes mapped"
			return nil
		}
		active, newest, unknown := "", time.Time{}, 0
		for _, vol := range vols {
			rctx, cancel := a.reqCtx(ctx)
			samples, err := c.PerformanceMetricsByVolume(rctx, vol, gopowerstore.TwentySec)
			cancel()
			if err != nil {
				return fmt.Errorf("read metrics of volume %s: %w", vol, err)
			}
			ts, busy, ok := judgeVolumeSamples(samples, now)
			if !ok {
				unknown++
				continue
			}
			if ts.After(newest) {
				newest = ts
			}
			if busy && active == "" {
				active = vol
			}
		}
		if !newest.IsZero() {
			hl.SampledAt = newest
		}
		switch {
		case active != "":
			hl.IO = arrayclients.IOActive
			reason += "; I/O on volume " + active
		case unknown == len(vols):
			hl.IO = arrayclients.IOUnknown
			reason += fmt.Sprintf("; no metric samples for %d volumes", len(vols))
		default:
			hl.IO = arrayclients.IOIdle
			reason += fmt.Sprintf("; no I/O in the last %d samples of %d volumes", powerStoreIOSamples, len(vols))
		}
		hl.Reason = reason
		return nil
	})
	if err != nil {
		err = psClassify(err)
		hl.Connectivity, hl.IO, hl.Reason = arrayclients.ConnectivityUnknown, arrayclients.IOUnknown, err.Error()
		return hl, fmt.Errorf("powerstore array %s: health of node %s: %w", a.cfg.Name, id.Node, err)
	}
	return hl, nil
}

// mappedVolumes lists the volumes mapped to the host or to its group.
func (a *PowerStoreAdapter) mappedVolumes(ctx context.Context, c gopowerstore.Client, h gopowerstore.Host) ([]string, error) {
	maps, err := a.mappings(ctx, c, "host_id", h.ID)
	if err != nil {
		return nil, err
	}
	if h.HostGroupID != "" {
		gm, err := a.mappings(ctx, c, "host_group_id", h.HostGroupID)
		if err != nil {
			return nil, err
		}
		maps = append(maps, gm...)
	}
	seen := map[string]bool{}
	var vols []string
	for _, m := range maps {
		if !seen[m.VolumeID] {
			seen[m.VolumeID] = true
			vols = append(vols, m.VolumeID)
		}
	}
	sort.Strings(vols)
	return vols, nil
}

// judgeVolumeSamples applies csi-powerstore's rule to one volume's
// samples: busy when one of the newest four has total_iops > 0 and is
// under a minute old. Samples without a timestamp are ignored; ok is false
// when none is usable.
func judgeVolumeSamples(samples []gopowerstore.PerformanceMetricsByVolumeResponse, now time.Time) (newest time.Time, busy, ok bool) {
	type sample struct {
		ts   time.Time
		iops float64
	}
	var usable []sample
	for _, s := range samples {
		ts := time.Time(s.Timestamp)
		if ts.IsZero() {
			continue
		}
		usable = append(usable, sample{ts, s.TotalIops})
	}
	if len(usable) == 0 {
		return time.Time{}, false, false
	}
	sort.Slice(usable, func(i, j int) bool { return usable[i].ts.After(usable[j].ts) })
	for i, s := range usable {
		if i >= powerStoreIOSamples {
			break
		}
		if s.iops > 0 && now.Sub(s.ts) < powerStoreIOWindow {
			busy = true
		}
	}
	return usable[0].ts, busy, true
}

// Check reads the installed software: reachable, authenticated, and the
// release as the API version.
func (a *PowerStoreAdapter) Check(ctx context.Context) arrayclients.CheckResult {
	res := arrayclients.CheckResult{Array: a.cfg.Name, Family: arrayclients.PowerStore}
	err := a.with(ctx, func(c gopowerstore.Client) error {
		rctx, cancel := a.reqCtx(ctx)
		defer cancel()
		sw, err := c.GetSoftwareInstalled(rctx)
		if err != nil {
			return err
		}
		for _, s := range sw {
			if s.IsCluster {
				res.APIVersion = s.ReleaseVersion
			}
		}
		if res.APIVersion == "" {
			return fmt.Errorf("software_installed lists no cluster release")
		}
		return nil
	})
	res.CheckedAt = time.Now().UTC()
	if err != nil {
		res.Error = fmt.Sprintf("powerstore array %s: check: %v", a.cfg.Name, psClassify(err))
		return res
	}
	res.Reachable = true
	return res
}
