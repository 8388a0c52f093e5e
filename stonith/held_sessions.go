package stonith

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/fenced-project/fenced/arrayclients"
)

// A held check also watches what an array reports of the node itself,
// where the family reports it (arrayclients.SessionReporter): PowerStore
// host initiators' active sessions, PowerFlex SDC I/O statistics. After a
// verified cut the node should reach nothing, so a session through a path
// the cut removed, or I/O counted after it, means something gave the node
// access back,
// even where the read-back of the plan's entries does not show it. It is
// a regression with reason "session": the array's read-back is recorded
// as not fenced, with the session or I/O named, so the fencing step cuts
// the array again and reads it back.

// RegressionSession is the reason of fenced_fence_regressions_total for a
// session or I/O of the node that the array reported after a verified cut.
const RegressionSession = "session"

// sessionFinding begins each line a session watch adds to a held
// read-back's Remaining; regress counts such an array under
// RegressionSession.
const sessionFinding = "after the verified cut: "

// sessionWatcher is what a held check needs of an array that reports a
// node's sessions and I/O (arrayclients.SessionReporter, which the
// decorated adapters implement; ErrNoSessions when the family or the
// identity has none).
type sessionWatcher interface {
	Sessions(ctx context.Context, plan arrayclients.Plan) (arrayclients.SessionReport, error)
}

var _ sessionWatcher = arrayclients.SessionReporter(nil)

// sessionRead is one held check's session read of one array, made right
// after its read-back.
type sessionRead struct {
	rep arrayclients.SessionReport
	// verifiedAt is when the read-back returned: if it showed the cut,
	// the cut was in place then. asked is when the sessions were asked
	// for: an I/O window the array reports ends no earlier. Both are on
	// the controller's clock.
	verifiedAt, asked time.Time
	err               error
}

// readSessions asks the array for the node's sessions and I/O, when it
// reports them; nil when it does not.
func (c *Controller) readSessions(ctx context.Context, a Array, p arrayclients.Plan) *sessionRead {
	sw, ok := a.(sessionWatcher)
	if !ok {
		return nil
	}
	now := c.clk.Now()
	rep, err := sw.Sessions(ctx, p)
	if errors.Is(err, arrayclients.ErrNoSessions) {
		return nil
	}
	return &sessionRead{rep: rep, verifiedAt: now, asked: now, err: err}
}

// sessionWatch is what the held checks of one fence remember of one
// array's sessions and I/O (in heldEntry, so a fence sent back to fencing
// starts again from its next verified cut).
type sessionWatch struct {
	// cutSince is when a read-back of this leader first showed the cut in
	// place: I/O in a window that began after it is I/O after the cut.
	cutSince time.Time
	// failing: the last session read failed (logged once).
	failing bool
}

// watchSessions adds what the arrays' session reads show after a verified
// cut to their read-backs (see sessionFinding). Every session an array
// reports is through a path the cut removes, so any is after the cut; I/O
// is after the cut when its window began after a read-back of this leader
// showed the cut. A session read that fails proves nothing.
func (c *Controller) watchSessions(cl *clusterRuntime, fenceID, node string, reads map[string]arrayclients.Verification,
	sess map[string]*sessionRead) {
	type logLine struct {
		array string
		err   error
	}
	var failed, recovered []logLine
	c.mu.Lock()
	e := c.held[fenceID]
	if e == nil {
		c.mu.Unlock()
		return
	}
	if e.sessions == nil {
		e.sessions = map[string]*sessionWatch{}
	}
	for _, a := range slices.Sorted(maps.Keys(sess)) {
		sr, v := sess[a], reads[a]
		w := e.sessions[a]
		if w == nil {
			w = &sessionWatch{}
			e.sessions[a] = w
		}
		if sr.err != nil {
			if !w.failing {
				failed = append(failed, logLine{a, sr.err})
			}
			w.failing = true
			continue
		}
		if w.failing {
			recovered = append(recovered, logLine{a, nil})
			w.failing = false
		}
		cut := v.Fenced && len(accessLeft(v)) == 0
		var found []string
		for _, s := range sr.rep.Sessions {
			found = append(found, sessionFinding+"active session: "+s.What)
		}
		if io := sr.rep.IO; io != nil && io.Ops > 0 && !w.cutSince.IsZero() && io.StartsAfter(sr.asked, w.cutSince) {
			found = append(found, sessionFinding+"I/O: "+io.What)
		}
		if cut && w.cutSince.IsZero() {
			w.cutSince = sr.verifiedAt
		}
		if len(found) > 0 {
			// A regression: the fence goes back to fencing, and this
			// schedule with it.
			v.Fenced = false
			v.Remaining = append(v.Remaining, found...)
			reads[a] = v
		}
	}
	c.mu.Unlock()
	for _, l := range failed {
		c.log.Warn("held fence: cannot read the node's sessions on the array; the read-back alone holds the fence until it answers",
			"cluster", cl.Name, "node", node, "fenceID", fenceID, "array", l.array, "error", l.err)
	}
	for _, l := range recovered {
		c.log.Info("held fence: the array shows the node's sessions again", "cluster", cl.Name, "node", node,
			"fenceID", fenceID, "array", l.array)
	}
}

// sessionRegressed reports whether a held read-back names a session or I/O
// after the verified cut.
func sessionRegressed(v arrayclients.Verification) bool {
	return slices.ContainsFunc(v.Remaining, func(s string) bool { return strings.HasPrefix(s, sessionFinding) })
}
