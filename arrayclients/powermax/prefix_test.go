package powermax_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/arrayclients/internal/arraytest"
	"github.com/fenced-project/fenced/arrayclients/powermax"
)

// TestPowerMaxClusterPrefixThroughRegistry builds a PowerMax adapter through
// the registry with Config.PowerMaxClusterPrefix: nodes resolve to
// csi-node-<prefix>-<node> without per-node overrides, and a bad prefix is
// refused naming it.
func TestPowerMaxClusterPrefixThroughRegistry(t *testing.T) {
	e := startPowerMax(t, pmaxFixture, 5*time.Second)
	defer func() { assert.NoError(t, e.close()) }()
	cfg := e.cfg
	cfg.PowerMaxClusterPrefix = "TST"
	reg, err := arraytest.New(arrayclients.PowerMax, powermax.New, []arrayclients.Config{cfg}, arrayclients.Options{Registry: prometheus.NewRegistry()})
	require.NoError(t, err)
	a, ok := reg.Get("pmax-1")
	require.True(t, ok)
	id, err := a.Resolve(t.Context(), pmaxNode("worker-1"))
	require.NoError(t, err)
	assert.Equal(t, "csi-node-TST-worker-1-FC", id.ObjectID)

	cfg.PowerMaxClusterPrefix = "TOOLONG"
	_, err = arraytest.New(arrayclients.PowerMax, powermax.New, []arrayclients.Config{cfg}, arrayclients.Options{})
	require.ErrorContains(t, err, `cluster prefix "TOOLONG"`)
}
