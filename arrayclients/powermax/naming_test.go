package powermax_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/arrayclients/internal/arraytest"
	"github.com/fenced-project/fenced/arrayclients/powermax"
)

func TestParsePowerMaxNodeNameTemplate(t *testing.T) {
	for _, tc := range []struct {
		template, prefix, suffix, err string
	}{
		{template: "k8s-%node%-host", prefix: "k8s-", suffix: "-host"},
		{template: "%node%", prefix: "", suffix: ""},
		{template: "%x%_fc", prefix: "", suffix: "_fc"},
		// Parts after a third "%" are ignored by csi-powermax too.
		{template: "a-%node%-b%c", prefix: "a-", suffix: "-b"},
		{template: "k8s-%node", err: "no %...% placeholder"},
		{template: "k8s-node", err: "no %...% placeholder"},
		{template: "-k8s-%node%", err: "starting with a letter or digit"},
		{template: "k8s.%node%", err: "must be letters, digits"},
		{template: "k8s-%node%/x", err: "must be letters, digits"},
	} {
		t.Run(tc.template, func(t *testing.T) {
			p, s, err := powermax.ParsePowerMaxNodeNameTemplate(tc.template)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.prefix, p)
			assert.Equal(t, tc.suffix, s)
		})
	}
}

// pmaxNamingFixture: hosts csi-powermax named with X_CSI_IG_NODENAME_TEMPLATE
// "k8s-%node%-host" (an iSCSI one and an FC one with the -FC suffix after
// the template's name; service/controller.go GetFCHostSGAndMVIDFromNodeID),
// a host of a node whose template name the driver refused (so it has the
// default name), and the shared host of vSphere mode with its
// csi-mv-<prefix>-VSPHERE view (GetVSphereFCHostSGAndMVIDFromNodeID).
const pmaxNamingFixture = `
nodes:
  - {name: worker-1, ip: 127.0.10.1}
arrays:
  - name: pmax-1
    family: powermax
    spec:
      symmetrixID: "000197900046"
      username: smc
      password: secret
      hosts:
        - {id: k8s-worker-1-host, initiators: [{id: "iqn.1994-05.com.redhat:worker-1", paths: ["SE-1E:000"]}],
           maskingView: csi-mv-TST-worker-1, storageGroup: csi-no-srp-sg-TST-worker-1, portGroup: csi-TST-iscsi-PG, volumes: ["00101"]}
        - {id: k8s-worker-2-host-FC, type: Fibre, initiators: [{id: "10000000c9a0b002", paths: ["FA-1D:4"]}],
           maskingView: csi-mv-TST-worker-2-FC, storageGroup: csi-no-srp-sg-TST-worker-2-FC, portGroup: csi-TST-fc-PG, volumes: ["00102"]}
        - {id: csi-node-TST-_odd, initiators: [{id: "iqn.1994-05.com.redhat:odd", paths: ["SE-1E:000"]}],
           maskingView: csi-mv-TST-_odd, storageGroup: csi-no-srp-sg-TST-_odd, portGroup: csi-TST-iscsi-PG, volumes: ["00103"]}
        - {id: esx-cluster-1, type: Fibre, initiators: [{id: "10000000c9a0b0e1", paths: ["FA-2D:4"]}],
           maskingView: csi-mv-TST-VSPHERE, storageGroup: csi-no-srp-sg-TST-VSPHERE, portGroup: csi-TST-vsphere-PG, volumes: ["00106", "00107"]}
`

func pmaxAdapterWith(t *testing.T, e pmaxEnv, mutate func(*arrayclients.Config)) *powermax.PowerMaxAdapter {
	t.Helper()
	cfg := e.cfg
	cfg.PowerMaxClusterPrefix = "TST"
	mutate(&cfg)
	a, err := powermax.NewPowerMax(context.Background(), cfg, nil)
	require.NoError(t, err)
	return a
}

func pmaxVol(pv, dev string) arrayclients.VolumeRef {
	return arrayclients.VolumeRef{Volume: pv, Object: dev, Protocol: arrayclients.ProtocolBlock, Attached: true}
}

