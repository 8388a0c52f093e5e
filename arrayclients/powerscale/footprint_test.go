package powerscale_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/dell/goisilon"
	isiapi "github.com/dell/goisilon/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/arrayclients/internal/arraytest"
	"github.com/fenced-project/fenced/tests/arraysim/powerscale"
	"github.com/fenced-project/fenced/tests/arraysim/simcore"
)

// scFootprintFixture: csi-isilon style exports (localhost kept in the
// clients list) of worker-1, of worker-2, of both, and of nobody.
const scFootprintFixture = `
nodes:
  - {name: worker-1, ip: 127.0.10.1, fqdn: worker-1.cluster.local}
  - {name: worker-2, ip: 127.0.10.2, fqdn: worker-2.cluster.local}
arrays:
  - name: pscale-1
    family: powerscale
    spec:
      exports:
        - {paths: [/ifs/data/csi/k8s-a], clients: [127.0.10.1, localhost]}
        - {paths: [/ifs/data/csi/k8s-b], clients: [worker-1.cluster.local, localhost]}
        - {paths: [/ifs/data/csi/k8s-c], rootClients: [127.0.10.1], clients: [localhost]}
        - {paths: [/ifs/data/csi/k8s-rwx], clients: [127.0.10.1, 127.0.10.2, localhost]}
        - {paths: [/ifs/data/csi/k8s-other], clients: [127.0.10.2, localhost]}
        - {paths: [/ifs/data/csi/k8s-loose], clients: [localhost]}
`

// scExportIDs maps the last path element of each export to its ID.
func scExportIDs(t *testing.T, sim *powerscale.Sim) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, x := range sim.State().Exports {
		p := x.Paths[0]
		out[p[strings.LastIndex(p, "/")+1:]] = strconv.Itoa(x.ID)
	}
	return out
}

// scDriver publishes and unpublishes exports as csi-isilon does
// (dell/csi-powerscale service/controller.go ControllerPublishVolume /
// ControllerUnpublishVolume, through service/isiService.go: goisilon's
// AddExportClientsByIDWithZone and RemoveExportClientsByIDWithZone with
// the node's client string).
type scDriver struct {
	t testing.TB
	c *goisilon.Client
}

func newSCDriver(t testing.TB, e *scEnv) scDriver {
	t.Helper()
	api, err := isiapi.New(context.Background(), e.url, e.cfg.Username, e.cfg.Password, "", 2, 0, &isiapi.ClientOptions{Insecure: true})
	require.NoError(t, err)
	return scDriver{t: t, c: &goisilon.Client{API: api}}
}

func (d scDriver) id(export string) int {
	n, err := strconv.Atoi(export)
	require.NoError(d.t, err)
	return n
}

func (d scDriver) publish(export, client string) {
	d.t.Helper()
	require.NoError(d.t, d.c.AddExportClientsByIDWithZone(context.Background(), d.id(export), "System", []string{client}, true))
}

func (d scDriver) unpublish(export, client string) {
	d.t.Helper()
	require.NoError(d.t, d.c.RemoveExportClientsByIDWithZone(context.Background(), d.id(export), "System", []string{client}, true))
}

// clients is every client entry of the export but localhost.
func (d scDriver) clients(export string) []string {
	d.t.Helper()
	x, err := d.c.GetExportByIDWithZone(context.Background(), d.id(export), "System")
	require.NoError(d.t, err)
	var out []string
	for _, l := range []*[]string{x.Clients, x.RootClients, x.ReadWriteClients, x.ReadOnlyClients} {
		if l == nil {
			continue
		}
		for _, v := range *l {
			if v != "localhost" {
				out = append(out, v)
			}
		}
	}
	return out
}

func scVol(pv, export string) arrayclients.VolumeRef {
	return arrayclients.VolumeRef{Volume: pv, Object: export, Protocol: arrayclients.ProtocolNFS, Zone: "System", Attached: true}
}

func scWrites(srv *simcore.Server, seq int64) int {
	n := 0
	for _, a := range srv.AuditSince(seq) {
		if simcore.IsWrite(a.Method) {
			n++
		}
	}
	return n
}

