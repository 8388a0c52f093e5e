package powermax_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/arrayclients/internal/arraytest"
	"github.com/fenced-project/fenced/tests/arraysim/simcore"
)

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

	rep, err := arraytest.Sessions(t, e.adapter, plan)
	require.NoError(t, err)
	arraytest.RequireReadOnlyProbes(t, e.srv)
	require.NotEmpty(t, rep.Sessions)
	for _, s := range rep.Sessions {
		assert.Contains(t, s.What, "logged in and on the fabric, in host "+id.ObjectID)
	}
	up := len(rep.Sessions)

	// Fenced while alive (its storage paths up): logged in, in no host.
	require.NoError(t, e.adapter.Apply(ctx, plan))
	rep, err = arraytest.Sessions(t, e.adapter, plan)
	require.NoError(t, err)
	assert.Empty(t, rep.Sessions)

	// Its initiators back in its host: every path is a session again.
	require.NoError(t, e.adapter.Undo(ctx, plan, arrayclients.RestoreScope{}))
	rep, err = arraytest.Sessions(t, e.adapter, plan)
	require.NoError(t, err)
	assert.Len(t, rep.Sessions, up)

	// The node dies: no path is logged in.
	require.NoError(t, e.sim.SetSignals(id.ObjectID, simcore.Signals{Connected: simcore.Bool(false)}))
	rep, err = arraytest.Sessions(t, e.adapter, plan)
	require.NoError(t, err)
	assert.Empty(t, rep.Sessions)
}
