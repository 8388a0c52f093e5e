package powerstore_test

import (
	"context"
	"strings"
	"testing"

	"github.com/dell/gopowerstore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/arrayclients/internal/arraytest"
)

// registerHost does what csi-powerstore's node plugin does on a node none
// of whose initiators any host has: it creates a host named by the node
// ID with the node's initiators of one protocol, FC before iSCSI
// (dell/csi-powerstore pkg/node/node.go setupHost, registerHost).
func (d psDriver) registerHost(name string, initiators []gopowerstore.InitiatorInstance) string {
	d.t.Helper()
	var fc, iscsi []gopowerstore.InitiatorCreateModify
	for _, in := range initiators {
		p, pt := in.PortName, in.PortType
		m := gopowerstore.InitiatorCreateModify{PortName: &p, PortType: &pt}
		if pt == gopowerstore.InitiatorProtocolTypeEnumFC {
			fc = append(fc, m)
		} else {
			iscsi = append(iscsi, m)
		}
	}
	reg := fc
	if len(reg) == 0 {
		reg = iscsi
	}
	os, desc := gopowerstore.OSTypeEnumLinux, "k8s node"
	resp, err := d.c.CreateHost(context.Background(), &gopowerstore.HostCreate{Name: &name, OsType: &os, Initiators: &reg, Description: &desc})
	require.NoError(d.t, err)
	return resp.ID
}

// psFenced resolves and fences a fixture node in initiators mode and
// returns the adapter, the plan and the host's initiators before the
// fence.
func psFenced(t *testing.T, e *psEnv, node string) (arrayclients.Adapter, arrayclients.Plan, []gopowerstore.InitiatorInstance) {
	t.Helper()
	ctx := context.Background()
	a := e.adapter(t, nil)
	id, err := a.Resolve(ctx, e.node(node))
	require.NoError(t, err)
	h, err := e.driver(t).c.GetHost(ctx, id.ObjectID)
	require.NoError(t, err)
	plan, err := a.Plan(ctx, id, nil)
	require.NoError(t, err)
	plan = arraytest.RoundTrip(t, plan)
	require.NoError(t, a.Apply(ctx, plan))
	v, err := a.Verify(ctx, plan)
	require.NoError(t, err)
	require.True(t, v.Fenced, "remaining: %v", v.Remaining)
	return a, plan, h.Initiators
}

// withIP is the node's inputs after it came back with a new IP: its
// csi-powerstore node ID ends in the new IP (pkg/node/node.go
// updateNodeID).
func withIP(n arrayclients.Node, ip string) arrayclients.Node {
	old := n.CSINodeIDs[arrayclients.DriverPowerStore]
	ids := map[string]string{}
	for k, v := range n.CSINodeIDs {
		ids[k] = v
	}
	ids[arrayclients.DriverPowerStore] = old[:strings.LastIndex(old, "-")+1] + ip
	n.CSINodeIDs, n.Addresses = ids, []string{ip}
	return n
}

func TestPowerStoreUndoNodeBackWithNewIP(t *testing.T) {
	e := newPSEnv(t, psFixture)
	ctx := context.Background()
	a, plan, initiators := psFenced(t, e, "worker-2")

	// The node reboots with a new IP: the driver finds no host with its
	// initiators (they were removed) and registers a new one.
	back := withIP(e.node("worker-2"), "127.0.10.22")
	newName := back.CSINodeIDs[arrayclients.DriverPowerStore]
	newID := e.driver(t).registerHost(newName, initiators)

	// Adding the initiators back to the old host is what the array refuses.
	var add []gopowerstore.InitiatorCreateModify
	for _, in := range initiators {
		p, pt := in.PortName, in.PortType
		add = append(add, gopowerstore.InitiatorCreateModify{PortName: &p, PortType: &pt})
	}
	_, err := e.driver(t).c.ModifyHost(ctx, &gopowerstore.HostModify{AddInitiators: &add}, plan.Identity.ObjectID)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "already registered with another host")

	// The node's identity learned from its new CSINode ID is the new host.
	learned, err := a.Resolve(ctx, back)
	require.NoError(t, err)
	require.Equal(t, newID, learned.ObjectID)
	require.Equal(t, newName, learned.ObjectName)

	before := e.state(t)
	seq := e.srv.LastSeq()
	scope := arrayclients.RestoreScope{Learned: &learned}
	require.NoError(t, a.Undo(ctx, plan, scope), "the initiators are back through the node's new host")
	assert.Empty(t, arraytest.WritesSince(e.srv, seq), "nothing is added to the old host, nothing moves between hosts")
	assert.Equal(t, arraytest.DumpJSON(t, before), arraytest.DumpJSON(t, e.state(t)))
	v, err := a.VerifyRestore(ctx, plan, scope)
	require.NoError(t, err)
	assert.True(t, v.Restored, "missing: %v; remaining: %v", v.Missing, v.Remaining)
	require.NoError(t, a.Undo(ctx, plan, scope), "Undo twice")
	assert.Empty(t, arraytest.WritesSince(e.srv, seq))

	t.Run("identity not learned yet", func(t *testing.T) {
		err := a.Undo(ctx, plan, arrayclients.RestoreScope{})
		require.ErrorIs(t, err, arrayclients.ErrIdentityConflict)
		assert.Contains(t, err.Error(), newName)
		assert.Contains(t, err.Error(), plan.Identity.ObjectName)
		v, err := a.VerifyRestore(ctx, plan, arrayclients.RestoreScope{})
		require.NoError(t, err)
		assert.False(t, v.Restored)
	})
}

