package arrayclients_test

import (
	"context"
	"testing"
	"time"

	"github.com/dell/gopowerstore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/arrayclients/internal/arraytest"
	"github.com/fenced-project/fenced/tests/arraysim/simcore"
)

// sessions asks an adapter for a plan's sessions through the optional
// interface.
func sessions(t *testing.T, a arrayclients.Adapter, p arrayclients.Plan) (arrayclients.SessionReport, error) {
	t.Helper()
	sr, ok := a.(arrayclients.SessionReporter)
	require.True(t, ok, "%T reports sessions", a)
	return sr.Sessions(context.Background(), p)
}

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

		rep, err := sessions(t, a, plan)
		require.NoError(t, err)
		assert.Len(t, rep.Sessions, 6, "three initiators, each logged in to both appliance nodes")
		assert.Nil(t, rep.IO, "PowerStore counts no I/O per host")
		for _, s := range rep.Sessions {
			assert.Contains(t, s.What, id.ObjectName)
		}

		// The node dies, the fence cuts: nothing is left to log in with.
		require.NoError(t, e.sim.SetSignals(id.ObjectID, simcore.Signals{Connected: simcore.Bool(false)}))
		require.NoError(t, a.Apply(ctx, plan))
		rep, err = sessions(t, a, plan)
		require.NoError(t, err)
		assert.Empty(t, rep.Sessions)

		// The node's iscsid logs in while the initiator is on no host:
		// the array shows no session of it.
		e.sim.LogIn(iqn)
		rep, err = sessions(t, a, plan)
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
		rep, err = sessions(t, a, plan)
		require.NoError(t, err)
		require.Len(t, rep.Sessions, 2, "%v", rep.Sessions)
		assert.Contains(t, rep.Sessions[0].What, "initiator "+iqn+" on host "+other)
		assert.NotEqual(t, rep.Sessions[0].Key, rep.Sessions[1].Key)

		// Removed from that host: the array drops the login for good.
		remove := []string{iqn}
		_, err = drv.c.ModifyHost(ctx, &gopowerstore.HostModify{RemoveInitiators: &remove}, otherID)
		require.NoError(t, err)
		require.NoError(t, a.Undo(ctx, plan, arrayclients.RestoreScope{}))
		rep, err = sessions(t, a, plan)
		require.NoError(t, err)
		assert.Empty(t, rep.Sessions, "a removed initiator logs in again before it has a session")

		// Back on its own host, the node's iscsid logs in.
		e.sim.LogIn(iqn)
		rep, err = sessions(t, a, plan)
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

		rep, err := sessions(t, a, plan)
		require.NoError(t, err)
		assert.Empty(t, rep.Sessions)

		// The cut keeps the initiators, and the node's login to its own
		// host, whose volumes are detached, reaches only what the
		// read-back checks: no session is reported for it.
		e.sim.LogIn(iqn)
		rep, err = sessions(t, a, plan)
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
				Kind: arrayclients.PowerStoreKindNFSClient, Keys: []string{"127.0.10.9"}}}
		_, err := sessions(t, a, plan)
		require.ErrorIs(t, err, arrayclients.ErrNoSessions)
	})
}

