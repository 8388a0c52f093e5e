package powerstore

import (
	"context"
	"fmt"
	"time"

	"github.com/dell/gopowerstore"
)

// listHosts lists every host of the array (gopowerstore GetHosts: GET
// host?select=*), sharing a listing begun at since or later with other
// calls (arrayclients.Listings). A read-back lists every host (the node's
// initiators registered on another host would give it its paths back),
// and so do the held checks' session reads: in a storm many run at once,
// and a read-back passes the end of the write it reads back.
func (a *PowerStoreAdapter) listHosts(ctx context.Context, c gopowerstore.Client, since time.Time) ([]gopowerstore.Host, error) {
	hosts, err := a.hostLists.List(ctx, since, func(ctx context.Context) ([]gopowerstore.Host, error) {
		rctx, cancel := context.WithTimeout(ctx, 4*a.timeout)
		defer cancel()
		return c.GetHosts(rctx)
	})
	if err != nil {
		return nil, fmt.Errorf("list hosts: %w", err)
	}
	return hosts, nil
}
