package powerstore

import (
	"context"
	"fmt"
	"net"
	"sort"
	"time"

	"github.com/dell/gopowerstore"

	"github.com/fenced-project/fenced/arrayclients"
)

var _ arrayclients.SessionReporter = (*PowerStoreAdapter)(nil)

// Sessions lists the active sessions of the node's initiators on every
// host (gopowerstore GetHosts: GET host?select=*, each host_initiators[]
// with its active_sessions[]: appliance_id, node_id and the target
// port_name the initiator is logged in to). PowerStore shows a session
// only under a host initiator, so an initiator that a fence removed has
// none to show until it is registered with a host again and logs in.
//
// The node's initiators are the plan's and the identity's. A detach-mode
// fence keeps the host's initiators (and their sessions) and detaches its
// volumes instead: sessions on the node's own host reach only what the
// read-back already checks, so in that mode only sessions of the node's
// initiators on another host are reported. In initiators mode the cut
// removes the initiators, which ends their sessions.
//
// Sessions on a host other than the plan's through which no volume is
// mapped (a host the node plugin registered again) reach nothing and are
// not reported, as the read-back does not count those initiators as
// access.
//
// An NFS client without a host has no sessions on the array: ErrNoSessions.
func (a *PowerStoreAdapter) Sessions(ctx context.Context, plan arrayclients.Plan) (arrayclients.SessionReport, error) {
	fail := func(err error) (arrayclients.SessionReport, error) {
		return arrayclients.SessionReport{}, fmt.Errorf("powerstore array %s: sessions of node %s (host %s): %w",
			a.cfg.Name, plan.Identity.Node, plan.Identity.ObjectName, err)
	}
	e, err := a.decodePlan(plan)
	if err != nil {
		return fail(err)
	}
	if e.HostID == "" {
		return fail(arrayclients.ErrNoSessions)
	}
	ports := map[string]bool{}
	for _, in := range e.Initiators {
		ports[in.PortName] = true
	}
	for _, k := range plan.Identity.Keys {
		if net.ParseIP(k) == nil {
			ports[k] = true
		}
	}
	rep := arrayclients.SessionReport{AskedAt: time.Now().UTC()}
	err = a.with(ctx, func(c gopowerstore.Client) error {
		hosts, err := a.listHosts(ctx, c, rep.AskedAt)
		if err != nil {
			return err
		}
		for _, h := range hosts {
			if h.ID == e.HostID && e.Mode == arrayclients.PowerStoreModeDetach {
				continue
			}
			reach := ""
			for _, in := range h.Initiators {
				if !ports[in.PortName] || len(in.ActiveSessions) == 0 {
					continue
				}
				if h.ID != e.HostID && reach == "" {
					// A login to another host through which nothing is
					// mapped reaches no volume (as the read-back counts
					// it): not a session to report.
					if reach, err = a.hostAccess(ctx, c, h); err != nil {
						return err
					}
					if reach == "" {
						break
					}
				}
				for _, s := range in.ActiveSessions {
					rep.Sessions = append(rep.Sessions, arrayclients.Session{
						Key: fmt.Sprintf("%s>%s@%s/%s", in.PortName, s.PortName, s.ApplianceID, s.NodeID),
						What: fmt.Sprintf("initiator %s on host %s logged in to %s (appliance %s, node %s)",
							in.PortName, h.Name, s.PortName, s.ApplianceID, s.NodeID),
					})
				}
			}
		}
		return nil
	})
	if err != nil {
		return fail(psClassify(err))
	}
	sort.Slice(rep.Sessions, func(i, j int) bool { return rep.Sessions[i].Key < rep.Sessions[j].Key })
	return rep, nil
}