func TestPowerMaxNodeNameTemplate(t *testing.T) {
	e := startPowerMax(t, pmaxNamingFixture, 5*time.Second)
	ctx := t.Context()
	a := pmaxAdapterWith(t, e, func(c *arrayclients.Config) { c.PowerMaxNodeNameTemplate = "k8s-%node%-host" })

	id, err := a.Resolve(ctx, pmaxNode("worker-2"))
	require.NoError(t, err)
	assert.Equal(t, "k8s-worker-2-host-FC", id.ObjectID, "the protocol suffix follows the template's name")
	// A template name the driver's check refuses ("_odd-host" starts with
	// '_') makes it fall back to csi-node-<prefix>-<nodeID>. (Real node IDs
	// are DNS names cut at the first dot and always pass; the fallback is
	// the driver's, so fenced follows it.)
	odd := pmaxAdapterWith(t, e, func(c *arrayclients.Config) { c.PowerMaxNodeNameTemplate = "%node%-host" })
	id, err = odd.Resolve(ctx, pmaxNode("_odd"))
	require.NoError(t, err)
	assert.Equal(t, "csi-node-TST-_odd", id.ObjectID)
	// Without the cluster prefix the template still names the hosts.
	noPrefix, err := powermax.NewPowerMax(ctx, func() arrayclients.Config {
		c := e.cfg
		c.PowerMaxNodeNameTemplate = "k8s-%node%-host"
		return c
	}(), nil)
	require.NoError(t, err)
	id, err = noPrefix.Resolve(ctx, pmaxNode("worker-1"))
	require.NoError(t, err)
	assert.Equal(t, "k8s-worker-1-host", id.ObjectID)
	// Without the template the host is not found: a named miss.
	plain := pmaxAdapterWith(t, e, func(*arrayclients.Config) {})
	_, err = plain.Resolve(ctx, pmaxNode("worker-1"))
	require.ErrorIs(t, err, arrayclients.ErrNoIdentity)
	require.ErrorContains(t, err, "csi-node-TST-worker-1")
	assert.Empty(t, e.srv.AuditWrites(), "resolve never writes")

	// The template's host is fenced and read back like any other.
	id, err = a.Resolve(ctx, pmaxNode("worker-1"))
	require.NoError(t, err)
	assert.Equal(t, "k8s-worker-1-host", id.ObjectID)
	p, err := a.Plan(ctx, id, []arrayclients.VolumeRef{pmaxVol("pv-1", "00101")})
	require.NoError(t, err)
	require.Len(t, p.Volumes, 1)
	assert.Equal(t, arrayclients.CutHostInitiators, p.Volumes[0].Cut)
	require.NoError(t, a.Apply(ctx, p))
	v, err := a.Verify(ctx, p)
	require.NoError(t, err)
	assert.True(t, v.Fenced, "%+v", v)
	assert.False(t, arraytest.CheckOf(t, v, "pv-1").NodeAccess)
	require.NoError(t, a.Undo(ctx, p, arrayclients.RestoreScope{Wanted: []string{"pv-1"}}))
	v, err = a.VerifyRestore(ctx, p, arrayclients.RestoreScope{Wanted: []string{"pv-1"}})
	require.NoError(t, err)
	assert.True(t, v.Restored, "%+v", v)
}

func TestPowerMaxNamingConfigErrors(t *testing.T) {
	e := startPowerMax(t, pmaxNamingFixture, 5*time.Second)
	cfg := e.cfg
	cfg.PowerMaxNodeNameTemplate = "k8s-%node"
	_, err := arraytest.New(arrayclients.PowerMax, powermax.New, []arrayclients.Config{cfg}, arrayclients.Options{})
	require.ErrorContains(t, err, `node name template "k8s-%node"`)
	cfg = e.cfg
	cfg.PowerMaxVSphereHost = "esx cluster"
	_, err = arraytest.New(arrayclients.PowerMax, powermax.New, []arrayclients.Config{cfg}, arrayclients.Options{})
	require.ErrorContains(t, err, `vSphere host "esx cluster"`)
}

