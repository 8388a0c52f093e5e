package powerflex_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/arrayclients/internal/arraytest"
	"github.com/fenced-project/fenced/arrayclients/powerflex"
	"github.com/fenced-project/fenced/tests/arraysim/simcore"
)

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

	rep, err := arraytest.Sessions(t, e.adapter, plan)
	require.NoError(t, err)
	arraytest.RequireReadOnlyProbes(t, e.srv)
	require.NotNil(t, rep.IO)
	assert.Positive(t, rep.IO.Ops, rep.IO.What)
	assert.Equal(t, time.Second, rep.IO.Window)
	assert.Empty(t, rep.Sessions, "an SDC's MDM connection is no session to a volume")
	assert.False(t, rep.AskedAt.IsZero())

	// Fenced: no volume mapped, so no I/O however hard the node tries.
	require.NoError(t, e.adapter.Apply(ctx, plan))
	rep, err = arraytest.Sessions(t, e.adapter, plan)
	require.NoError(t, err)
	require.NotNil(t, rep.IO)
	assert.Zero(t, rep.IO.Ops, rep.IO.What)
	assert.Contains(t, rep.IO.What, "0 volumes mapped")

	// One volume mapped back: the node's writes show in the window.
	require.NoError(t, e.adapter.Undo(ctx, plan, arrayclients.RestoreScope{}))
	rep, err = arraytest.Sessions(t, e.adapter, plan)
	require.NoError(t, err)
	assert.Positive(t, rep.IO.Ops, rep.IO.What)

	// The window started after a moment only when it is shorter than the
	// time since then.
	w := arrayclients.IOWindow{Window: time.Second}
	at := time.Unix(1000, 0)
	assert.True(t, w.StartsAfter(at, at.Add(-2*time.Second)))
	assert.False(t, w.StartsAfter(at, at.Add(-time.Second)))

	// The node stops writing: the window empties. One request a read:
	// the statistics' own path, without reading the SDC first.
	require.NoError(t, e.sim.SetSignals("worker-1", simcore.Signals{IOActive: simcore.Bool(false)}))
	seq := e.srv.LastSeq()
	rep, err = arraytest.Sessions(t, e.adapter, plan)
	require.NoError(t, err)
	assert.Zero(t, rep.IO.Ops)
	reads := pflexReads(e, seq)
	require.Len(t, reads, 1)
	assert.Equal(t, "/api/instances/Sdc::"+id.ObjectID+"/relationships/Statistics", reads[0].Path)

	// An SDC that no longer exists sends nothing: no window, no error
	// (its read-back reports the identity gone).
	gone := plan
	gone.Identity.ObjectID = "ffffffffffffffff"
	gone.Entries = json.RawMessage(strings.Replace(string(plan.Entries), id.ObjectID, gone.Identity.ObjectID, 1))
	rep, err = e.adapter.(arrayclients.SessionReporter).Sessions(ctx, gone)
	require.NoError(t, err)
	assert.Nil(t, rep.IO)
}

// TestPowerFlexNFSClientHasNoSessions: a node known only as an NFS client
// has no SDC and so no statistics: ErrNoSessions, no failure.
func TestPowerFlexNFSClientHasNoSessions(t *testing.T) {
	e := startPowerFlex(t, pflexFixture, arrayclients.Options{}, 2*time.Second)
	plan := arrayclients.Plan{Array: "pflex-1", Family: arrayclients.PowerFlex, Entries: []byte(`{}`),
		Identity: arrayclients.Identity{Array: "pflex-1", Family: arrayclients.PowerFlex, Node: "worker-9", Kind: powerflex.PowerFlexKindNFSClient}}
	_, err := arraytest.Sessions(t, e.adapter, plan)
	require.ErrorIs(t, err, arrayclients.ErrNoSessions)
}