func TestPowerScalePlanFootprint(t *testing.T) {
	e := newSCEnv(t, scFootprintFixture, nil)
	a := e.adapter(t, nil)
	ctx := context.Background()
	ids := scExportIDs(t, e.sim)
	id, err := a.Resolve(ctx, e.node("worker-1"))
	require.NoError(t, err)

	pending := scVol("pv-pending", ids["k8s-other"])
	pending.Attached = false
	block := scVol("pv-block", ids["k8s-a"])
	block.Protocol = arrayclients.ProtocolBlock
	for _, tc := range []struct {
		name    string
		vol     arrayclients.VolumeRef
		cut     arrayclients.Cut
		gap     arrayclients.GapReason
		holders []string
	}{
		{"listed by IP", scVol("pv-a", ids["k8s-a"]), arrayclients.CutExportClients, "", nil},
		{"listed by FQDN", scVol("pv-b", ids["k8s-b"]), arrayclients.CutExportClients, "", nil},
		{"listed in root clients", scVol("pv-c", ids["k8s-c"]), arrayclients.CutExportClients, "", nil},
		{"listed with another node", scVol("pv-rwx", ids["k8s-rwx"]), arrayclients.CutExportClients, "", []string{"127.0.10.2"}},
		{"not on the array", scVol("pv-gone", "9999"), "", arrayclients.GapVolumeNotFound, nil},
		{"another node's, attached", scVol("pv-other", ids["k8s-other"]), "", arrayclients.GapOtherIdentity, []string{"127.0.10.2"}},
		{"another node's, attach pending", pending, arrayclients.CutNotMapped, "", []string{"127.0.10.2"}},
		{"given to nobody", scVol("pv-loose", ids["k8s-loose"]), arrayclients.CutNotMapped, "", nil},
		{"not NFS", block, "", arrayclients.GapBadHandle, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seq := e.srv.LastSeq()
			p, err := a.Plan(ctx, id, []arrayclients.VolumeRef{tc.vol})
			require.NoError(t, err)
			assert.Zero(t, scWrites(e.srv, seq), "plans never write")
			require.Len(t, p.Volumes, 1)
			vc := p.Volumes[0]
			assert.Equal(t, tc.vol, vc.VolumeRef)
			assert.Equal(t, tc.cut, vc.Cut)
			if tc.gap == "" {
				assert.Nil(t, vc.Gap)
			} else if assert.NotNil(t, vc.Gap) {
				assert.Equal(t, tc.gap, vc.Gap.Reason)
				assert.Contains(t, vc.Gap.Detail, tc.vol.Volume)
			}
			assert.Equal(t, tc.holders, vc.Holders)
			var entries struct{ Exports []struct{ ID int } }
			require.NoError(t, json.Unmarshal(p.Entries, &entries))
			assert.Len(t, entries.Exports, 4, "every export listing the node is planned whatever the footprint")
		})
	}
}

func TestPowerScaleVerifyFootprint(t *testing.T) {
	e := newSCEnv(t, scFootprintFixture, nil)
	a := e.adapter(t, nil)
	ctx := context.Background()
	ids := scExportIDs(t, e.sim)
	id, err := a.Resolve(ctx, e.node("worker-1"))
	require.NoError(t, err)
	p, err := a.Plan(ctx, id, []arrayclients.VolumeRef{scVol("pv-a", ids["k8s-a"]), scVol("pv-rwx", ids["k8s-rwx"]), scVol("pv-loose", ids["k8s-loose"])})
	require.NoError(t, err)

	v, err := a.Verify(ctx, p)
	require.NoError(t, err)
	assert.False(t, v.Fenced)
	require.Len(t, v.Volumes, 3)
	assert.True(t, arraytest.CheckOf(t, v, "pv-a").NodeAccess)
	assert.True(t, arraytest.CheckOf(t, v, "pv-rwx").NodeAccess)
	assert.False(t, arraytest.CheckOf(t, v, "pv-loose").NodeAccess)

	require.NoError(t, a.Apply(ctx, p))
	v, err = a.Verify(ctx, p)
	require.NoError(t, err)
	assert.True(t, v.Fenced, "%+v", v)
	for _, c := range v.Volumes {
		assert.False(t, c.NodeAccess, c.Volume)
	}
	assert.Equal(t, []string{"127.0.10.2"}, arraytest.CheckOf(t, v, "pv-rwx").Holders)

	// A footprint export given to the node behind fenced's back shows.
	newSCDriver(t, e).publish(ids["k8s-loose"], "worker-1.cluster.local")
	v, err = a.Verify(ctx, p)
	require.NoError(t, err)
	assert.False(t, v.Fenced)
	assert.True(t, arraytest.CheckOf(t, v, "pv-loose").NodeAccess)
}

