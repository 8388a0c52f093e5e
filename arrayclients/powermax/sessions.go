package powermax

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/fenced-project/fenced/arrayclients"
)

var _ arrayclients.SessionReporter = (*PowerMaxAdapter)(nil)

// Sessions lists the director-port paths of the node's initiators (the
// plan's and the identity's) that Unisphere shows logged_in and on_fabric
// while the initiator is in a host (gopowermax GetInitiatorList and
// GetInitiatorByID: GET …/sloprovisioning/symmetrix/{sym}/initiator/
// {dir:port:initiator}, fields logged_in, on_fabric and host). A port
// login belongs to the initiator: an alive node stays logged in after the
// fence removed its initiators from its host, but reaches no masking view
// until a host has them again, so only a login with a host is a session.
//
// csi-powermax's vSphere host is shared by every node: ErrNoSessions.
func (a *PowerMaxAdapter) Sessions(ctx context.Context, p arrayclients.Plan) (arrayclients.SessionReport, error) {
	if p.Identity.Kind == PowerMaxKindSharedHost {
		return arrayclients.SessionReport{}, a.errf("sessions", p.Identity.Node, arrayclients.ErrNoSessions)
	}
	e, err := a.entries(p)
	if err != nil {
		return arrayclients.SessionReport{}, a.errf("sessions", p.Identity.Node, err)
	}
	c, err := a.conn.get(ctx)
	if err != nil {
		return arrayclients.SessionReport{}, a.errf("sessions", p.Identity.Node, err)
	}
	rep := arrayclients.SessionReport{AskedAt: time.Now().UTC()}
	paths, err := a.initiatorPaths(ctx, c, slices.Concat(e.Initiators, p.Identity.Keys))
	if err != nil {
		return arrayclients.SessionReport{}, a.errf("sessions", p.Identity.Node, err)
	}
	for _, path := range paths {
		if path.up && path.host != "" {
			rep.Sessions = append(rep.Sessions, arrayclients.Session{Key: path.id,
				What: fmt.Sprintf("initiator path %s logged in and on the fabric, in host %s", path.id, path.host)})
		}
	}
	return rep, nil
}
