package powerscale_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/arrayclients/internal/arraytest"
	"github.com/fenced-project/fenced/arrayclients/powerscale"
)

func TestPowerScaleLabelIPs(t *testing.T) {
	// Label keys as csi-isilon's node plugin writes them (dell/csi-powerscale
	// service/node.go ReconcileNodeAzLabels): az-<network>-<prefix length>-<IP>.
	got := powerscale.PowerScaleLabelIPs(map[string]string{
		"csi-isilon.dellemc.com/az-192.168.1.0-24-192.168.1.7": "true",
		"csi-isilon.dellemc.com/az-10.0.0.0-8-10.0.0.7":        "true",
		"csi-isilon.dellemc.com/az-10.0.0.0-16-10.0.0.7":       "true",
		"csi-isilon.dellemc.com/az-10.0.0.0-24-10.0.0.999":     "true",
		"csi-isilon.dellemc.com/az-10.0.0.0-24":                "true",
		"csi-isilon.dellemc.com/zone-10.0.0.0-24-10.0.0.8":     "true",
		"csi-powerscale.example.com/az-10.0.0.0-24-10.0.0.9":   "true",
		"kubernetes.io/hostname":                               "w1",
	})
	assert.Equal(t, []string{"10.0.0.7", "192.168.1.7"}, got)
	assert.Empty(t, powerscale.PowerScaleLabelIPs(nil))
}

// scAZFixture: worker-1 has the CSINode IP 127.0.10.1 and an AzNetwork
// interface 127.0.20.1 (node label csi-isilon.dellemc.com/az-127.0.20.0-
// 24-127.0.20.1); csi-isilon published k8s-az to that IP only
// (service/controller.go ControllerPublishVolume with the volume context's
// AzNetwork: AddExportClientByIPWithZone with the label IPs). k8s-w2 is
// worker-2's.
const scAZFixture = `
nodes:
  - {name: worker-1, ip: 127.0.10.1, fqdn: worker-1.cluster.local}
  - {name: worker-2, ip: 127.0.10.2, fqdn: worker-2.cluster.local}
arrays:
  - name: pscale-1
    family: powerscale
    spec:
      exports:
        - {paths: [/ifs/data/csi/k8s-az], clients: [localhost, 127.0.20.1]}
        - {paths: [/ifs/data/csi/k8s-w2], clients: [localhost, 127.0.20.2]}
`

func TestPowerScaleAZNetworkLabelIPs(t *testing.T) {
	e := newSCEnv(t, scAZFixture, nil)
	a := e.adapter(t, nil)
	ctx := context.Background()
	ids := scExportIDs(t, e.sim)
	vols := []arrayclients.VolumeRef{scVol("pv-az", ids["k8s-az"])}

	// Without the label IPs the export's entry is not the node's: a gap
	// naming what the export lists, never a silent cut.
	id, err := a.Resolve(ctx, e.node("worker-1"))
	require.NoError(t, err)
	p, err := a.Plan(ctx, id, vols)
	require.NoError(t, err)
	require.Len(t, p.Volumes, 1)
	require.NotNil(t, p.Volumes[0].Gap)
	assert.Equal(t, arrayclients.GapOtherIdentity, p.Volumes[0].Gap.Reason)

	n := e.node("worker-1")
	n.LabelIPs = []string{"127.0.20.1"}
	id, err = a.Resolve(ctx, n)
	require.NoError(t, err)
	assert.Contains(t, id.Keys, "127.0.20.1")
	assert.Contains(t, id.Keys, "127.0.10.1")
	p, err = a.Plan(ctx, id, vols)
	require.NoError(t, err)
	require.Len(t, p.Volumes, 1)
	assert.Nil(t, p.Volumes[0].Gap)
	assert.Equal(t, arrayclients.CutExportClients, p.Volumes[0].Cut)

	d := newSCDriver(t, e)
	require.NoError(t, a.Apply(ctx, p))
	v, err := a.Verify(ctx, p)
	require.NoError(t, err)
	assert.True(t, v.Fenced, "%+v", v)
	assert.False(t, arraytest.CheckOf(t, v, "pv-az").NodeAccess)
	assert.Empty(t, d.clients(ids["k8s-az"]), "the label IP's entry is cut")
	assert.Equal(t, []string{"127.0.20.2"}, d.clients(ids["k8s-w2"]), "another node's export is untouched")

	require.NoError(t, a.Undo(ctx, p, arrayclients.RestoreScope{Wanted: []string{"pv-az"}}))
	r, err := a.VerifyRestore(ctx, p, arrayclients.RestoreScope{Wanted: []string{"pv-az"}})
	require.NoError(t, err)
	assert.True(t, r.Restored, "%+v", r)
	assert.Equal(t, []string{"127.0.20.1"}, d.clients(ids["k8s-az"]))

	_, err = a.Resolve(ctx, arrayclients.Node{Name: "worker-1", CSINodeIDs: n.CSINodeIDs, LabelIPs: []string{"not-an-ip"}})
	require.ErrorContains(t, err, "not-an-ip")
}

// An override listing two IPs of the node (its CSINode IP and an
// AzNetwork interface) cuts the entries of both.
func TestPowerScaleOverrideWithTwoIPs(t *testing.T) {
	e := newSCEnv(t, scFootprintFixture+`        - {paths: [/ifs/data/csi/k8s-az], clients: [localhost, 127.0.20.1]}
`, nil)
	a := e.adapter(t, nil)
	ctx := context.Background()
	ids := scExportIDs(t, e.sim)
	id, err := a.Resolve(ctx, arrayclients.Node{Name: "worker-1", Override: "127.0.10.1,127.0.20.1"})
	require.NoError(t, err)
	p, err := a.Plan(ctx, id, []arrayclients.VolumeRef{scVol("pv-a", ids["k8s-a"]), scVol("pv-az", ids["k8s-az"])})
	require.NoError(t, err)
	require.Len(t, p.Volumes, 2)
	for _, vc := range p.Volumes {
		assert.Nil(t, vc.Gap, vc.Volume)
		assert.Equal(t, arrayclients.CutExportClients, vc.Cut, vc.Volume)
	}
	require.NoError(t, a.Apply(ctx, p))
	v, err := a.Verify(ctx, p)
	require.NoError(t, err)
	assert.True(t, v.Fenced, "%+v", v)
	d := newSCDriver(t, e)
	assert.Empty(t, d.clients(ids["k8s-az"]))
	assert.Empty(t, d.clients(ids["k8s-a"]))
	assert.Equal(t, []string{"127.0.10.2"}, d.clients(ids["k8s-other"]), "another node's export is untouched")
}
