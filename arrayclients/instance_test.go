package arrayclients_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/fenced-project/fenced/arrayclients"
)

// An array is resolved with the node ID of its own driver instance: the
// first of the instance's names the node reported, filed under the
// family's default name, and none when the node reported none of them.
func TestForInstance(t *testing.T) {
	const second = "csi-powerstore-2.dellemc.com"
	n := arrayclients.Node{Name: "n1", CSINodeIDs: map[string]string{
		arrayclients.DriverPowerStore: "csi-node-m1-10.0.0.1",
		second:                        "second-m1-10.0.0.1",
		arrayclients.DriverUnity:      "n1,n1.example.com",
	}}
	got := n.ForInstance(arrayclients.PowerStore, []string{second})
	assert.Equal(t, "second-m1-10.0.0.1", got.CSINodeIDs[arrayclients.DriverPowerStore])
	assert.Equal(t, "n1,n1.example.com", got.CSINodeIDs[arrayclients.DriverUnity], "other families are kept")
	assert.Equal(t, "csi-node-m1-10.0.0.1", n.CSINodeIDs[arrayclients.DriverPowerStore], "the node itself is not changed")

	got = n.ForInstance(arrayclients.PowerStore, []string{arrayclients.DriverPowerStore, second})
	assert.Equal(t, "csi-node-m1-10.0.0.1", got.CSINodeIDs[arrayclients.DriverPowerStore], "the first name the node has wins")

	only := arrayclients.Node{Name: "n2", CSINodeIDs: map[string]string{arrayclients.DriverPowerStore: "csi-node-m2-10.0.0.2"}}
	got = only.ForInstance(arrayclients.PowerStore, []string{second})
	assert.NotContains(t, got.CSINodeIDs, arrayclients.DriverPowerStore, "another instance's node ID is never used")
	assert.Nil(t, got.CSINodeIDs)

	assert.Equal(t, []string{arrayclients.DriverPowerStore, "a-renamed", "b-renamed"},
		arrayclients.UnnamedInstance(arrayclients.PowerStore, map[string]arrayclients.Family{
			"b-renamed": arrayclients.PowerStore, "a-renamed": arrayclients.PowerStore, "u": arrayclients.Unity,
			arrayclients.DriverPowerStore: arrayclients.PowerStore}))
}
