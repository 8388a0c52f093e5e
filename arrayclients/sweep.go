package arrayclients

import (
	"context"
	"errors"
)

// ErrNoSweep means the array's API has no request that lists many nodes'
// connection state at once, or the family's adapter does not use it: the
// caller asks Health per node instead.
var ErrNoSweep = errors.New("the array lists no connection state of many nodes in one request")

// Sweeper is implemented by adapters whose array lists every node's
// connection state in one request (PowerFlex: the system's SDCs with their
// mdmConnectionState). A sweep costs one request per call whatever the
// number of nodes, plus, with withIO, the statistics of the nodes the
// listing shows disconnected (one request for all of them where the API
// has a bulk read, else one each), so it can run every poll interval on a
// cluster of thousands of nodes and show a node's storage going quiet at
// the moment it does.
type Sweeper interface {
	// Sweep returns, for each identity of ids and in its order, the
	// array's view of it, as Health would report it: connectivity from
	// the listing; I/O read (as Health reads it) only when withIO is set
	// and the listing shows the node disconnected, unknown otherwise. An
	// identity of another array, or one the listing does not hold, gets
	// unknown connectivity and I/O with the reason. It never writes. It
	// returns ErrNoSweep when the family has no such listing.
	Sweep(ctx context.Context, ids []Identity, withIO bool) ([]Health, error)
}
