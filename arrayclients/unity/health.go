package unity

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dell/gounity"
	unitytypes "github.com/dell/gounity/apitypes"

	"github.com/fenced-project/fenced/arrayclients"
)

const (
	// unityInitiatorOK is the health description ID csi-unity takes as
	// "initiator connected".
	unityInitiatorOK = "ALRT_COMPONENT_OK"
	// unityIOPath is the real-time metric csi-unity reads for I/O per LUN.
	unityIOPath     = "sp.*.storage.lun.*.currentIOCount"
	unityIOInterval = 5 // seconds
	unityIOFresh    = 60 * time.Second
)

// Health reads the array's view of the node: connected when one of its
// host's initiators is healthy (ALRT_COMPONENT_OK); I/O active when a LUN it
// has access to has a current I/O count in the latest real-time sample.
func (a *UnityAdapter) Health(ctx context.Context, id arrayclients.Identity) (arrayclients.Health, error) {
	out := arrayclients.Health{Array: a.cfg.Name, Node: id.Node, Connectivity: arrayclients.ConnectivityUnknown, IO: arrayclients.IOUnknown, SampledAt: a.now().UTC()}
	if err := a.checkIdentity(id); err != nil {
		out.Reason = err.Error()
		return out, a.errf("health", id.Node, err)
	}
	h, err := a.findHost(ctx, id.ObjectName)
	if err == nil && h.HostContent.ID != id.ObjectID {
		err = fmt.Errorf("host %q is now %s, was %s: resolve again", id.ObjectName, h.HostContent.ID, id.ObjectID)
	}
	if err != nil {
		out.Reason = fmt.Sprintf("cannot read host %s: %v", id.ObjectName, err)
		return out, a.errf("health", id.Node, err)
	}
	conn, connWhy := a.initiatorHealth(ctx, h)
	out.Connectivity = conn
	io, sampled, ioWhy := a.lunIO(ctx, id.ObjectID)
	out.IO = io
	if !sampled.IsZero() {
		out.SampledAt = sampled
	}
	out.Reason = connWhy + "; " + ioWhy
	return out, nil
}

// initiatorHealth reads every initiator of the host. csi-unity indexes
// descriptionIds[0] unguarded; an empty list here is "unknown", not a panic.
func (a *UnityAdapter) initiatorHealth(ctx context.Context, h *unitytypes.Host) (arrayclients.Connectivity, string) {
	ids := slices.Concat(h.HostContent.FcInitiators, h.HostContent.IscsiInitiators)
	if len(ids) == 0 {
		return arrayclients.Disconnected, fmt.Sprintf("host %s has no initiators", h.HostContent.ID)
	}
	ok, down, unknown := 0, 0, 0
	var notes []string
	for _, in := range ids {
		var hi *unitytypes.HostInitiator
		err := a.pool.call(ctx, func(ctx context.Context, c gounity.UnityClient) error {
			var err error
			hi, err = c.FindHostInitiatorByID(ctx, in.ID)
			return err
		})
		if err != nil {
			return arrayclients.ConnectivityUnknown, fmt.Sprintf("read initiator %s: %v", in.ID, err)
		}
		switch ds := hi.HostInitiatorContent.Health.DescriptionIDs; {
		case len(ds) == 0:
			unknown++
			notes = append(notes, in.ID+" has no health description")
		case ds[0] == unityInitiatorOK:
			ok++
		default:
			down++
			notes = append(notes, in.ID+" "+ds[0])
		}
	}
	switch {
	case ok > 0:
		return arrayclients.Connected, fmt.Sprintf("%d of %d initiators healthy", ok, len(ids))
	case unknown > 0:
		return arrayclients.ConnectivityUnknown, strings.Join(notes, ", ")
	}
	return arrayclients.Disconnected, "no healthy initiator: " + strings.Join(notes, ", ")
}

