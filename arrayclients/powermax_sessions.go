package arrayclients

import (
	"context"
	"fmt"
	"slices"
	"time"
)

var _ SessionReporter = (*PowerMaxAdapter)(nil)

// Sessions lists the director-port paths of the node's initiators (the
// plan's and the identity's) that Unisphere shows logged_in and on_fabric
// (gopowermax GetInitiatorList and GetInitiatorByID: GET
// …/sloprovisioning/symmetrix/{sym}/initiator/{dir:port:initiator}). A
// port login belongs to the initiator, not to the host: removing the
// initiators from the node's host (the fence) leaves an alive node's
// logins standing, so every session is Kept and only a new login (a path
// that was not logged in) is a regression.
//
// csi-powermax's vSphere host is shared by every node: ErrNoSessions.
func (a *PowerMaxAdapter) Sessions(ctx context.Context, p Plan) (SessionReport, error) {
	if p.Identity.Kind == PowerMaxKindSharedHost {
		return SessionReport{}, a.errf("sessions", p.Identity.Node, ErrNoSessions)
	}
	e, err := a.entries(p)
	if err != nil {
		return SessionReport{}, a.errf("sessions", p.Identity.Node, err)
	}
	c, err := a.conn.get(ctx)
	if err != nil {
		return SessionReport{}, a.errf("sessions", p.Identity.Node, err)
	}
	rep := SessionReport{AskedAt: time.Now().UTC()}
	paths, err := a.initiatorPaths(ctx, c, slices.Concat(e.Initiators, p.Identity.Keys))
	if err != nil {
		return SessionReport{}, a.errf("sessions", p.Identity.Node, err)
	}
	for _, path := range paths {
		if path.up {
			rep.Sessions = append(rep.Sessions, Session{Key: path.id, Kept: true,
				What: fmt.Sprintf("initiator path %s logged in and on the fabric (host %s had it)", path.id, e.HostID)})
		}
	}
	return rep, nil
}
