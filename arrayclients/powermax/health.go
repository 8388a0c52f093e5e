package powermax

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	pmax "github.com/dell/gopowermax/v2"
	pmaxtypes "github.com/dell/gopowermax/v2/types/v100"

	"github.com/fenced-project/fenced/arrayclients"
)

// PowerMax I/O rule (csi-powermax's): I/O is in progress when one of the
// last pmaxIOSamples volume samples has IoRate > 0 and is younger than
// pmaxIOFreshness; idle when the newest sample is younger than it and no
// such sample has I/O; unknown otherwise. Unisphere serves performance
// samples at 5-minute granularity, stamped on 5-minute boundaries, the
// newest being the last completed interval (0 to 5 minutes old): so on a
// real array the signal is unknown most of the time, and that is what it
// says. A sample minutes old tells nothing about the last minute: a busy
// node's idle interval would read as "no I/O", a dead node's last busy
// one as "I/O". Detection then relies on the kubelet probes
// (corroboration either or kubelet) for nodes with a PowerMax identity,
// and no early verdict is taken on them.
const (
	pmaxIOSamples    = 4
	pmaxPerfInterval = 5 * time.Minute
	pmaxIOFreshness  = 60 * time.Second
	pmaxIOWindow     = pmaxIOSamples * pmaxPerfInterval
)

// Health reads the array's view of the node: connected when one of its
// initiators is logged in and on the fabric through some director port;
// I/O from the volume metrics of the storage groups in its masking views.
// When the host cannot be read the state is unknown and the error says why.
func (a *PowerMaxAdapter) Health(ctx context.Context, id arrayclients.Identity) (arrayclients.Health, error) {
	out := arrayclients.Health{Array: a.cfg.Name, Node: id.Node, Connectivity: arrayclients.ConnectivityUnknown, IO: arrayclients.IOUnknown, SampledAt: a.now().UTC()}
	if err := a.checkIdentity(id); err != nil {
		out.Reason = err.Error()
		return out, a.errf("health", id.Node, err)
	}
	if id.Kind == PowerMaxKindSharedHost {
		out.Reason = fmt.Sprintf("host %s is csi-powermax's vSphere host, shared by every node: its paths and I/O are not this node's", id.ObjectID)
		return out, nil
	}
	h, err := a.conn.getHost(ctx, id.ObjectID)
	if err != nil {
		out.Reason = fmt.Sprintf("cannot read host %s: %v", id.ObjectID, err)
		return out, a.errf("health", id.Node, fmt.Errorf("read host %s: %w", id.ObjectID, err))
	}
	var reasons []string
	conn, why := a.connectivity(ctx, h, id.Keys)
	out.Connectivity = conn
	reasons = append(reasons, why)
	io, sampled, why := a.ioState(ctx, h)
	out.IO = io
	reasons = append(reasons, why)
	if !sampled.IsZero() {
		out.SampledAt = sampled
	}
	out.Reason = strings.Join(reasons, "; ")
	return out, nil
}

// connectivity looks at every director-port path of the host's initiators
// and of the initiators recorded at resolve time (a fenced host has none
// left, but the node's initiators may still be logged in).
func (a *PowerMaxAdapter) connectivity(ctx context.Context, h *pmaxtypes.Host, keys []string) (arrayclients.Connectivity, string) {
	c, err := a.conn.get(ctx)
	if err != nil {
		return arrayclients.ConnectivityUnknown, err.Error()
	}
	list, err := a.initiatorPaths(ctx, c, slices.Concat(h.Initiators, keys))
	if err != nil {
		return arrayclients.ConnectivityUnknown, err.Error()
	}
	paths, up := len(list), 0
	for _, p := range list {
		if p.up {
			up++
		}
	}
	switch {
	case up > 0:
		return arrayclients.Connected, fmt.Sprintf("%d of %d initiator paths logged in", up, paths)
	case paths == 0:
		return arrayclients.Disconnected, fmt.Sprintf("no initiator of host %s is known on any port", h.HostID)
	}
	return arrayclients.Disconnected, fmt.Sprintf("none of %d initiator paths is logged in", paths)
}

// pmaxPath is one director-port path of an initiator: up when Unisphere
// shows it logged_in and on_fabric; host is the host the initiator is in
// ("" for none).
type pmaxPath struct {
	id   string
	up   bool
	host string
}