// TestPowerFlexSessions: the SDC's statistics window, as the simulator
// computes it the way the array does: I/O only while a volume is mapped
// to the SDC.
func TestPowerFlexSessions(t *testing.T) {
	ctx := context.Background()
	e := startPowerFlex(t, pflexFixture, arrayclients.Options{}, 2*time.Second)
	id, err := e.adapter.Resolve(ctx, pflexW1)
	require.NoError(t, err)
	plan, err := e.adapter.Plan(ctx, id, nil)
	require.NoError(t, err)

	rep, err := sessions(t, e.adapter, plan)
	require.NoError(t, err)
	arraytest.RequireReadOnlyProbes(t, e.srv)
	require.NotNil(t, rep.IO)
	assert.Positive(t, rep.IO.Ops, rep.IO.What)
	assert.Equal(t, time.Second, rep.IO.Window)
	assert.Empty(t, rep.Sessions, "an SDC's MDM connection is no session to a volume")
	assert.False(t, rep.AskedAt.IsZero())

	// Fenced: no volume mapped, so no I/O however hard the node tries.
	require.NoError(t, e.adapter.Apply(ctx, plan))
	rep, err = sessions(t, e.adapter, plan)
	require.NoError(t, err)
	require.NotNil(t, rep.IO)
	assert.Zero(t, rep.IO.Ops, rep.IO.What)
	assert.Contains(t, rep.IO.What, "0 volumes mapped")

	// One volume mapped back: the node's writes show in the window.
	require.NoError(t, e.adapter.Undo(ctx, plan, arrayclients.RestoreScope{}))
	rep, err = sessions(t, e.adapter, plan)
	require.NoError(t, err)
	assert.Positive(t, rep.IO.Ops, rep.IO.What)

	// The window started after a moment only when it is shorter than the
	// time since then.
	w := arrayclients.IOWindow{Window: time.Second}
	at := time.Unix(1000, 0)
	assert.True(t, w.StartsAfter(at, at.Add(-2*time.Second)))
	assert.False(t, w.StartsAfter(at, at.Add(-time.Second)))

	// The node stops writing: the window empties.
	require.NoError(t, e.sim.SetSignals("worker-1", simcore.Signals{IOActive: simcore.Bool(false)}))
	rep, err = sessions(t, e.adapter, plan)
	require.NoError(t, err)
	assert.Zero(t, rep.IO.Ops)
}

// TestPowerFlexNFSClientHasNoSessions: a node known only as an NFS client
// has no SDC and so no statistics: ErrNoSessions, no failure.
func TestPowerFlexNFSClientHasNoSessions(t *testing.T) {
	e := startPowerFlex(t, pflexFixture, arrayclients.Options{}, 2*time.Second)
	plan := arrayclients.Plan{Array: "pflex-1", Family: arrayclients.PowerFlex, Entries: []byte(`{}`),
		Identity: arrayclients.Identity{Array: "pflex-1", Family: arrayclients.PowerFlex, Node: "worker-9", Kind: arrayclients.PowerFlexKindNFSClient}}
	_, err := sessions(t, e.adapter, plan)
	require.ErrorIs(t, err, arrayclients.ErrNoSessions)
}

// TestPowerMaxSessions: the node's initiator paths that are logged in and
// on the fabric while a host has the initiator, as the simulator shows them
// the way Unisphere does: a port login follows the node, not the host, so
// an alive node stays logged in after the fence, but with no host it
// reaches nothing and is no session; once a host has the initiator again,
// it is.
func TestPowerMaxSessions(t *testing.T) {
	e := startPowerMax(t, pmaxFixture, 2*time.Second)
	ctx := context.Background()
	id, err := e.adapter.Resolve(ctx, pmaxNode("worker-1"))
	require.NoError(t, err)
	plan, err := e.adapter.Plan(ctx, id, nil)
	require.NoError(t, err)

	rep, err := sessions(t, e.adapter, plan)
	require.NoError(t, err)
	arraytest.RequireReadOnlyProbes(t, e.srv)
	require.NotEmpty(t, rep.Sessions)
	for _, s := range rep.Sessions {
		assert.Contains(t, s.What, "logged in and on the fabric, in host "+id.ObjectID)
	}
	up := len(rep.Sessions)

	// Fenced while alive (its storage paths up): logged in, in no host.
	require.NoError(t, e.adapter.Apply(ctx, plan))
	rep, err = sessions(t, e.adapter, plan)
	require.NoError(t, err)
	assert.Empty(t, rep.Sessions)

	// Its initiators back in its host: every path is a session again.
	require.NoError(t, e.adapter.Undo(ctx, plan, arrayclients.RestoreScope{}))
	rep, err = sessions(t, e.adapter, plan)
	require.NoError(t, err)
	assert.Len(t, rep.Sessions, up)

	// The node dies: no path is logged in.
	require.NoError(t, e.sim.SetSignals(id.ObjectID, simcore.Signals{Connected: simcore.Bool(false)}))
	rep, err = sessions(t, e.adapter, plan)
	require.NoError(t, err)
	assert.Empty(t, rep.Sessions)
}
