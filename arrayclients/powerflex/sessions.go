package powerflex

import (
	"context"
	"fmt"
	"time"

	"github.com/fenced-project/fenced/arrayclients"
)

var _ arrayclients.SessionReporter = (*PowerFlexAdapter)(nil)

// Sessions reads the SDC's I/O statistics (GET
// /api/instances/Sdc::<id>/relationships/Statistics, the request
// goscaleio's Sdc.GetStatistics sends). Its
// userDataReadBwc, userDataWriteBwc and userDataTrimBwc are each
// {numOccured, numSeconds, totalWeightInKb}: the operations the SDC sent
// in a window of numSeconds the array computes when asked. An SDC reaches
// volumes only through its mappings, so once every mapping is removed and
// read back, I/O in a window that began after that is access the
// read-back did not show.
//
// PowerFlex has no per-volume session of an SDC: its mdmConnectionState is
// the SDC's link to the MDM, which a fence leaves alone (there is no
// per-SDC block call), so it is not reported as a session. An NFS client
// and an NVMe/TCP host have no statistics in goscaleio: ErrNoSessions.
func (a *PowerFlexAdapter) Sessions(ctx context.Context, p arrayclients.Plan) (arrayclients.SessionReport, error) {
	e, err := a.entries(p)
	if err != nil {
		return arrayclients.SessionReport{}, err
	}
	if e.SdcID == "" || e.isNVMe() {
		return arrayclients.SessionReport{}, fmt.Errorf("powerflex array %s: node %s (%s): %w", a.cfg.Name, p.Identity.Node,
			p.Identity.Kind, arrayclients.ErrNoSessions)
	}
	rep := arrayclients.SessionReport{AskedAt: time.Now().UTC()}
	err = a.pool.with(ctx, func(k powerFlexCall) error {
		// The statistics' own path (what the SDC's Statistics link names,
		// the path the sweep reads too), without reading the SDC first:
		// every read-back and held check asks this, and the read-back
		// beside it has just read the SDC.
		stats, err := k.sdcStatisticsByID(e.SdcID)
		if powerFlexIs(err, pflexMsgNoSdc) {
			// The SDC was removed: it can send nothing, and the
			// read-back reports the identity gone.
			return nil
		}
		if err != nil {
			return fmt.Errorf("read statistics of SDC %s: %w", e.SdcID, err)
		}
		r, w, t := stats.UserDataReadBwc, stats.UserDataWriteBwc, stats.UserDataTrimBwc
		secs := max(r.NumSeconds, w.NumSeconds, t.NumSeconds)
		rep.IO = &arrayclients.IOWindow{
			Ops:    int64(r.NumOccured) + int64(w.NumOccured) + int64(t.NumOccured),
			Window: time.Duration(secs) * time.Second,
			What: fmt.Sprintf("SDC %s statistics: %d reads, %d writes, %d trims in the last %ds (%d volumes mapped)",
				e.SdcID, r.NumOccured, w.NumOccured, t.NumOccured, secs, stats.NumOfMappedVolumes),
		}
		return nil
	})
	if err != nil {
		return arrayclients.SessionReport{}, fmt.Errorf("powerflex array %s: sessions of node %s: %w", a.cfg.Name, p.Identity.Node, err)
	}
	return rep, nil
}
