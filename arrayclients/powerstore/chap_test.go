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
	powerstoresim "github.com/fenced-project/fenced/tests/arraysim/powerstore"
	"github.com/fenced-project/fenced/tests/csidriver"
)

// psChapFixture is a PowerStore array whose worker nodes log in over
// iSCSI with CHAP, as csi-powerstore with X_CSI_POWERSTORE_ENABLE_CHAP
// sets it up: user admin and a secret of the node plugin's last start.
const psChapFixture = `
nodes:
  - {name: worker-1, ip: 127.0.10.1, machineID: 0a1b2c3d4e5f60718293a4b5c6d7e8f9, iqn: "iqn.1994-05.com.redhat:worker-1"}
  - {name: worker-2, ip: 127.0.10.2, machineID: 1a1b2c3d4e5f60718293a4b5c6d7e8f9, iqn: "iqn.1994-05.com.redhat:worker-2"}
arrays:
  - name: pstore-1
    family: powerstore
    spec:
      perNode:
        nodes: [worker-1, worker-2]
        protocol: iSCSI
        volumes: 2
        chapUsername: admin
        chapPassword: 5f0c9e2a71b4d3c8e6a1f027
`

// psChapNode is a fixture node as csi-powerstore's node plugin on it
// knows itself: node ID, iSCSI initiator, CHAP enabled.
func psChapNode(e *psEnv, node arrayclients.Node) csidriver.PowerStoreNode {
	return csidriver.PowerStoreNode{NodeID: node.CSINodeIDs[arrayclients.DriverPowerStore],
		Initiators: []string{e.nodes[node.Name].IQN}, PortType: gopowerstore.InitiatorProtocolTypeEnumISCSI, CHAP: true}
}

// psInitiatorState returns the simulator's state of a port name: the
// host that has it and its CHAP user and secret fingerprint.
func psInitiatorState(t testing.TB, e *psEnv, port string) (powerstoresim.HostState, powerstoresim.InitiatorState) {
	t.Helper()
	for _, h := range e.state(t).Hosts {
		for _, in := range h.Initiators {
			if in.PortName == port {
				return h, in
			}
		}
	}
	t.Fatalf("no host has initiator %s", port)
	return powerstoresim.HostState{}, powerstoresim.InitiatorState{}
}

