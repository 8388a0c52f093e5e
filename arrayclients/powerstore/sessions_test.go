package powerstore_test

import (
	"context"
	"testing"

	"github.com/dell/gopowerstore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/arrayclients/internal/arraytest"
	"github.com/fenced-project/fenced/arrayclients/powerstore"
	"github.com/fenced-project/fenced/tests/arraysim/simcore"
)

// TestPowerStoreSessions: the node's initiators' active_sessions, as the
// simulator shows them the way the array does: while the node is up and
// its initiator is registered with a host; gone when a fence removes the
// initiator; back when it is registered again and logs in.
func TestPowerStoreSessions(t *testing.T) {
	const iqn = "iqn.1994-05.com.redhat:worker-1"
	t.Run(arrayclients.PowerStoreModeInitiators, func(t *testing.T) {
		e := newPSEnv(t, psFixture)
		a := e.adapter(t, nil)
		ctx := context.Background()
		id, err := a.Resolve(ctx, e.node("worker-1"))
		require.NoError(t, err)
		plan, err := a.Plan(ctx, id, nil)
		require.NoError(t, err)
		plan = arraytest.RoundTrip(t, plan)

		rep, err := arraytest.Sessions(t, a, plan)
		require.NoError(t, err)
		assert.Len(t, rep.Sessions, 6, "three initiators, each logged in to both appliance nodes")
		assert.Nil(t, rep.IO, "PowerStore counts no I/O per host")
		for _, s := range rep.Sessions {
			assert.Contains(t, s.What, id.ObjectName)
		}

		// The node dies, the fence cuts: nothing is left to log in with.
		require.NoError(t, e.sim.SetSignals(id.ObjectID, simcore.Signals{Connected: simcore.Bool(false)}))
		require.NoError(t, a.Apply(ctx, plan))
		rep, err = arraytest.Sessions(t, a, plan)
		require.NoError(t, err)
		assert.Empty(t, rep.Sessions)

		// The node's iscsid logs in while the initiator is on no host:
		// the array shows no session of it.
		e.sim.LogIn(iqn)
		rep, err = arraytest.Sessions(t, a, plan)
		require.NoError(t, err)
		assert.Empty(t, rep.Sessions)

		// Registered with another node's host (a person's mistake): the
		// login shows there, a path the node should not have.
		other := e.nodes["worker-2"].CSINodeIDs("")[arrayclients.DriverPowerStore]
		otherID, ok := e.sim.HostID(other)
		require.True(t, ok)
		drv := e.driver(t)
		p, pt := iqn, gopowerstore.InitiatorProtocolTypeEnumISCSI
		add := []gopowerstore.InitiatorCreateModify{{PortName: &p, PortType: &pt}}
		_, err = drv.c.ModifyHost(ctx, &gopowerstore.HostModify{AddInitiators: &add}, otherID)
		require.NoError(t, err)
		rep, err = arraytest.Sessions(t, a, plan)
		require.NoError(t, err)
		require.Len(t, rep.Sessions, 2, "%v", rep.Sessions)
		assert.Contains(t, rep.Sessions[0].What, "initiator "+iqn+" on host "+other)
		assert.NotEqual(t, rep.Sessions[0].Key, rep.Sessions[1].Key)

		// Removed from that host: the array drops the login for good.
		remove := []string{iqn}
		_, err = drv.c.ModifyHost(ctx, &gopowerstore.HostModify{RemoveInitiators: &remove}, otherID)
		require.NoError(t, err)
		require.NoError(t, a.Undo(ctx, plan, arrayclients.RestoreScope{}))
		rep, err = arraytest.Sessions(t, a, plan)
		require.NoError(t, err)
		assert.Empty(t, rep.Sessions, "a removed initiator logs in again before it has a session")

		// Back on its own host, the node's iscsid logs in.
		e.sim.LogIn(iqn)
		rep, err = arraytest.Sessions(t, a, plan)
		require.NoError(t, err)
		require.Len(t, rep.Sessions, 2)
		assert.Contains(t, rep.Sessions[0].What, "initiator "+iqn+" on host "+id.ObjectName)
	})

	t.Run(arrayclients.PowerStoreModeDetach, func(t *testing.T) {
		e := newPSEnv(t, psFixture)
		a := e.adapter(t, func(c *arrayclients.Config) { c.PowerStoreFenceMode = arrayclients.PowerStoreModeDetach })
		ctx := context.Background()
		id, err := a.Resolve(ctx, e.node("worker-1"))
		require.NoError(t, err)
		plan, err := a.Plan(ctx, id, nil)
		require.NoError(t, err)
		require.NoError(t, e.sim.SetSignals(id.ObjectID, simcore.Signals{Connected: simcore.Bool(false)}))
		require.NoError(t, a.Apply(ctx, plan))
		v, err := a.Verify(ctx, plan)
		require.NoError(t, err)
		require.True(t, v.Fenced, "%v", v.Remaining)

		rep, err := arraytest.Sessions(t, a, plan)
		require.NoError(t, err)
		assert.Empty(t, rep.Sessions)

		// The cut keeps the initiators, and the node's login to its own
		// host, whose volumes are detached, reaches only what the
		// read-back checks: no session is reported for it.
		e.sim.LogIn(iqn)
		rep, err = arraytest.Sessions(t, a, plan)
		require.NoError(t, err)
		assert.Empty(t, rep.Sessions)
		v, err = a.Verify(ctx, plan)
		require.NoError(t, err)
		assert.True(t, v.Fenced, "%v", v.Remaining)
	})

	t.Run("nfs client", func(t *testing.T) {
		e := newPSEnv(t, psFixture)
		a := e.adapter(t, nil)
		plan := arrayclients.Plan{Array: "pstore-1", Family: arrayclients.PowerStore, Entries: []byte(`{"mode":"initiators","nfsIPs":["127.0.10.9"]}`),
			Identity: arrayclients.Identity{Array: "pstore-1", Family: arrayclients.PowerStore, Node: "worker-9",
				Kind: powerstore.PowerStoreKindNFSClient, Keys: []string{"127.0.10.9"}}}
		_, err := arraytest.Sessions(t, a, plan)
		require.ErrorIs(t, err, arrayclients.ErrNoSessions)
	})
}