// lunIO sums currentIOCount over the host's LUNs from the latest sample of
// a real-time query the adapter keeps (re-created when it has expired).
func (a *UnityAdapter) lunIO(ctx context.Context, hostID string) (arrayclients.IOState, time.Time, string) {
	hls, err := a.hostLUNs(ctx, hostID)
	if err != nil {
		return arrayclients.IOUnknown, time.Time{}, err.Error()
	}
	luns := map[string]bool{}
	for _, hl := range hls {
		luns[hl.LUN.ID] = true
	}
	if len(luns) == 0 {
		return arrayclients.IOIdle, time.Time{}, "no LUN grants the host access"
	}
	res, err := a.sample(ctx)
	if err != nil {
		return arrayclients.IOUnknown, time.Time{}, err.Error()
	}
	if res == nil {
		return arrayclients.IOUnknown, time.Time{}, "the real-time query has no sample yet"
	}
	ts, err := time.Parse(time.RFC3339Nano, res.Timestamp)
	if err != nil {
		return arrayclients.IOUnknown, time.Time{}, fmt.Sprintf("sample timestamp %q: %v", res.Timestamp, err)
	}
	if age := a.now().Sub(ts); age >= unityIOFresh {
		return arrayclients.IOUnknown, ts.UTC(), fmt.Sprintf("latest sample is %s old", age.Round(time.Second))
	}
	total, seen := 0, 0
	// values: {"spa": {"sv_1": "3", ...}, "spb": {...}}, strings all the way down.
	for sp, raw := range res.Values {
		perLUN, ok := raw.(map[string]any)
		if !ok {
			return arrayclients.IOUnknown, ts.UTC(), fmt.Sprintf("sample values of %s are %T, want an object", sp, raw)
		}
		for lun, v := range perLUN {
			if !luns[lun] {
				continue
			}
			s, ok := v.(string)
			n, err := strconv.Atoi(s)
			if !ok || err != nil || n < 0 {
				return arrayclients.IOUnknown, ts.UTC(), fmt.Sprintf("sample value of %s on %s is %v, want a count", lun, sp, v)
			}
			total += n
			seen++
		}
	}
	switch {
	case seen == 0:
		return arrayclients.IOUnknown, ts.UTC(), "the sample has none of the host's LUNs"
	case total > 0:
		return arrayclients.IOActive, ts.UTC(), fmt.Sprintf("current I/O count %d on %d LUN(s)", total, len(luns))
	}
	return arrayclients.IOIdle, ts.UTC(), fmt.Sprintf("no current I/O on %d LUN(s)", len(luns))
}

// sample returns the latest currentIOCount result. The adapter keeps one
// query, shared by every health check and read without holding the lock;
// when it yields nothing (expired on the array) or is gone, a new one is
// made. A query just made may have no sample yet: nil, nil.
func (a *UnityAdapter) sample(ctx context.Context) (*unitytypes.MetricResult, error) {
	for attempt := 0; ; attempt++ {
		qid, created, err := a.query(ctx)
		if err != nil {
			return nil, err
		}
		var res *unitytypes.MetricQueryResult
		err = a.pool.call(ctx, func(ctx context.Context, c gounity.UnityClient) error {
			var err error
			res, err = c.GetMetricsCollection(ctx, qid)
			return err
		})
		if err != nil && !unityCode(err, unityNotFound) {
			return nil, fmt.Errorf("read real-time query %d: %w", qid, err)
		}
		if err == nil {
			for i := range res.Entries {
				if e := res.Entries[i].Content; e.Path == unityIOPath {
					return &e, nil
				}
			}
		}
		if created || attempt > 0 {
			return nil, nil
		}
		// Gone or expired: forget it (unless another check already has).
		a.mu.Lock()
		if a.queryID == qid {
			a.queryID = 0
		}
		a.mu.Unlock()
	}
}

// query returns the adapter's real-time query, creating it if needed.
func (a *UnityAdapter) query(ctx context.Context) (id int, created bool, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.queryID != 0 {
		return a.queryID, false, nil
	}
	var q *unitytypes.MetricQueryCreateResponse
	err = a.pool.call(ctx, func(ctx context.Context, c gounity.UnityClient) error {
		var err error
		q, err = c.CreateRealTimeMetricsQuery(ctx, []string{unityIOPath}, unityIOInterval)
		return err
	})
	if err != nil {
		return 0, false, fmt.Errorf("create real-time query: %w", err)
	}
	if q == nil || q.Content.ID <= 0 {
		return 0, false, fmt.Errorf("create real-time query: no query ID in the answer")
	}
	a.queryID = q.Content.ID
	return a.queryID, true, nil
}
