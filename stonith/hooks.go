package stonith

// Point names a place in the pipeline where a test hook (Config.Hook) may
// stop it, as if the process had died there.
type Point string

// The points, in pipeline order. "…-written" points fall between a write to
// an array or the API server and the ledger entry recording it.
const (
	PointOpened         Point = "opened"          // intent committed
	PointFencing        Point = "fencing"         // fencing committed
	PointApplied        Point = "applied"         // one array's apply done, not yet recorded
	PointVerified       Point = "verified"        // every array recorded verified, fenced not committed
	PointFenced         Point = "fenced"          // fenced committed
	PointTaintWritten   Point = "taint-written"   // taints on the node, tainted not committed
	PointTainted        Point = "tainted"         // tainted committed
	PointPodsDeleted    Point = "pods-deleted"    // pods force-deleted, evicted not committed
	PointEvicted        Point = "evicted"         // evicted committed
	PointUnfenceIntent  Point = "unfence-intent"  // unfence-intent committed
	PointUndone         Point = "undone"          // one array's undo done, not yet recorded
	PointRestored       Point = "restored"        // restored committed
	PointUntaintWritten Point = "untaint-written" // taints removed, untainted not committed
	PointUntainted      Point = "untainted"       // untainted committed
)

// Points lists every point in pipeline order.
func Points() []Point {
	return []Point{PointOpened, PointFencing, PointApplied, PointVerified, PointFenced, PointTaintWritten,
		PointTainted, PointPodsDeleted, PointEvicted, PointUnfenceIntent, PointUndone, PointRestored,
		PointUntaintWritten, PointUntainted}
}

// at calls the hook; it returns errStopped when the hook says stop.
func (c *Controller) at(p Point) error {
	if c.cfg.Hook != nil && !c.cfg.Hook(p) {
		return errStopped
	}
	return nil
}
