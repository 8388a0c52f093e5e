package powerstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dell/gopowerstore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/tests/arraysim/fixture"
	"github.com/fenced-project/fenced/tests/arraysim/powerstore"
	"github.com/fenced-project/fenced/tests/arraysim/simcore"
)

const testFixture = `
nodes:
  - {name: worker-1, ip: 127.0.10.1, fqdn: worker-1.cluster.local, machineID: 0a1b2c3d4e5f60718293a4b5c6d7e8f9,
     iqn: "iqn.1994-05.com.redhat:worker-1", wwpns: ["10000000c9a0b001", "10000000c9a0b002"]}
  - {name: worker-2, ip: 127.0.10.2, fqdn: worker-2.cluster.local, machineID: 1a1b2c3d4e5f60718293a4b5c6d7e8f9,
     iqn: "iqn.1994-05.com.redhat:worker-2", wwpns: ["10000000c9a0b003"]}
  - {name: worker-3, ip: 127.0.10.3, machineID: 2a1b2c3d4e5f60718293a4b5c6d7e8f9, iqn: "iqn.1994-05.com.redhat:worker-3"}
arrays:
  - name: pstore-1
    family: powerstore
    spec:
      hostGroups: [{name: hg-apps, volumes: [{volume: shared-1, lun: 7}]}]
      hosts:
        - name: legacy-host
          hostGroup: hg-apps
          initiators: [{portName: "iqn.2000-01.com.example:legacy", chapSingleUsername: chapuser, chapSinglePassword: chapsecret12}]
      perNode:
        nodes: [worker-1, worker-2]
        protocol: both
        volumes: 3
`

type env struct {
	sim    *powerstore.Sim
	srv    *simcore.Server
	url    string
	client gopowerstore.Client
	nodes  []fixture.Node
}

func newEnv(t testing.TB) *env { return newEnvFrom(t, testFixture) }

func newEnvFrom(t testing.TB, fixtureYAML string) *env {
	t.Helper()
	fx, err := fixture.Parse([]byte(fixtureYAML))
	require.NoError(t, err)
	arr, ok := fx.Array("pstore-1")
	require.True(t, ok)
	sim, err := powerstore.New(&arr.Spec, fx.Nodes)
	require.NoError(t, err)
	srv := simcore.New("pstore-1", sim, nil)
	l, err := simcore.Serve(srv, "127.0.0.1:0", false, "")
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	e := &env{sim: sim, srv: srv, url: l.URL, nodes: fx.Nodes}
	e.client = e.newClient(t, powerstore.DefaultPassword, 5*time.Second)
	return e
}

func (e *env) newClient(t testing.TB, password string, timeout time.Duration) gopowerstore.Client {
	t.Helper()
	c, err := gopowerstore.NewClientWithArgs(e.url+"/api/rest", powerstore.DefaultUsername, password,
		gopowerstore.NewClientOptions().SetInsecure(true).SetDefaultTimeout(timeout))
	require.NoError(t, err)
	return c
}

func (e *env) dump(t *testing.T) string {
	t.Helper()
	b, err := json.Marshal(e.sim.Snapshot())
	require.NoError(t, err)
	return string(b)
}

func nodeHostName(n fixture.Node) string { return n.CSINodeIDs("")[fixture.DriverPowerStore] }

func apiStatus(t *testing.T, err error) int {
	t.Helper()
	var apiErr gopowerstore.APIError
	require.ErrorAs(t, err, &apiErr, "want gopowerstore.APIError, got %T: %v", err, err)
	return apiErr.StatusCode
}