func TestPowerScaleUndoReconciles(t *testing.T) {
	e := newSCEnv(t, scFootprintFixture, nil)
	a := e.adapter(t, nil)
	ctx := context.Background()
	ids := scExportIDs(t, e.sim)
	d := newSCDriver(t, e)
	id, err := a.Resolve(ctx, e.node("worker-1"))
	require.NoError(t, err)
	rwx := scVol("pv-rwx", ids["k8s-rwx"])
	rwx.MultiNode = true
	p, err := a.Plan(ctx, id, []arrayclients.VolumeRef{
		scVol("pv-moved", ids["k8s-a"]),    // Kubernetes moved it to worker-2
		scVol("pv-unwanted", ids["k8s-b"]), // no longer wanted on worker-1
		scVol("pv-wanted", ids["k8s-c"]),   // still wanted, nobody took it
		rwx,                                // multi-node, still wanted, worker-2 has it too
	})
	require.NoError(t, err)
	require.NoError(t, a.Apply(ctx, p))
	v, err := a.Verify(ctx, p)
	require.NoError(t, err)
	require.True(t, v.Fenced, "%+v", v)
	d.publish(ids["k8s-a"], "127.0.10.2")
	scope := arrayclients.RestoreScope{Wanted: []string{"pv-moved", "pv-wanted", "pv-rwx"}}

	require.NoError(t, a.Undo(ctx, p, scope))
	assert.Equal(t, []string{"127.0.10.2"}, d.clients(ids["k8s-a"]), "a moved volume is not given back")
	assert.Empty(t, d.clients(ids["k8s-b"]), "an unwanted volume is not given back")
	assert.Equal(t, []string{"127.0.10.1"}, d.clients(ids["k8s-c"]), "a wanted, unheld volume is given back")
	assert.ElementsMatch(t, []string{"127.0.10.1", "127.0.10.2"}, d.clients(ids["k8s-rwx"]), "a multi-node volume is given back")

	v, err = a.VerifyRestore(ctx, p, scope)
	require.NoError(t, err)
	assert.True(t, v.Restored, "%+v", v)
	require.Len(t, v.Volumes, 4)
	moved := arraytest.CheckOf(t, v, "pv-moved")
	assert.False(t, moved.NodeAccess)
	assert.Equal(t, "moved to 127.0.10.2", moved.Note)
	assert.Equal(t, "not wanted by Kubernetes on the node", arraytest.CheckOf(t, v, "pv-unwanted").Note)
	assert.False(t, arraytest.CheckOf(t, v, "pv-unwanted").NodeAccess)
	assert.True(t, arraytest.CheckOf(t, v, "pv-wanted").NodeAccess)
	assert.True(t, arraytest.CheckOf(t, v, "pv-rwx").NodeAccess)

	seq := e.srv.LastSeq()
	require.NoError(t, a.Undo(ctx, p, scope))
	assert.Zero(t, scWrites(e.srv, seq), "undo twice writes nothing more")

	// The pod moves back: the driver unpublishes worker-2 and publishes
	// worker-1, which the export now takes alone.
	d.unpublish(ids["k8s-a"], "127.0.10.2")
	d.publish(ids["k8s-a"], "127.0.10.1")
	assert.Equal(t, []string{"127.0.10.1"}, d.clients(ids["k8s-a"]))

	// Someone gives the unwanted volume to the node: not restored.
	d.publish(ids["k8s-b"], "127.0.10.1")
	v, err = a.VerifyRestore(ctx, p, scope)
	require.NoError(t, err)
	assert.False(t, v.Restored)
	require.Len(t, v.Remaining, 1)
	assert.Contains(t, v.Remaining[0], "pv-unwanted")
}

