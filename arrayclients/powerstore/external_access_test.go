package powerstore_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/arrayclients/internal/arraytest"
)

// TestPowerStoreNFSExternalAccessGap: an export of a footprint volume
// that lists a configured external-access entry (csi-powerstore's
// X_CSI_POWERSTORE_EXTERNAL_ACCESS, added beside the node's IP on every
// publish) is an external-access gap, not a cut that would leave the node
// mounting through the NAT; exports without one keep their cut.
func TestPowerStoreNFSExternalAccessGap(t *testing.T) {
	e := newPSEnv(t, psNFSFixture)
	ctx := context.Background()
	// fs-shared lists 127.0.10.5, 127.0.10.2 and 127.0.10.3; 127.0.10.2 is
	// the NAT address here, configured as a subnet.
	a := e.adapter(t, func(c *arrayclients.Config) { c.ExternalAccess = []string{"127.0.10.2/31"} })
	id, err := a.Resolve(ctx, e.node("worker-5"))
	require.NoError(t, err)
	plan, err := a.Plan(ctx, id, []arrayclients.VolumeRef{
		psNFSRef(e, t, "pv-shared", "fs-shared", true), psNFSRef(e, t, "pv-only5", "fs-only5", true)})
	require.NoError(t, err)
	shared := arraytest.CutOf(t, plan, "pv-shared")
	require.NotNil(t, shared.Gap)
	assert.Equal(t, arrayclients.GapExternalAccess, shared.Gap.Reason)
	assert.Contains(t, shared.Gap.Detail, "127.0.10.2/255.255.255.255")
	assert.Contains(t, shared.Gap.Detail, "X_CSI_POWERSTORE_EXTERNAL_ACCESS")
	assert.Equal(t, arrayclients.CutNFSExportHosts, arraytest.CutOf(t, plan, "pv-only5").Cut)

	// Without the configuration the same export has a cut.
	plain := e.adapter(t, nil)
	plan, err = plain.Plan(ctx, id, []arrayclients.VolumeRef{psNFSRef(e, t, "pv-shared", "fs-shared", true)})
	require.NoError(t, err)
	assert.Equal(t, arrayclients.CutNFSExportHosts, arraytest.CutOf(t, plan, "pv-shared").Cut)
}