func TestRealClientFenceRoundTrip(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	before := e.dump(t)

	h, err := e.client.GetHostByName(ctx, nodeHostName(e.nodes[0]))
	require.NoError(t, err)
	require.Len(t, h.Initiators, 3, "one iSCSI and two FC initiators")
	for _, in := range h.Initiators {
		assert.NotEmpty(t, in.ActiveSessions, "connected host has sessions on %s", in.PortName)
	}
	maps, err := e.client.GetHostVolumeMappingByHostID(ctx, h.ID)
	require.NoError(t, err)
	require.Len(t, maps, 3)
	assert.Equal(t, "A1", maps[0].Volume.ApplianceID)

	// Fence: remove every initiator in one PATCH (204, empty body).
	var ports []string
	for _, in := range h.Initiators {
		ports = append(ports, in.PortName)
	}
	_, err = e.client.ModifyHost(ctx, &gopowerstore.HostModify{RemoveInitiators: &ports}, h.ID)
	require.NoError(t, err)
	fenced, err := e.client.GetHost(ctx, h.ID)
	require.NoError(t, err)
	assert.Empty(t, fenced.Initiators)

	// Removing again is a 400 on the array.
	one := ports[:1]
	_, err = e.client.ModifyHost(ctx, &gopowerstore.HostModify{RemoveInitiators: &one}, h.ID)
	require.Error(t, err)
	assert.Equal(t, 400, apiStatus(t, err))

	// Unfence: add them back with their types.
	var add []gopowerstore.InitiatorCreateModify
	for _, in := range h.Initiators {
		p, pt := in.PortName, in.PortType
		add = append(add, gopowerstore.InitiatorCreateModify{PortName: &p, PortType: &pt})
	}
	_, err = e.client.ModifyHost(ctx, &gopowerstore.HostModify{AddInitiators: &add}, h.ID)
	require.NoError(t, err)
	// Adding a registered port name again is a 400 naming the rule.
	_, err = e.client.ModifyHost(ctx, &gopowerstore.HostModify{AddInitiators: &add}, h.ID)
	require.Error(t, err)
	assert.Equal(t, 400, apiStatus(t, err))
	assert.Contains(t, err.Error(), "already registered")

	assert.Equal(t, before, e.dump(t), "state after unfence equals state before fence")
}

func TestRealClientDetachAttach(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	before := e.dump(t)
	h, err := e.client.GetHostByName(ctx, nodeHostName(e.nodes[1]))
	require.NoError(t, err)
	maps, err := e.client.GetHostVolumeMappingByHostID(ctx, h.ID)
	require.NoError(t, err)
	require.Len(t, maps, 3)
	for _, m := range maps {
		v := m.VolumeID
		_, err := e.client.DetachVolumeFromHost(ctx, h.ID, &gopowerstore.HostVolumeDetach{VolumeID: &v})
		require.NoError(t, err, "detach answers 204 with an empty body")
	}
	v := maps[0].VolumeID
	_, err = e.client.DetachVolumeFromHost(ctx, h.ID, &gopowerstore.HostVolumeDetach{VolumeID: &v})
	require.Error(t, err)
	var apiErr gopowerstore.APIError
	require.ErrorAs(t, err, &apiErr)
	assert.True(t, apiErr.HostIsNotAttachedToVolume(), "detach twice is a 400")
	left, err := e.client.GetHostVolumeMappingByHostID(ctx, h.ID)
	require.NoError(t, err)
	assert.Empty(t, left)

	for _, m := range maps {
		v, lun := m.VolumeID, m.LogicalUnitNumber
		_, err := e.client.AttachVolumeToHost(ctx, h.ID, &gopowerstore.HostVolumeAttach{VolumeID: &v, LogicalUnitNumber: &lun})
		require.NoError(t, err)
	}
	v, lun := maps[0].VolumeID, maps[0].LogicalUnitNumber
	_, err = e.client.AttachVolumeToHost(ctx, h.ID, &gopowerstore.HostVolumeAttach{VolumeID: &v, LogicalUnitNumber: &lun})
	require.ErrorAs(t, err, &apiErr)
	assert.True(t, apiErr.VolumeAttachedToHost(), "attach twice is a 422")
	assert.Equal(t, before, e.dump(t))

	missing := "no-such-volume"
	_, err = e.client.DetachVolumeFromHost(ctx, h.ID, &gopowerstore.HostVolumeDetach{VolumeID: &missing})
	assert.Equal(t, 404, apiStatus(t, err))
	_, err = e.client.GetHost(ctx, "no-such-host")
	assert.Equal(t, 404, apiStatus(t, err))
}

