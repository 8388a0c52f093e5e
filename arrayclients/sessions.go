package arrayclients

import (
	"context"
	"errors"
	"time"
)

// ErrNoSessions means the array reports no per-node sessions or I/O that
// fenced reads for this plan: the family keeps none (PowerScale, Unity
// here), or the node's identity has none (an NFS client, a PowerFlex NVMe
// host). It is no failure: the held check relies on the read-back alone.
var ErrNoSessions = errors.New("the array reports no sessions or I/O of this node")

// SessionReporter is implemented by adapters whose array reports a node's
// sessions or I/O of its own (PowerStore host initiators' active_sessions,
// PowerMax initiator paths' logged_in and on_fabric, PowerFlex SDC
// statistics). A fence's cut removes what gives the node access; a session
// through a path the cut removed, or I/O after the cut was read back, means
// something gave it back, even where the read-back of the plan's entries
// does not show it.
type SessionReporter interface {
	// Sessions reads what the array shows of the plan's node now. It never
	// writes. It returns ErrNoSessions when the array shows nothing of the
	// kind for this plan.
	Sessions(ctx context.Context, plan Plan) (SessionReport, error)
}

// SessionReport is what an array shows of a node's sessions and I/O at one
// moment.
type SessionReport struct {
	// Sessions are the node's active sessions through paths a fence's
	// cut removes (an initiator logged in to a target port while a host
	// has it), by the array's own report.
	Sessions []Session `json:"sessions,omitempty"`
	// IO is the node's I/O in the array's latest statistics window, where
	// the array counts I/O per node; nil where it does not.
	IO *IOWindow `json:"io,omitempty"`
	// AskedAt is when the array was asked: its statistics window ends no
	// earlier than this.
	AskedAt time.Time `json:"askedAt"`
}

// Session is one active session of the node through a path the fence's
// cut removes (an initiator logged in while a host has it): after the cut
// there is none, unless something gave the path back.
type Session struct {
	// Key identifies the session (initiator, target port and where the
	// array shows it).
	Key string `json:"key"`
	// What describes it for logs, Events and the ledger note.
	What string `json:"what"`
}

// IOWindow is the node's I/O that the array counted over a window ending
// when it answered.
type IOWindow struct {
	// Ops is the number of read, write and trim operations in the window.
	Ops int64 `json:"ops"`
	// Window is the window's length as the array reports it.
	Window time.Duration `json:"window"`
	// What describes the counters for logs and Events.
	What string `json:"what"`
}

// StartsAfter reports whether the window certainly began after t: the
// array's window ends no earlier than asked, so it began no earlier than
// asked - Window.
func (w IOWindow) StartsAfter(asked, t time.Time) bool {
	return asked.Add(-w.Window).After(t)
}
