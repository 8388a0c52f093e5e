package powerstore_test

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/arrayclients/internal/arraytest"
	"github.com/fenced-project/fenced/arrayclients/powerstore"
)

// A family without a listing of every node's connection state answers
// ErrNoSweep without a request: the detector then asks Health per node.
func TestSweepOfAFamilyWithoutAListing(t *testing.T) {
	e := newPSEnv(t, psFixture)
	reg, err := arraytest.New(arrayclients.PowerStore, powerstore.NewPowerStore, []arrayclients.Config{e.cfg}, arrayclients.Options{Registry: prometheus.NewRegistry()})
	require.NoError(t, err)
	a, ok := reg.Get(e.cfg.Name)
	require.True(t, ok)
	sw, ok := a.(arrayclients.Sweeper)
	require.True(t, ok, "every adapter answers Sweep")
	seq := e.srv.LastSeq()
	_, err = sw.Sweep(context.Background(), []arrayclients.Identity{{Array: "pstore-1", Family: arrayclients.PowerStore, Node: "worker-1"}}, true)
	require.ErrorIs(t, err, arrayclients.ErrNoSweep)
	assert.Empty(t, e.srv.AuditSince(seq))
}