func TestRealClientHostGroupsPagingAndFilters(t *testing.T) {
	e := newEnvFrom(t, strings.Replace(testFixture, "    spec:\n", "    spec:\n      pageSize: 2\n", 1))
	ctx := context.Background()
	hosts, err := e.client.GetHosts(ctx)
	require.NoError(t, err, "three hosts over pages of two (206 + Content-Range)")
	require.Len(t, hosts, 3)
	h0, err := e.client.GetHostByName(ctx, nodeHostName(e.nodes[0]))
	require.NoError(t, err)
	firstPage, err := e.client.GetHostVolumeMappingByHostID(ctx, h0.ID)
	require.NoError(t, err)
	assert.Len(t, firstPage, 2, "GetHostVolumeMappingByHostID reads only the first page of a 206")
	g, err := e.client.GetHostGroupByName(ctx, "hg-apps")
	require.NoError(t, err)
	require.Len(t, g.Hosts, 1)
	require.Len(t, g.MappedHostGroups, 1)

	legacy, err := e.client.GetHostByName(ctx, "legacy-host")
	require.NoError(t, err)
	assert.Equal(t, g.ID, legacy.HostGroupID)
	assert.Equal(t, "chapuser", legacy.Initiators[0].ChapSingleUsername)
	assert.Empty(t, legacy.Initiators[0].ChapSinglePassword, "secrets are never read back")

	_, err = e.client.ModifyHostGroup(ctx, &gopowerstore.HostGroupModify{RemoveHostIDs: []string{legacy.ID}}, g.ID)
	require.NoError(t, err)
	_, err = e.client.ModifyHostGroup(ctx, &gopowerstore.HostGroupModify{RemoveHostIDs: []string{legacy.ID}}, g.ID)
	assert.Equal(t, 400, apiStatus(t, err), "removing a non-member is a 400")
	_, err = e.client.ModifyHostGroup(ctx, &gopowerstore.HostGroupModify{AddHostIDs: []string{legacy.ID}}, g.ID)
	require.NoError(t, err)

	// Exact names only: a prefix of a host name matches nothing.
	name := nodeHostName(e.nodes[0])
	_, err = e.client.GetHostByName(ctx, strings.TrimSuffix(name, "-"+e.nodes[0].IP))
	assert.Equal(t, 404, apiStatus(t, err))
}

func TestRealClientMetricsFollowSignals(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	name := nodeHostName(e.nodes[0])
	h, err := e.client.GetHostByName(ctx, name)
	require.NoError(t, err)
	maps, err := e.client.GetHostVolumeMappingByHostID(ctx, h.ID)
	require.NoError(t, err)
	vol := maps[0].VolumeID

	samples, err := e.client.PerformanceMetricsByVolume(ctx, vol, gopowerstore.TwentySec)
	require.NoError(t, err)
	require.Len(t, samples, 6)
	for _, s := range samples {
		assert.Zero(t, s.TotalIops)
	}
	require.NoError(t, e.sim.SetSignals(name, simcore.Signals{IOActive: simcore.Bool(true), Connected: simcore.Bool(false)}))
	samples, err = e.client.PerformanceMetricsByVolume(ctx, vol, gopowerstore.TwentySec)
	require.NoError(t, err)
	last := samples[len(samples)-1]
	assert.Positive(t, last.TotalIops)
	assert.WithinDuration(t, time.Now(), time.Time(last.Timestamp), 30*time.Second)
	h, err = e.client.GetHost(ctx, h.ID)
	require.NoError(t, err)
	for _, in := range h.Initiators {
		assert.Empty(t, in.ActiveSessions, "a disconnected host has no sessions")
	}
	assert.Error(t, e.sim.SetSignals("nobody", simcore.Signals{}))
}

func TestRealClientAuth(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()

	bad := e.newClient(t, "wrong-password", 2*time.Second)
	_, err := bad.GetHosts(ctx)
	assert.Equal(t, 401, apiStatus(t, err), "bad credentials are a 401 and no retry")

	h, err := e.client.GetHostByName(ctx, nodeHostName(e.nodes[0]))
	require.NoError(t, err)
	e.sim.ExpireSessions()
	seq := e.srv.LastSeq()
	desc := "touched"
	_, err = e.client.ModifyHost(ctx, &gopowerstore.HostModify{Description: &desc}, h.ID)
	require.NoError(t, err, "a stale session gets 403, the client logs in again and retries")
	var statuses []string
	for _, a := range e.srv.AuditSince(seq) {
		statuses = append(statuses, a.Method+" "+strings.SplitN(a.Path, "?", 2)[0]+" "+strconv.Itoa(a.Status))
	}
	assert.Equal(t, []string{
		"PATCH /api/rest/host/" + h.ID + " 403",
		"GET /api/rest/login_session 200",
		"PATCH /api/rest/host/" + h.ID + " 204",
	}, statuses)
}

