package arrayclients_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/arrayclients/all"
	"github.com/fenced-project/fenced/arrayclients/internal/arraytest"
)

func TestParseExternalAccess(t *testing.T) {
	nets, err := arrayclients.ParseExternalAccess([]string{"10.20.0.0/16", "192.0.2.7", "2001:db8::/32"})
	require.NoError(t, err)
	assert.Len(t, nets, 3)
	_, err = arrayclients.ParseExternalAccess([]string{"10.20.0.0/16", "nat-gw.example.com"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `externalAccess[1]: "nat-gw.example.com"`)
	_, err = arrayclients.ParseExternalAccess([]string{"10.0.0.0/33"})
	require.Error(t, err)
}

// TestExternalAccessConfigChecked: the entries are refused on a family
// whose driver adds none, and when they do not parse, naming the array.
func TestExternalAccessConfigChecked(t *testing.T) {
	for _, tc := range []struct {
		family arrayclients.Family
		list   []string
		want   string
	}{
		{arrayclients.Unity, []string{"10.0.0.1"}, "arrays[a1].externalAccess: only PowerStore and PowerFlex"},
		{arrayclients.PowerStore, []string{"ten"}, `arrays[a1].externalAccess[0]: "ten"`},
	} {
		_, err := all.New([]arrayclients.Config{{Name: "a1", Family: tc.family, Endpoint: "https://192.0.2.1",
			Username: "u", Password: "p", ExternalAccess: tc.list}}, arrayclients.Options{Registry: prometheus.NewRegistry()})
		require.Error(t, err)
		assert.Contains(t, err.Error(), tc.want)
	}
}

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

// TestPowerFlexNFSExternalAccessGap: the same on PowerFlex (csi-vxflexos
// ExternalAccess).
func TestPowerFlexNFSExternalAccessGap(t *testing.T) {
	ctx := context.Background()
	e := startPowerFlex(t, pflexNFSFixture, arrayclients.Options{}, 5*time.Second)
	cfg := e.cfg
	cfg.ExternalAccess = []string{"127.0.10.2"}
	reg, err := all.New([]arrayclients.Config{cfg}, arrayclients.Options{Registry: prometheus.NewRegistry()})
	require.NoError(t, err)
	a, ok := reg.Get(cfg.Name)
	require.True(t, ok)
	id, err := a.Resolve(ctx, pflexNFSW3)
	require.NoError(t, err)
	// fs-b lists worker-3 and 127.0.10.2; fs-a only worker-3.
	plan, err := a.Plan(ctx, id, []arrayclients.VolumeRef{nfsRef("pv-b", pflexFS(t, e, "fs-b"), true), nfsRef("pv-a", pflexFS(t, e, "fs-a"), false)})
	require.NoError(t, err)
	b := arraytest.CutOf(t, plan, "pv-b")
	require.NotNil(t, b.Gap)
	assert.Equal(t, arrayclients.GapExternalAccess, b.Gap.Reason)
	assert.Contains(t, b.Gap.Detail, "127.0.10.2/255.255.255.255")
	assert.Equal(t, arrayclients.CutNFSExportHosts, arraytest.CutOf(t, plan, "pv-a").Cut)
}