func TestPowerMaxVSphereSharedHost(t *testing.T) {
	e := startPowerMax(t, pmaxNamingFixture, 5*time.Second)
	ctx := t.Context()
	before, _ := pmaxState(t, e.sim)
	a := pmaxAdapterWith(t, e, func(c *arrayclients.Config) { c.PowerMaxVSphereHost = "esx-cluster-1" })

	// Every node resolves to the shared host, whatever its node ID.
	for _, n := range []string{"worker-1", "worker-6"} {
		id, err := a.Resolve(ctx, pmaxNode(n))
		require.NoError(t, err)
		assert.Equal(t, powermax.PowerMaxKindSharedHost, id.Kind)
		assert.Equal(t, "esx-cluster-1", id.ObjectID)
		assert.Equal(t, n, id.Node)
	}
	// An override naming another host is the operator's word.
	id, err := a.Resolve(ctx, arrayclients.Node{Name: "worker-1", Override: "k8s-worker-1-host"})
	require.NoError(t, err)
	assert.Empty(t, id.Kind)
	assert.Equal(t, "k8s-worker-1-host", id.ObjectID)

	id, err = a.Resolve(ctx, pmaxNode("worker-6"))
	require.NoError(t, err)
	vols := []arrayclients.VolumeRef{pmaxVol("pv-6", "00106"), pmaxVol("pv-7", "00107")}
	cut, gap := a.Cover(id, vols[0])
	assert.Empty(t, cut)
	require.NotNil(t, gap)
	assert.Equal(t, arrayclients.GapNotFenceable, gap.Reason)
	assert.Contains(t, gap.Detail, "pv-6")
	assert.Contains(t, gap.Detail, "shared host serving every node cannot be fenced per node")

	p, err := a.Plan(ctx, id, vols)
	require.NoError(t, err)
	require.Len(t, p.Volumes, 2)
	for _, vc := range p.Volumes {
		assert.Empty(t, vc.Cut)
		require.NotNil(t, vc.Gap, vc.Volume)
		assert.Equal(t, arrayclients.GapNotFenceable, vc.Gap.Reason)
	}
	assert.Contains(t, p.Summary, "shared by every node")

	// A fence of the node (its other arrays may be fenceable) never
	// touches the shared host.
	require.NoError(t, a.Apply(ctx, p))
	v, err := a.Verify(ctx, p)
	require.NoError(t, err)
	assert.Empty(t, v.Volumes, "no volume is shown cut")
	require.NoError(t, a.Undo(ctx, p, arrayclients.RestoreScope{}))
	h, err := a.Health(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, arrayclients.ConnectivityUnknown, h.Connectivity)
	assert.Equal(t, arrayclients.IOUnknown, h.IO)
	assert.Empty(t, e.srv.AuditWrites(), "the shared host is never written")
	after, _ := pmaxState(t, e.sim)
	assert.Equal(t, before, after)

	// The configured shared host (or host group) is not on the array.
	missing := pmaxAdapterWith(t, e, func(c *arrayclients.Config) { c.PowerMaxVSphereHost = "esx-cluster-9" })
	_, err = missing.Resolve(ctx, pmaxNode("worker-6"))
	require.ErrorIs(t, err, arrayclients.ErrNoIdentity)
	require.ErrorContains(t, err, "esx-cluster-9")

	// Without the vSphere setting, a host in csi-powermax's VSPHERE
	// masking view is still recognised as the shared host.
	plain := pmaxAdapterWith(t, e, func(*arrayclients.Config) {})
	id, err = plain.Resolve(ctx, arrayclients.Node{Name: "worker-6", Override: "esx-cluster-1"})
	require.NoError(t, err)
	assert.Equal(t, powermax.PowerMaxKindSharedHost, id.Kind)
	_, gap = plain.Cover(id, vols[0])
	require.NotNil(t, gap)
	assert.Equal(t, arrayclients.GapNotFenceable, gap.Reason)
}
