package powerflex_test

import (
	"context"
	"testing"
	"time"

	siotypes "github.com/dell/goscaleio/types/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/arrayclients/internal/arraytest"
)

// TestPowerFlexNFSEveryExport: a PowerFlex file system with two exports
// (csi-vxflexos publishes on the last one it lists, and nothing says an
// array holds only one) is read whole: the plan finds the node on either,
// the cut removes it from both, and a read-back that finds it on any says
// not fenced.
func TestPowerFlexNFSEveryExport(t *testing.T) {
	ctx := context.Background()
	e := startPowerFlex(t, pflexNFSFixture, arrayclients.Options{}, 5*time.Second)
	id, err := e.adapter.Resolve(ctx, pflexNFSW3)
	require.NoError(t, err)
	fsA := pflexFS(t, e, "fs-a")
	// A second export of fs-a lists worker-3 and worker-2.
	d := e.driver(t)
	c := d.c.WithContext(ctx)
	second, err := c.CreateNFSExport(&siotypes.NFSExportCreate{Name: "fs-a-second", FileSystemID: fsA, Path: "/fs-a",
		ReadWriteHosts: []string{"127.0.10.3", "127.0.10.2"}})
	require.NoError(t, err)
	require.Len(t, e.sim.ExportsOf(fsA), 2)

	plan, err := e.adapter.Plan(ctx, id, []arrayclients.VolumeRef{nfsRef("pv-a", fsA, false)})
	require.NoError(t, err)
	plan = arraytest.RoundTrip(t, plan)
	require.Len(t, plan.Volumes, 1)
	assert.Nil(t, plan.Volumes[0].Gap)
	assert.Equal(t, arrayclients.CutNFSExportHosts, plan.Volumes[0].Cut)
	assert.Contains(t, plan.Volumes[0].Holders, "127.0.10.2/255.255.255.255", "the other export's hosts are holders")

	// A read-back before the cut sees the node on both exports.
	v, err := e.adapter.Verify(ctx, plan)
	require.NoError(t, err)
	assert.False(t, v.Fenced)

	require.NoError(t, e.adapter.Apply(ctx, plan))
	for _, x := range e.sim.ExportsOf(fsA) {
		for _, l := range [][]string{x.ReadOnlyHosts, x.ReadOnlyRootHosts, x.ReadWriteHosts, x.ReadWriteRootHosts} {
			for _, h := range l {
				assert.NotContains(t, h, "127.0.10.3", "export %s still lists the node", x.Name)
			}
		}
	}
	v, err = e.adapter.Verify(ctx, plan)
	require.NoError(t, err)
	assert.True(t, v.Fenced, "remaining: %v", v.Remaining)

	// The node back on the second export only: the read-back finds it.
	require.NoError(t, c.ModifyNFSExport(&siotypes.NFSExportModify{AddReadWriteHosts: []string{"127.0.10.3"}}, second.ID))
	v, err = e.adapter.Verify(ctx, plan)
	require.NoError(t, err)
	assert.False(t, v.Fenced)
	assert.NotEmpty(t, v.Remaining)

	// The cut, repeated, takes it from there too.
	require.NoError(t, e.adapter.Apply(ctx, plan))
	v, err = e.adapter.Verify(ctx, plan)
	require.NoError(t, err)
	assert.True(t, v.Fenced, "remaining: %v", v.Remaining)
}
