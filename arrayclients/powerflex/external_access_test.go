package powerflex_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/arrayclients/internal/arraytest"
	"github.com/fenced-project/fenced/arrayclients/powerflex"
)

// TestPowerFlexNFSExternalAccessGap: the same on PowerFlex (csi-vxflexos
// ExternalAccess).
func TestPowerFlexNFSExternalAccessGap(t *testing.T) {
	ctx := context.Background()
	e := startPowerFlex(t, pflexNFSFixture, arrayclients.Options{}, 5*time.Second)
	cfg := e.cfg
	cfg.ExternalAccess = []string{"127.0.10.2"}
	reg, err := arraytest.New(arrayclients.PowerFlex, powerflex.NewPowerFlex, []arrayclients.Config{cfg}, arrayclients.Options{Registry: prometheus.NewRegistry()})
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
