package powerscale_test

import (
	"context"
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dell/goisilon"
	"github.com/dell/goisilon/api"
	apiv2 "github.com/dell/goisilon/api/v2"
	apiv4 "github.com/dell/goisilon/api/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/tests/arraysim/fixture"
	"github.com/fenced-project/fenced/tests/arraysim/powerscale"
	"github.com/fenced-project/fenced/tests/arraysim/simcore"
)

const testFixture = `
nodes:
  - {name: worker-1, ip: 127.0.10.1, fqdn: worker-1.cluster.local}
  - {name: worker-2, ip: 127.0.10.2, fqdn: worker-2.cluster.local}
  - {name: worker-3, ip: 127.0.10.3, fqdn: worker-3.cluster.local}
arrays:
  - name: pscale-1
    family: powerscale
    spec:
      pageSize: 2
      zones: [tenant-b]
      exports:
        - {paths: [/ifs/data/other], zone: tenant-b, clients: [127.0.10.1]}
      perNode:
        exports: 2
        shared: 1
        lists: [clients, rootClients, readWriteClients, readOnlyClients]
        forms: [fqdn, ip, name]
`

type env struct {
	sim   *powerscale.Sim
	srv   *simcore.Server
	url   string
	nodes []fixture.Node
}

func newEnv(t testing.TB) *env {
	t.Helper()
	fx, err := fixture.Parse([]byte(testFixture))
	require.NoError(t, err)
	arr, ok := fx.Array("pscale-1")
	require.True(t, ok)
	sim, err := powerscale.New(&arr.Spec, fx.Nodes)
	require.NoError(t, err)
	srv := simcore.New("pscale-1", sim, nil)
	l, err := simcore.Serve(srv, "127.0.0.1:0", false, "")
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return &env{sim: sim, srv: srv, url: l.URL, nodes: fx.Nodes}
}

// client builds the real goisilon client; authType 0 = Basic, 1 = session.
func (e *env) client(t testing.TB, password string, authType uint8, timeout time.Duration) (*goisilon.Client, error) {
	t.Helper()
	c, err := api.New(context.Background(), e.url, powerscale.DefaultUsername, password, "", 0, authType,
		&api.ClientOptions{Insecure: true, Timeout: timeout})
	if err != nil {
		return nil, err
	}
	return &goisilon.Client{API: c}, nil
}

func (e *env) dump(t *testing.T) string {
	t.Helper()
	b, err := json.Marshal(e.sim.Snapshot())
	require.NoError(t, err)
	return string(b)
}

func jsonStatus(t *testing.T, err error) int {
	t.Helper()
	var je *api.JSONError
	require.ErrorAs(t, err, &je, "want *api.JSONError, got %T: %v", err, err)
	require.NotEmpty(t, je.Err, "error bodies always carry an error")
	return je.StatusCode
}

func listAll(t *testing.T, c *goisilon.Client, zone string) []int {
	t.Helper()
	all, err := c.ListAllExportsWithStructParams(context.Background(), apiv4.ListV4NfsExportsParams{Zone: &zone})
	require.NoError(t, err)
	var ids []int
	for _, x := range all {
		ids = append(ids, int(*x.ID))
	}
	return ids
}

func TestRealClientExportsRoundTrip(t *testing.T) {
	for _, authType := range []uint8{0, 1} {
		t.Run("authType="+strconv.Itoa(int(authType)), func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			c, err := e.client(t, powerscale.DefaultPassword, authType, 5*time.Second)
			require.NoError(t, err)
			assert.Equal(t, uint8(16), c.API.APIVersion())
			before := e.dump(t)

			ids := listAll(t, c, "System")
			require.Len(t, ids, 7, "2 per node + 1 shared, over pages of 2 with resume tokens")
			assert.Len(t, listAll(t, c, "tenant-b"), 1)

			n := e.nodes[0]
			keys := []string{n.IP, n.Name, n.FQDN}
			for _, id := range ids {
				require.NoError(t, c.RemoveExportClientsByIDWithZone(ctx, id, "System", keys, false))
			}
			for _, id := range ids {
				x, err := c.GetExportByIDWithZone(ctx, id, "System")
				require.NoError(t, err)
				for _, l := range [][]string{*x.Clients, *x.RootClients, *x.ReadWriteClients, *x.ReadOnlyClients} {
					for _, k := range keys {
						assert.NotContains(t, l, k)
					}
				}
				assert.Subset(t, *x.Clients, []string{"localhost", "127.0.0.1"}, "localhost entries stay")
			}
			other, err := c.GetExportByIDWithZone(ctx, 1, "tenant-b")
			require.NoError(t, err)
			assert.Equal(t, []string{"127.0.10.1"}, *other.Clients, "another zone is untouched")
			assert.NotEqual(t, before, e.dump(t))
		})
	}
}

