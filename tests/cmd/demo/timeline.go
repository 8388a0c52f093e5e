package main

import (
	"fmt"
	"io"
	"sort"
	"sync"
	"time"
)

// Milestones of a recovery, for the summary.
const (
	mKill        = "powered off"
	mHeartbeat   = "last heartbeat"
	mSuspect     = "verdict Suspect"
	mFailed      = "verdict Failed"
	mIntent      = "plans committed"
	mFenced      = "fenced"
	mTainted     = "tainted"
	mEvicted     = "evicted"
	mPodDeleted  = "pods force-deleted"
	mReplacement = "replacement Running"
)

// Sources of timeline events: where each fact was read.
const (
	srcDemo     = "demo"     // what the demo did
	srcAPI      = "api"      // an object of the API server (Lease, Pod, Node, VolumeAttachment, audit log)
	srcDetector = "detector" // the leader's node verdict in /status
	srcLedger   = "ledger"   // a fence record step committed through Raft (/v1/fences)
	srcArray    = "array"    // a fence record's per-array result: applied and read back
)

// event is one line of the timeline.
type event struct {
	At     time.Time
	Source string
	Text   string
}

// pending is an event waiting to be printed.
type pending struct {
	event
	arrived time.Time
}

// timeline collects events from several watchers and prints them in time
// order. Events are held back for a moment after they arrive, so that
// facts learned a little late (a poll, an audit log read) still print in
// order; and nothing prints until release, which the watcher calls once the
// node's last heartbeat is known (it lies before the kill).
type timeline struct {
	out   io.Writer
	t0    time.Time
	hold  time.Duration
	grace time.Duration

	mu       sync.Mutex
	seen     map[string]bool
	queue    []pending
	released bool
	lastAt   time.Time
	marks    map[string]time.Time
	arrays   int
}

func newTimeline(out io.Writer, t0 time.Time, grace time.Duration) *timeline {
	return &timeline{out: out, t0: t0, hold: 1500 * time.Millisecond, grace: grace,
		seen: map[string]bool{}, marks: map[string]time.Time{}}
}

// add queues an event unless one with the same key was added before; it
// reports whether it was new.
func (t *timeline) add(key string, ev event, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.seen[key] {
		return false
	}
	t.seen[key] = true
	t.queue = append(t.queue, pending{event: ev, arrived: now})
	return true
}

// mark records a milestone's time (the first one wins).
func (t *timeline) mark(name string, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.marks[name]; !ok && !at.IsZero() {
		t.marks[name] = at
	}
}

// countArray counts an array confirmed fenced.
func (t *timeline) countArray() {
	t.mu.Lock()
	t.arrays++
	t.mu.Unlock()
}

// release lets events print.
func (t *timeline) release() {
	t.mu.Lock()
	t.released = true
	t.mu.Unlock()
}

// flush prints, in time order, the queued events that arrived at least
// hold before now, or all of them when all is set.
func (t *timeline) flush(now time.Time, all bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.released && !all {
		return
	}
	sort.SliceStable(t.queue, func(i, j int) bool { return t.queue[i].At.Before(t.queue[j].At) })
	// Print the oldest events while every event queued before them has
	// waited long enough: a young event holds back everything after it.
	n := 0
	for n < len(t.queue) && (all || now.Sub(t.queue[n].arrived) >= t.hold) {
		n++
	}
	for _, p := range t.queue[:n] {
		fmt.Fprintln(t.out, t.line(p.event))
		t.lastAt = p.At
	}
	t.queue = t.queue[n:]
}

// line renders one event.
func (t *timeline) line(ev event) string {
	return fmt.Sprintf("  %10s  %-8s  %s", elapsed(ev.At.Sub(t.t0)), ev.Source, ev.Text)
}

// elapsed formats a duration as signed seconds with milliseconds.
func elapsed(d time.Duration) string {
	return fmt.Sprintf("%+.3fs", d.Seconds())
}

// header prints the timeline's heading.
func (t *timeline) header(node string) {
	fmt.Fprintf(t.out, "\nTimeline (t=0: %s powered off). Sources: api = the API server's objects and audit log,\n", node)
	fmt.Fprintln(t.out, "detector = the leader's verdict in /status, ledger and array = the fence record committed through Raft:")
}

// summary prints the durations between the milestones.
func (t *timeline) summary() {
	t.mu.Lock()
	defer t.mu.Unlock()
	span := func(from, to string) string {
		a, okA := t.marks[from]
		b, okB := t.marks[to]
		if !okA || !okB {
			return "n/a"
		}
		return fmt.Sprintf("%.3fs", b.Sub(a).Seconds())
	}
	rows := [][3]string{
		{mHeartbeat, mFailed, fmt.Sprintf("heartbeat grace %s, then corroboration", t.grace)},
		{mFailed, mIntent, "planned on every array, committed before any change"},
		{mIntent, mFenced, fmt.Sprintf("applied and read back on %d arrays", t.arrays)},
		{mFenced, mPodDeleted, "taints, then forced deletion"},
		{mPodDeleted, mReplacement, "Kubernetes: StatefulSet controller, scheduler, kubelet (kwok)"},
		{mHeartbeat, mReplacement, "last heartbeat to the replacement pod Running"},
		{mKill, mReplacement, "power-off to the replacement pod Running"},
	}
	fmt.Fprintln(t.out, "\nSummary:")
	for _, r := range rows {
		fmt.Fprintf(t.out, "  %-20s -> %-20s %9s  (%s)\n", r[0], r[1], span(r[0], r[1]), r[2])
	}
}