// initiatorPaths reads every director-port path of the initiators (bare
// IQNs/WWNs; other strings are ignored): GetInitiatorList filtered by the
// initiator (GET …/initiator?initiator_hba=<in>), then GetInitiatorByID of
// each dir:port:<in> path for its logged_in and on_fabric.
func (a *PowerMaxAdapter) initiatorPaths(ctx context.Context, c pmax.Pmax, initiators []string) ([]pmaxPath, error) {
	var ins []string
	for _, in := range initiators {
		if pmaxInitiatorRE.MatchString(in) && !slices.Contains(ins, in) {
			ins = append(ins, in)
		}
	}
	sort.Strings(ins)
	var out []pmaxPath
	for _, in := range ins {
		rctx, cancel := arrayclients.WithRequestTimeout(ctx, a.cfg.RequestTimeout)
		list, err := c.GetInitiatorList(rctx, a.cfg.SymmetrixID, in, false, false)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("list paths of initiator %s: %w", in, classifyPmax(err))
		}
		for _, pid := range list.InitiatorIDs {
			// Unisphere IDs are dir:port:initiator; the filter is ours to check.
			if !strings.HasSuffix(pid, ":"+in) || !pmaxInitiatorRE.MatchString(pid) {
				continue
			}
			rctx, cancel := arrayclients.WithRequestTimeout(ctx, a.cfg.RequestTimeout)
			p, err := c.GetInitiatorByID(rctx, a.cfg.SymmetrixID, pid)
			cancel()
			if err != nil {
				return nil, fmt.Errorf("read initiator %s: %w", pid, classifyPmax(err))
			}
			out = append(out, pmaxPath{id: pid, up: p.LoggedIn && p.OnFabric, host: p.Host})
		}
	}
	return out, nil
}

// ioState applies csi-powermax's rule to the volumes of the host's storage
// groups. Stale or missing samples are unknown, never idle.
func (a *PowerMaxAdapter) ioState(ctx context.Context, h *pmaxtypes.Host) (arrayclients.IOState, time.Time, string) {
	c, err := a.conn.get(ctx)
	if err != nil {
		return arrayclients.IOUnknown, time.Time{}, err.Error()
	}
	var groups []string
	for _, mvID := range h.MaskingviewIDs {
		rctx, cancel := arrayclients.WithRequestTimeout(ctx, a.cfg.RequestTimeout)
		mv, err := c.GetMaskingViewByID(rctx, a.cfg.SymmetrixID, mvID)
		cancel()
		if err != nil {
			return arrayclients.IOUnknown, time.Time{}, fmt.Sprintf("read masking view %s: %v", mvID, classifyPmax(err))
		}
		if mv.StorageGroupID != "" && !slices.Contains(groups, mv.StorageGroupID) {
			groups = append(groups, mv.StorageGroupID)
		}
	}
	if len(groups) == 0 {
		return arrayclients.IOIdle, time.Time{}, fmt.Sprintf("host %s is in no masking view: no volumes", h.HostID)
	}
	rctx, cancel := arrayclients.WithRequestTimeout(ctx, a.cfg.RequestTimeout)
	defer cancel()
	keys, err := c.GetArrayPerfKeys(rctx)
	if err != nil {
		return arrayclients.IOUnknown, time.Time{}, fmt.Sprintf("read performance keys: %v", classifyPmax(err))
	}
	var last int64
	for _, k := range keys.ArrayInfos {
		if k.SymmetrixID == a.cfg.SymmetrixID {
			last = k.LastAvailableDate
		}
	}
	if last <= 0 {
		return arrayclients.IOUnknown, time.Time{}, fmt.Sprintf("Symmetrix %s is not registered for performance", a.cfg.SymmetrixID)
	}
	m, err := c.GetVolumesMetrics(rctx, a.cfg.SymmetrixID, strings.Join(groups, ","), []string{"IoRate"},
		last-pmaxIOWindow.Milliseconds(), last)
	if err != nil {
		return arrayclients.IOUnknown, time.Time{}, fmt.Sprintf("read volume metrics: %v", classifyPmax(err))
	}
	// Callers of gopowermax index result[0]; an empty list is an answer
	// we cannot use, not a panic.
	if m == nil || len(m.ResultList.Result) == 0 {
		return arrayclients.IOUnknown, time.Time{}, "volume metrics returned no result"
	}
	now := a.now()
	var newest int64
	busy := 0
	for _, r := range m.ResultList.Result {
		samples := slices.Clone(r.VolumeResult)
		sort.Slice(samples, func(i, j int) bool { return samples[i].Timestamp < samples[j].Timestamp })
		if len(samples) > pmaxIOSamples {
			samples = samples[len(samples)-pmaxIOSamples:]
		}
		for _, s := range samples {
			newest = max(newest, s.Timestamp)
			if s.IoRate > 0 && now.Sub(time.UnixMilli(s.Timestamp)) < pmaxIOFreshness {
				busy++
				break
			}
		}
	}
	sampled := time.UnixMilli(newest).UTC()
	switch {
	case busy > 0:
		return arrayclients.IOActive, sampled, fmt.Sprintf("IoRate > 0 on %d of %d volumes", busy, len(m.ResultList.Result))
	case newest == 0:
		return arrayclients.IOUnknown, time.Time{}, "volume metrics have no samples"
	case now.Sub(sampled) >= pmaxIOFreshness:
		return arrayclients.IOUnknown, sampled, fmt.Sprintf("newest volume sample is %s old", now.Sub(sampled).Round(time.Second))
	}
	return arrayclients.IOIdle, sampled, fmt.Sprintf("IoRate 0 on %d volumes", len(m.ResultList.Result))
}