func TestPowerStoreUndoInitiatorsOnAnotherNodesHost(t *testing.T) {
	e := newPSEnv(t, psFixture)
	ctx := context.Background()
	a, plan, initiators := psFenced(t, e, "worker-3")

	// Another machine (another machine ID) registered the port names.
	foreign := "csi-node-ffffffffffffffffffffffffffffffff-127.0.10.99"
	foreignID := e.driver(t).registerHost(foreign, initiators)
	// Even a learned identity naming that host does not make it this
	// node's: its name is not this node's <prefix>-<machine ID>.
	learned := arrayclients.Identity{Array: "pstore-1", Family: arrayclients.PowerStore, Node: "worker-3", ObjectID: foreignID, ObjectName: foreign}

	for name, scope := range map[string]arrayclients.RestoreScope{"no learned identity": {}, "learned names it": {Learned: &learned}} {
		t.Run(name, func(t *testing.T) {
			seq := e.srv.LastSeq()
			err := a.Undo(ctx, plan, scope)
			require.ErrorIs(t, err, arrayclients.ErrIdentityConflict)
			assert.Contains(t, err.Error(), "host "+foreign)
			assert.Contains(t, err.Error(), "host "+plan.Identity.ObjectName)
			assert.Empty(t, arraytest.WritesSince(e.srv, seq), "no write: initiators never move between hosts")
			v, err := a.VerifyRestore(ctx, plan, scope)
			require.NoError(t, err)
			assert.False(t, v.Restored)
			assert.NotEmpty(t, v.Missing)
		})
	}
}

// TestPowerStoreInitiatorsOnAnUnmappedHost: the node's initiators on a
// host through which no volume is mapped reach nothing: the fence
// read-back counts them as no access, and their logins are no session to
// report. Once a volume is mapped to that host they are access again, as
// are logins through it. This is what a node back from a reboot with a
// new IP looks like before the unfence: its node plugin registered a new
// host by its new node ID (dell/csi-powerstore pkg/node/node.go
// setupHost), and fenced's NoSchedule taint keeps pods, and so
// publishes, away from it.
func TestPowerStoreInitiatorsOnAnUnmappedHost(t *testing.T) {
	e := newPSEnv(t, psFixture)
	ctx := context.Background()
	a, plan, initiators := psFenced(t, e, "worker-2")
	back := withIP(e.node("worker-2"), "127.0.10.22")
	newName := back.CSINodeIDs[arrayclients.DriverPowerStore]
	newID := e.driver(t).registerHost(newName, initiators)
	for _, in := range initiators {
		e.sim.LogIn(in.PortName)
	}

	v, err := a.Verify(ctx, plan)
	require.NoError(t, err)
	assert.True(t, v.Fenced, "nothing is mapped to host %s: remaining %v", newName, v.Remaining)
	rep, err := arraytest.Sessions(t, a, plan)
	require.NoError(t, err)
	assert.Empty(t, rep.Sessions, "a login to a host with nothing mapped reaches no volume")

	// A volume published to that host is access again (detached from the
	// node's old host first, as the attach-detach controller does once
	// the old attachment is gone).
	vol := e.volumeID(t, "pvc-worker-2-1")
	e.driver(t).unpublish(plan.Identity.ObjectID, vol)
	e.driver(t).publish(newID, vol)
	v, err = a.Verify(ctx, plan)
	require.NoError(t, err)
	assert.False(t, v.Fenced)
	require.NotEmpty(t, v.Remaining)
	assert.Contains(t, strings.Join(v.Remaining, "; "), "is registered on host "+newName+" (1 volume(s) mapped: "+vol+")")
	for _, in := range initiators {
		e.sim.LogIn(in.PortName)
	}
	rep, err = arraytest.Sessions(t, a, plan)
	require.NoError(t, err)
	assert.NotEmpty(t, rep.Sessions)
	for _, s := range rep.Sessions {
		assert.Contains(t, s.What, "on host "+newName)
	}
}