func TestPowerScaleUndoNonFootprintExports(t *testing.T) {
	e := newSCEnv(t, scFootprintFixture, nil)
	a := e.adapter(t, nil)
	ctx := context.Background()
	ids := scExportIDs(t, e.sim)
	d := newSCDriver(t, e)
	id, err := a.Resolve(ctx, e.node("worker-1"))
	require.NoError(t, err)
	p, err := a.Plan(ctx, id, nil)
	require.NoError(t, err)
	require.NoError(t, a.Apply(ctx, p))
	d.publish(ids["k8s-a"], "127.0.10.2") // a client that was not there at the plan
	require.NoError(t, a.Undo(ctx, p, arrayclients.RestoreScope{}))
	assert.Equal(t, []string{"127.0.10.2"}, d.clients(ids["k8s-a"]), "moved: skipped")
	assert.Equal(t, []string{"worker-1.cluster.local"}, d.clients(ids["k8s-b"]))
	assert.ElementsMatch(t, []string{"127.0.10.1", "127.0.10.2"}, d.clients(ids["k8s-rwx"]), "its other client was there at the plan: given back")
	v, err := a.VerifyRestore(ctx, p, arrayclients.RestoreScope{})
	require.NoError(t, err)
	assert.True(t, v.Restored, "%+v", v)
	assert.Empty(t, v.Volumes)
}

// TestPowerScaleUndoV1Plan: a plan written before footprints (ledger v1:
// no Volumes, no record of each export's other clients) still decodes and
// undoes. Without that record an export another client now lists may have
// moved, so only exports no other client lists are given back.
func TestPowerScaleUndoV1Plan(t *testing.T) {
	e := newSCEnv(t, scFootprintFixture, nil)
	a := e.adapter(t, nil)
	ctx := context.Background()
	ids := scExportIDs(t, e.sim)
	d := newSCDriver(t, e)
	id, err := a.Resolve(ctx, e.node("worker-1"))
	require.NoError(t, err)
	v1 := `{"array":"pscale-1","family":"powerscale","identity":{"array":"pscale-1","family":"powerscale","node":"worker-1",` +
		`"objectName":"worker-1","keys":["127.0.10.1","worker-1","worker-1.cluster.local"],"resolvedAt":"2026-11-25T00:04:24Z"},` +
		`"entries":{"zone":"System","keys":["127.0.10.1","worker-1","worker-1.cluster.local"],"exports":[` +
		`{"id":A,"paths":["/ifs/data/csi/k8s-a"],"entries":[{"list":"clients","value":"127.0.10.1","index":0}]},` +
		`{"id":RWX,"paths":["/ifs/data/csi/k8s-rwx"],"entries":[{"list":"clients","value":"127.0.10.1","index":0}]}]},` +
		`"summary":"remove 2 client entries","createdAt":"2026-11-25T00:04:24Z"}`
	v1 = strings.NewReplacer("A,", ids["k8s-a"]+",", "RWX,", ids["k8s-rwx"]+",").Replace(v1)
	var p arrayclients.Plan
	require.NoError(t, json.Unmarshal([]byte(v1), &p))
	require.Equal(t, id.Keys, p.Identity.Keys)
	require.Empty(t, p.Volumes)
	require.NoError(t, a.Apply(ctx, p))
	assert.Empty(t, d.clients(ids["k8s-a"]))
	require.NoError(t, a.Undo(ctx, p, arrayclients.RestoreScope{}))
	require.NoError(t, a.Undo(ctx, p, arrayclients.RestoreScope{}), "twice")
	assert.Equal(t, []string{"127.0.10.1"}, d.clients(ids["k8s-a"]), "no other client: given back")
	assert.Equal(t, []string{"127.0.10.2"}, d.clients(ids["k8s-rwx"]), "another client, unknown at the plan: left")
	v, err := a.VerifyRestore(ctx, p, arrayclients.RestoreScope{})
	require.NoError(t, err)
	assert.True(t, v.Restored, "%+v", v)
}