// TestChapNodeUnfence: a node whose iSCSI initiator logs in with CHAP is
// fenced and reboots; csi-powerstore's node plugin chooses a new CHAP
// secret at every start. The unfence never gives the initiator back with
// a secret of fenced's configuration: it puts it back as a placeholder
// no one can log in with, waits (saying so) until the node plugin has set
// its own secret on it, and reads the node plugin's secret back.
func TestChapNodeUnfence(t *testing.T) {
	ctx := context.Background()
	const configured = "chap-secret-from-config"

	t.Run("node plugin restarted after the unfence", func(t *testing.T) {
		e := newPSEnv(t, psChapFixture)
		node := e.node("worker-1")
		drv := e.csiDriver(t)
		plugin := psChapNode(e, node)
		iqn := plugin.Initiators[0]

		// The node plugin's start before the failure sets its CHAP.
		first, err := drv.NodeStart(ctx, plugin)
		require.NoError(t, err)
		require.Len(t, first.Secret, 24, "12 random bytes in hex (identifiers.RandomString(12))")
		h, in := psInitiatorState(t, e, iqn)
		require.Equal(t, "admin", in.ChapSingleUsername)
		require.Equal(t, powerstoresim.SecretFingerprint(first.Secret), in.ChapSingleSecret)
		hostName := h.Name

		// Configured CHAP secrets are never used.
		a := e.adapter(t, func(c *arrayclients.Config) { c.ChapSecrets = map[string]string{iqn: configured} })
		id, err := a.Resolve(ctx, node)
		require.NoError(t, err)
		plan, err := a.Plan(ctx, id, nil)
		require.NoError(t, err)
		plan = arraytest.RoundTrip(t, plan)
		require.NoError(t, a.Apply(ctx, plan))
		v, err := a.Verify(ctx, plan)
		require.NoError(t, err)
		require.True(t, v.Fenced, "remaining: %v", v.Remaining)

		// The node reboots: its node plugin chooses a new secret, finds no
		// host with its initiator and cannot register one by its node ID,
		// the name of the host fenced emptied.
		reboot, err := drv.NodeStart(ctx, plugin)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "already in use")
		require.NotEqual(t, first.Secret, reboot.Secret, "a new secret at every start")

		seq := e.srv.LastSeq()
		require.NoError(t, a.Undo(ctx, plan, arrayclients.RestoreScope{}))
		h, in = psInitiatorState(t, e, iqn)
		assert.Equal(t, hostName, h.Name, "the initiator is back on the node's host")
		assert.Equal(t, powerstore.PowerStoreChapPlaceholderUser, in.ChapSingleUsername)
		for _, secret := range []string{configured, first.Secret, reboot.Secret} {
			assert.NotEqual(t, powerstoresim.SecretFingerprint(secret), in.ChapSingleSecret, "no secret anyone holds")
		}
		assert.Len(t, arraytest.WritesSince(e.srv, seq), 1, "one PATCH adds the initiator back")

		// Until the node plugin sets its own secret, the unfence waits and
		// says for what.
		v, err = a.VerifyRestore(ctx, plan, arrayclients.RestoreScope{})
		require.NoError(t, err)
		assert.False(t, v.Restored)
		require.Len(t, v.Missing, 1)
		assert.Contains(t, v.Missing[0], iqn)
		assert.Contains(t, v.Missing[0], "waiting for the CSI node plugin to set its own CHAP secret")
		assert.Contains(t, v.Missing[0], "restart its pod on the node")
		assert.NotContains(t, v.Missing[0], configured)
		assert.Empty(t, v.Remaining, "the initiator given back is no access the node must not have")
		assert.False(t, v.Fenced, "the host has the node's initiator")
		seq = e.srv.LastSeq()
		require.NoError(t, a.Undo(ctx, plan, arrayclients.RestoreScope{}), "a retry")
		assert.Empty(t, arraytest.WritesSince(e.srv, seq), "a retry writes nothing: the placeholder stays for the node plugin")

		// The node plugin's pod restarts: it finds its host by the
		// initiator and sets its secret on it.
		restart, err := drv.NodeStart(ctx, plugin)
		require.NoError(t, err)
		h, in = psInitiatorState(t, e, iqn)
		assert.Equal(t, hostName, h.Name)
		assert.Equal(t, "admin", in.ChapSingleUsername)
		assert.Equal(t, powerstoresim.SecretFingerprint(restart.Secret), in.ChapSingleSecret, "the secret the node logs in with")
		v, err = a.VerifyRestore(ctx, plan, arrayclients.RestoreScope{})
		require.NoError(t, err)
		assert.True(t, v.Restored, "missing: %v", v.Missing)
		seq = e.srv.LastSeq()
		require.NoError(t, a.Undo(ctx, plan, arrayclients.RestoreScope{}))
		assert.Empty(t, arraytest.WritesSince(e.srv, seq), "nothing to give back")
		_, in = psInitiatorState(t, e, iqn)
		assert.Equal(t, powerstoresim.SecretFingerprint(restart.Secret), in.ChapSingleSecret, "the node plugin's secret stays")
	})

	t.Run("node plugin started after the unfence", func(t *testing.T) {
		e := newPSEnv(t, psChapFixture)
		node := e.node("worker-2")
		drv := e.csiDriver(t)
		plugin := psChapNode(e, node)
		a, plan, _ := psFenced(t, e, "worker-2")
		require.NoError(t, a.Undo(ctx, plan, arrayclients.RestoreScope{}))
		v, err := a.VerifyRestore(ctx, plan, arrayclients.RestoreScope{})
		require.NoError(t, err)
		require.False(t, v.Restored)

		// The node was still down: its node plugin's first start finds the
		// initiator on its host and sets its secret.
		start, err := drv.NodeStart(ctx, plugin)
		require.NoError(t, err)
		_, in := psInitiatorState(t, e, plugin.Initiators[0])
		assert.Equal(t, powerstoresim.SecretFingerprint(start.Secret), in.ChapSingleSecret)
		v, err = a.VerifyRestore(ctx, plan, arrayclients.RestoreScope{})
		require.NoError(t, err)
		assert.True(t, v.Restored, "missing: %v", v.Missing)
	})

	t.Run("node back with a new IP", func(t *testing.T) {
		e := newPSEnv(t, psChapFixture)
		drv := e.csiDriver(t)
		a, plan, _ := psFenced(t, e, "worker-2")
		back := withIP(e.node("worker-2"), "127.0.10.22")
		plugin := psChapNode(e, back)

		// A new node ID: the node plugin registers a new host with its
		// initiator and its new secret.
		start, err := drv.NodeStart(ctx, plugin)
		require.NoError(t, err)
		h, in := psInitiatorState(t, e, plugin.Initiators[0])
		require.Equal(t, plugin.NodeID, h.Name)
		assert.Equal(t, powerstoresim.SecretFingerprint(start.Secret), in.ChapSingleSecret)

		learned, err := a.Resolve(ctx, back)
		require.NoError(t, err)
		scope := arrayclients.RestoreScope{Learned: &learned}
		seq := e.srv.LastSeq()
		require.NoError(t, a.Undo(ctx, plan, scope))
		assert.Empty(t, arraytest.WritesSince(e.srv, seq), "the node's own registration is the restore")
		v, err := a.VerifyRestore(ctx, plan, scope)
		require.NoError(t, err)
		assert.True(t, v.Restored, "missing: %v", v.Missing)
	})
}