func TestRealClientPartialPut(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c, err := e.client(t, powerscale.DefaultPassword, 0, 5*time.Second)
	require.NoError(t, err)
	x, err := c.GetExportByIDWithZone(ctx, 7, "System")
	require.NoError(t, err)
	rootBefore := append([]string(nil), *x.RootClients...)
	require.NoError(t, c.AddExportReadOnlyClientsByIDWithZone(ctx, 7, "System", []string{"127.0.10.9"}, false))
	y, err := c.GetExportByIDWithZone(ctx, 7, "System")
	require.NoError(t, err)
	assert.Equal(t, rootBefore, *y.RootClients, "absent fields stay unchanged")
	assert.Contains(t, *y.ReadOnlyClients, "127.0.10.9")

	empty := []string{}
	require.NoError(t, apiv2.ExportUpdateWithZone(ctx, c.API, &apiv2.Export{ID: 7, ReadOnlyClients: &empty}, "System", true))
	y, err = c.GetExportByIDWithZone(ctx, 7, "System")
	require.NoError(t, err)
	assert.NotNil(t, y.ReadOnlyClients, "an empty list is [] not null")
	assert.Empty(t, *y.ReadOnlyClients)

	_, err = c.GetExportByIDWithZone(ctx, 99, "System")
	assert.Equal(t, 404, jsonStatus(t, err))
	_, err = c.GetExportByIDWithZone(ctx, 1, "System")
	assert.Equal(t, 404, jsonStatus(t, err), "export 1 lives in zone tenant-b")
	err = c.API.Put(ctx, "platform/2/protocols/nfs/exports", "7", api.OrderedValues{{[]byte("zone"), []byte("System")}},
		nil, json.RawMessage(`{"clients":null}`), nil)
	assert.Equal(t, 400, jsonStatus(t, err))
}

func TestRealClientStatistics(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c, err := e.client(t, powerscale.DefaultPassword, 0, 5*time.Second)
	require.NoError(t, err)
	n := e.nodes[1]
	stats, err := c.IsIOInProgress(ctx)
	require.NoError(t, err)
	assert.Empty(t, stats.ClientsList)

	require.NoError(t, e.sim.SetSignals(n.FQDN, simcore.Signals{IOActive: simcore.Bool(true)}))
	stats, err = c.IsIOInProgress(ctx)
	require.NoError(t, err)
	require.Len(t, stats.ClientsList, 1)
	assert.Equal(t, n.IP, stats.ClientsList[0].RemoteAddr)

	// Once no export lists the node, the array sees no more traffic from it.
	for _, id := range listAll(t, c, "System") {
		require.NoError(t, c.RemoveExportClientsByIDWithZone(ctx, id, "System", []string{n.IP, n.Name, n.FQDN}, false))
	}
	stats, err = c.IsIOInProgress(ctx)
	require.NoError(t, err)
	assert.Empty(t, stats.ClientsList)
	assert.Error(t, e.sim.SetSignals("127.0.99.99", simcore.Signals{}))
}

func TestRealClientAuth(t *testing.T) {
	e := newEnv(t)
	_, err := e.client(t, "wrong", 0, 2*time.Second)
	assert.Equal(t, 401, jsonStatus(t, err), "Basic with bad credentials")
	_, err = e.client(t, "wrong", 1, 2*time.Second)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "authentication failed", "session with bad credentials")

	c, err := e.client(t, powerscale.DefaultPassword, 1, 2*time.Second)
	require.NoError(t, err)
	e.sim.ExpireSessions()
	seq := e.srv.LastSeq()
	_, err = c.GetExportByIDWithZone(context.Background(), 2, "System")
	require.NoError(t, err, "a stale session gets 401, the client logs in again and retries")
	var got []string
	for _, a := range e.srv.AuditSince(seq) {
		got = append(got, a.Method+" "+strings.SplitN(a.Path, "?", 2)[0]+" "+strconv.Itoa(a.Status))
	}
	assert.Equal(t, []string{
		"GET /platform/2/protocols/nfs/exports/2 401",
		"POST /session/1/session/ 201",
		"GET /platform/2/protocols/nfs/exports/2 200",
	}, got)
}

func TestRealClientFaults(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	timeout := 500 * time.Millisecond
	c, err := e.client(t, powerscale.DefaultPassword, 0, timeout)
	require.NoError(t, err)
	path := "^/platform/2/protocols/nfs/exports/2$"

	e.srv.AddFault(simcore.Fault{Kind: simcore.FaultError, Path: path, Status: 503, Count: 1})
	_, err = c.GetExportByIDWithZone(ctx, 2, "System")
	assert.Equal(t, 503, jsonStatus(t, err))

	id := e.srv.AddFault(simcore.Fault{Kind: simcore.FaultReset, Path: path})
	_, err = c.GetExportByIDWithZone(ctx, 2, "System")
	var uerr *url.Error
	require.ErrorAs(t, err, &uerr)
	e.srv.RemoveFault(id)

	e.srv.AddFault(simcore.Fault{Kind: simcore.FaultMalformed, Path: path, Count: 1})
	_, err = c.GetExportByIDWithZone(ctx, 2, "System")
	require.Error(t, err)

	e.srv.AddFault(simcore.Fault{Kind: simcore.FaultHang, Path: path, Count: 1})
	start := time.Now()
	_, err = c.GetExportByIDWithZone(ctx, 2, "System")
	require.ErrorAs(t, err, &uerr)
	assert.True(t, uerr.Timeout(), "the client gives up at its timeout: %v", err)
	assert.Less(t, time.Since(start), timeout+2*time.Second)

	e.srv.AddFault(simcore.Fault{Kind: simcore.FaultLatency, Path: path, Latency: 50 * time.Millisecond, Count: 1})
	_, err = c.GetExportByIDWithZone(ctx, 2, "System")
	require.NoError(t, err)
}