func TestRealClientFaults(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	name := nodeHostName(e.nodes[0])
	timeout := 500 * time.Millisecond
	c := e.newClient(t, powerstore.DefaultPassword, timeout)

	e.srv.AddFault(simcore.Fault{Kind: simcore.FaultError, Path: "^/api/rest/host$", Status: 503, Count: 1})
	_, err := c.GetHostByName(ctx, name)
	assert.Equal(t, 503, apiStatus(t, err))

	// Go's transport retries an idempotent request once on a reused
	// connection that was reset, so the reset stays until removed.
	id := e.srv.AddFault(simcore.Fault{Kind: simcore.FaultReset, Path: "^/api/rest/host$"})
	_, err = c.GetHostByName(ctx, name)
	var uerr *url.Error
	require.ErrorAs(t, err, &uerr, "a reset connection is a transport error")
	require.True(t, e.srv.RemoveFault(id))

	e.srv.AddFault(simcore.Fault{Kind: simcore.FaultMalformed, Path: "^/api/rest/host$", Count: 1})
	_, err = c.GetHostByName(ctx, name)
	var syn *json.SyntaxError
	require.Error(t, err)
	assert.True(t, errors.As(err, &syn) || strings.Contains(err.Error(), "unexpected EOF"), "malformed JSON: %v", err)

	e.srv.AddFault(simcore.Fault{Kind: simcore.FaultHang, Path: "^/api/rest/host$", Count: 1})
	start := time.Now()
	_, err = c.GetHostByName(ctx, name)
	require.Error(t, err)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), timeout+2*time.Second, "the client gives up at its timeout")

	e.srv.AddFault(simcore.Fault{Kind: simcore.FaultLatency, Path: "^/api/rest/host$", Latency: 50 * time.Millisecond, Count: 1})
	_, err = c.GetHostByName(ctx, name)
	require.NoError(t, err)

	_, err = c.GetHostByName(ctx, name)
	require.NoError(t, err, "one-shot faults are gone")
	var ne net.Error
	assert.NotErrorAs(t, err, &ne)
}

// TestSelectAndCaseInsensitiveFilters: as the array, a query returns only
// the attributes it selects (only id without select, related resources'
// attributes in parentheses) and filters ignore case (PowerStore REST API
// Developers Guide, "Request parameters").
func TestSelectAndCaseInsensitiveFilters(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	get := func(path string) []map[string]any {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.url+"/api/rest/"+path, nil)
		require.NoError(t, err)
		req.SetBasicAuth(powerstore.DefaultUsername, powerstore.DefaultPassword)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		var out []map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
		return out
	}
	name := nodeHostName(e.nodes[0])
	hosts := get("host?name=eq." + name)
	require.Len(t, hosts, 1)
	assert.Equal(t, []string{"id"}, slices.Sorted(maps.Keys(hosts[0])), "without select, only id")

	hosts = get("host?name=eq." + name + "&select=name,host_initiators(port_name)")
	require.Len(t, hosts, 1)
	assert.Equal(t, []string{"host_initiators", "name"}, slices.Sorted(maps.Keys(hosts[0])))
	inits, ok := hosts[0]["host_initiators"].([]any)
	require.True(t, ok)
	require.NotEmpty(t, inits)
	assert.Equal(t, []string{"port_name"}, slices.Sorted(maps.Keys(inits[0].(map[string]any))))

	all := get("host?name=eq." + name + "&select=*")
	require.Len(t, all, 1)
	assert.Contains(t, all[0], "host_initiators")
	assert.Contains(t, all[0], "os_type")

	// Filters ignore case: the client's GetHostByName finds the host by
	// its name in upper case (the adapter compares names exactly itself).
	h, err := e.client.GetHostByName(ctx, strings.ToUpper(name))
	require.NoError(t, err)
	assert.Equal(t, name, h.Name)
	mappings := get("host_volume_mapping?host_id=eq." + strings.ToUpper(h.ID) + "&select=volume(appliance_id),volume_id")
	require.NotEmpty(t, mappings)
	assert.Equal(t, []string{"volume", "volume_id"}, slices.Sorted(maps.Keys(mappings[0])))
	vol, ok := mappings[0]["volume"].(map[string]any)
	require.True(t, ok)
	assert.Equal(t, []string{"appliance_id"}, slices.Sorted(maps.Keys(vol)))
}
