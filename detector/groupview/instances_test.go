package groupview

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/cluster/ledger"
	"github.com/fenced-project/fenced/configs"
)

// hostArray is a PowerStore whose hosts are named by the node IDs in
// hosts, as the csi-powerstore instance that lists it registered them.
type hostArray struct {
	arrayclients.Adapter // only Name, Family and Resolve are called
	name                 string
	hosts                map[string]bool
}

func (a *hostArray) Name() string                { return a.name }
func (a *hostArray) Family() arrayclients.Family { return arrayclients.PowerStore }
func (a *hostArray) Resolve(_ context.Context, n arrayclients.Node) (arrayclients.Identity, error) {
	id := n.CSINodeIDs[arrayclients.DriverPowerStore]
	if !a.hosts[id] {
		return arrayclients.Identity{}, fmt.Errorf("%s: no host %q: %w", a.name, id, arrayclients.ErrNoIdentity)
	}
	return arrayclients.Identity{Array: a.name, Family: arrayclients.PowerStore, Node: n.Name, ObjectID: "h-" + id,
		ObjectName: id, ResolvedAt: time.Now().UTC()}, nil
}

// Two csi-powerstore instances, each with its own driver name and node
// name prefix, register the node on their own arrays under their own node
// IDs. The node is resolved on each array with the node ID of the array's
// instance, so it has an identity on both and none is missing.
func TestLearnResolvesEachArrayWithItsDriverInstance(t *testing.T) {
	const second = "csi-powerstore-2.dellemc.com"
	node := &fsmLeader{leaderA: leaderA{ledger.New()}}
	a := &hostArray{name: "ps-a", hosts: map[string]bool{"csi-node-m1-10.0.0.1": true}}
	b := &hostArray{name: "ps-b", hosts: map[string]bool{"second-m1-10.0.0.1": true}}
	cfg := configs.Cluster{Name: "c1", Drivers: map[string]arrayclients.Family{second: arrayclients.PowerStore}}
	instances := map[string][]string{"ps-a": {arrayclients.DriverPowerStore}, "ps-b": {second}}
	v := NewView(cfg, instances, node, []arrayclients.Adapter{a, b}, func(string) string { return "boot-1" }, "test",
		slog.New(slog.DiscardHandler))
	l, _ := node.Leadership()
	l.Ctx = t.Context()
	in := arrayclients.Node{Cluster: "c1", Name: "n1", Addresses: []string{"10.0.0.1"}, CSINodeIDs: map[string]string{
		arrayclients.DriverPowerStore: "csi-node-m1-10.0.0.1", second: "second-m1-10.0.0.1"}}
	require.NoError(t, v.learn(t.Context(), l, in))
	node.fsm.Read(func(s *ledger.State) {
		n := s.Node("c1", "n1")
		require.NotNil(t, n)
		assert.Empty(t, n.NotFound, "no array is without the node's identity")
		require.Len(t, n.Identities, 2)
		assert.Equal(t, "csi-node-m1-10.0.0.1", n.Identities["ps-a"].ObjectName)
		assert.Equal(t, "second-m1-10.0.0.1", n.Identities["ps-b"].ObjectName)
	})

	// A node without the second instance (its node plugin not running
	// there) has no identity on ps-b: the first instance's node ID is never
	// used for the second instance's array.
	in2 := arrayclients.Node{Cluster: "c1", Name: "n2", Addresses: []string{"10.0.0.2"}, CSINodeIDs: map[string]string{
		arrayclients.DriverPowerStore: "csi-node-m2-10.0.0.2"}}
	a.hosts["csi-node-m2-10.0.0.2"], b.hosts["csi-node-m2-10.0.0.2"] = true, true
	require.NoError(t, v.learn(t.Context(), l, in2))
	node.fsm.Read(func(s *ledger.State) {
		n := s.Node("c1", "n2")
		require.NotNil(t, n)
		assert.Contains(t, n.Identities, "ps-a")
		assert.NotContains(t, n.Identities, "ps-b")
		assert.Contains(t, n.NotFound["ps-b"], "(node ID of CSI driver "+second+")", "the gap names the instance looked for")
	})

	// Without instances (a configuration before driverName), an array is
	// resolved with the family's default driver, else the one renamed
	// driver: both arrays get the default instance's node ID, and the
	// second instance's array does not find the node.
	node2 := &fsmLeader{leaderA: leaderA{ledger.New()}}
	old := NewView(cfg, nil, node2, []arrayclients.Adapter{a, b}, func(string) string { return "boot-1" }, "test",
		slog.New(slog.DiscardHandler))
	l2, _ := node2.Leadership()
	require.NoError(t, old.learn(t.Context(), l2, in))
	node2.fsm.Read(func(s *ledger.State) { assert.Contains(t, s.Node("c1", "n1").NotFound, "ps-b") })
}
