package unity_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
)

// unityNamingFixture: alpha has a short-named host with the long name as
// an IP port and a long-named host too; beta's short-named host lacks
// that IP port, its long-named host exists; gamma has only a short-named
// host without the IP port; delta has no host.
const unityNamingFixture = `
arrays:
  - name: unity-1
    family: unity
    spec:
      username: admin
      password: secret
      hosts:
        - {name: alpha, iqns: ["iqn.2001-04.com.example:alpha"], ipPorts: [alpha.cluster.local, 127.0.10.1]}
        - {name: alpha.cluster.local, iqns: ["iqn.2001-04.com.example:alpha-long"], ipPorts: [alpha.cluster.local]}
        - {name: beta, iqns: ["iqn.2001-04.com.example:beta"], ipPorts: [127.0.10.2]}
        - {name: beta.cluster.local, iqns: ["iqn.2001-04.com.example:beta-long"], ipPorts: [beta.cluster.local, 127.0.10.2]}
        - {name: gamma, iqns: ["iqn.2001-04.com.example:gamma"], ipPorts: [127.0.10.3]}
`

// The host csi-unity's controller publishes to (service/controller.go
// getHostID): short first when one of its IP ports is the long name,
// else the long-named host.
func TestUnityResolveShortHostFirst(t *testing.T) {
	e := startUnity(t, unityNamingFixture, 5*time.Second)
	ctx := context.Background()

	t.Run("short host with the long name as IP port is chosen", func(t *testing.T) {
		id, err := e.adapter.Resolve(ctx, unityNode("alpha"))
		require.NoError(t, err)
		assert.Equal(t, "alpha", id.ObjectName)
		assert.Equal(t, []string{"iqn.2001-04.com.example:alpha"}, id.Keys)
	})
	t.Run("short host without the IP port is passed over for the long one", func(t *testing.T) {
		id, err := e.adapter.Resolve(ctx, unityNode("beta"))
		require.NoError(t, err)
		assert.Equal(t, "beta.cluster.local", id.ObjectName)
		assert.Equal(t, []string{"iqn.2001-04.com.example:beta-long"}, id.Keys)
	})
	t.Run("short host without the IP port and no long host is not found", func(t *testing.T) {
		_, err := e.adapter.Resolve(ctx, unityNode("gamma"))
		require.ErrorIs(t, err, arrayclients.ErrNoIdentity)
		assert.Contains(t, err.Error(), `"gamma" with an IP port "gamma.cluster.local"`)
	})
	t.Run("both absent is not found", func(t *testing.T) {
		_, err := e.adapter.Resolve(ctx, unityNode("delta"))
		require.ErrorIs(t, err, arrayclients.ErrNoIdentity)
		assert.Contains(t, err.Error(), `"delta.cluster.local"`)
	})
	t.Run("an override names the host alone", func(t *testing.T) {
		id, err := e.adapter.Resolve(ctx, arrayclients.Node{Name: "alpha", Override: "alpha.cluster.local",
			CSINodeIDs: unityNode("alpha").CSINodeIDs})
		require.NoError(t, err)
		assert.Equal(t, "alpha.cluster.local", id.ObjectName)
	})
}
