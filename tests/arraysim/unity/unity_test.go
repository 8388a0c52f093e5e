package unity_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dell/gounity"
	"github.com/dell/gounity/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/tests/arraysim/fixture"
	"github.com/fenced-project/fenced/tests/arraysim/simcore"
	"github.com/fenced-project/fenced/tests/arraysim/unity"
)

const testFixture = `
nodes:
  - {name: worker-1.cluster.local, ip: 127.0.10.1, fqdn: worker-1.cluster.local, iqn: "iqn.1994-05.com.redhat:worker-1", wwpns: ["10000000c9a0b001"]}
  - {name: worker-2.cluster.local, ip: 127.0.10.2, fqdn: worker-2.cluster.local, iqn: "iqn.1994-05.com.redhat:worker-2"}
arrays:
  - name: unity-1
    family: unity
    spec:
      username: admin
      password: secret
      generate: {lunsPerNode: 3}
      hosts:
        - {name: twin, iqns: ["iqn.2001-04.com.example:twin-a"]}
        - {name: twin, iqns: ["iqn.2001-04.com.example:twin-b"]}
        - {name: backup, iqns: ["iqn.2001-04.com.example:backup"]}
      luns:
        - name: shared
          hostAccess:
            - {host: worker-1.cluster.local, hlu: 7}
            - {host: backup, hlu: 0}
`

type env struct {
	srv *simcore.Server
	sim *unity.Sim
	url string
}

func start(t testing.TB, useTLS bool) env {
	t.Helper()
	return startDoc(t, testFixture, useTLS)
}

func startDoc(t testing.TB, doc string, useTLS bool) env {
	t.Helper()
	f, err := fixture.Parse([]byte(doc))
	require.NoError(t, err)
	sim, err := unity.New(&f.Arrays[0].Spec, f.Nodes)
	require.NoError(t, err)
	srv := simcore.New("unity-1", sim, nil)
	l, err := simcore.Serve(srv, "127.0.0.1:0", useTLS, t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return env{srv: srv, sim: sim, url: l.URL}
}

// client builds a gounity client. gounity has no CA option: TLS needs
// insecure against the simulator's generated certificate.
func (e env) client(t testing.TB) gounity.UnityClient {
	t.Helper()
	ctx := context.Background()
	c, err := gounity.NewClientWithArgs(ctx, e.url, true)
	require.NoError(t, err)
	require.NoError(t, c.Authenticate(ctx, &gounity.ConfigConnect{Endpoint: e.url, Username: "admin", Password: "secret", Insecure: true}))
	return c
}

func dump(t *testing.T, sim *unity.Sim) string {
	t.Helper()
	b, err := json.Marshal(sim.Snapshot())
	require.NoError(t, err)
	return string(b)
}

// lunsOf pages through every LUN (gounity pages from 1; page 0 and 1 are
// the same page) and returns those granting hostID access, with the other
// hosts of each.
func lunsOf(t *testing.T, c gounity.UnityClient, hostID string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for page := 1; ; page++ {
		vols, _, err := c.ListVolumes(context.Background(), page, 2)
		require.NoError(t, err)
		for _, v := range vols {
			var hosts []string
			mine := false
			for _, a := range v.VolumeContent.HostAccessResponse {
				if a.HostContent.ID == hostID {
					mine = true
				} else {
					hosts = append(hosts, a.HostContent.ID)
				}
			}
			if mine {
				out[v.VolumeContent.ResourceID] = hosts
			}
		}
		if len(vols) < 2 {
			return out
		}
	}
}

func TestFenceRoundTripWithRealClient(t *testing.T) {
	e := start(t, true)
	c := e.client(t)
	ctx := context.Background()
	before := dump(t, e.sim)

	h, err := c.FindHostByName(ctx, "worker-1.cluster.local")
	require.NoError(t, err)
	hostID := h.HostContent.ID
	assert.Len(t, h.HostContent.FcInitiators, 1)
	assert.Len(t, h.HostContent.IscsiInitiators, 1)
	var addrs []string
	for _, p := range h.HostContent.IPPorts {
		addrs = append(addrs, p.Address)
	}
	assert.Equal(t, []string{"worker-1.cluster.local", "127.0.10.1"}, addrs)
	for _, in := range append(h.HostContent.FcInitiators, h.HostContent.IscsiInitiators...) {
		hi, err := c.FindHostInitiatorByID(ctx, in.ID)
		require.NoError(t, err)
		require.NotEmpty(t, hi.HostInitiatorContent.Health.DescriptionIDs)
		assert.Equal(t, "ALRT_COMPONENT_OK", hi.HostInitiatorContent.Health.DescriptionIDs[0])
		assert.Equal(t, hostID, hi.HostInitiatorContent.ParentHost.ID)
	}

	luns := lunsOf(t, c, hostID)
	require.Len(t, luns, 4, "three own LUNs and the shared one")
	backup, err := c.FindHostByName(ctx, "backup")
	require.NoError(t, err)
	for id, others := range luns {
		require.NoError(t, c.ModifyVolumeExport(ctx, id, others))
	}
	assert.Empty(t, lunsOf(t, c, hostID), "fenced: no LUN grants the host access")
	shared, err := c.FindVolumeByName(ctx, "shared")
	require.NoError(t, err)
	require.Len(t, shared.VolumeContent.HostAccessResponse, 1)
	assert.Equal(t, backup.HostContent.ID, shared.VolumeContent.HostAccessResponse[0].HostContent.ID, "the other host keeps access")

	// Writing the same list again: Unity answers "nothing to modify".
	err = c.ModifyVolumeExport(ctx, shared.VolumeContent.ResourceID, []string{backup.HostContent.ID})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "0x6701020")

	// Unfence in HLU order: the array picks the lowest free HLU per host.
	ids := slices.Sorted(func(yield func(string) bool) {
		for id := range luns {
			if !yield(id) {
				return
			}
		}
	})
	for _, id := range ids {
		require.NoError(t, c.ModifyVolumeExport(ctx, id, append(slices.Clone(luns[id]), hostID)))
	}
	// The shared LUN had HLU 7, which the array cannot be told to use; the
	// fixture's own LUNs (0..2) come back exactly, the shared one at 3.
	after := dump(t, e.sim)
	assert.NotEqual(t, before, after)
	v, err := c.FindVolumeByName(ctx, "shared")
	require.NoError(t, err)
	for _, a := range v.VolumeContent.HostAccessResponse {
		if a.HostContent.ID == hostID {
			assert.Equal(t, 3, a.HLU)
		}
	}
}

func TestRoundTripRestoresDumpWhenHLUsAreDense(t *testing.T) {
	e := start(t, false)
	c := e.client(t)
	ctx := context.Background()
	before := dump(t, e.sim)
	h, err := c.FindHostByName(ctx, "worker-2.cluster.local")
	require.NoError(t, err)
	luns := lunsOf(t, c, h.HostContent.ID)
	require.Len(t, luns, 3)
	for id, others := range luns {
		require.NoError(t, c.ModifyVolumeExport(ctx, id, others))
	}
	for _, id := range slices.Sorted(func(yield func(string) bool) {
		for id := range luns {
			if !yield(id) {
				return
			}
		}
	}) {
		require.NoError(t, c.ModifyVolumeExport(ctx, id, append(luns[id], h.HostContent.ID)))
	}
	assert.Equal(t, before, dump(t, e.sim))
	assert.Len(t, e.srv.AuditWrites(), 6)
}

func TestReloginAfterSessionExpiry(t *testing.T) {
	e := start(t, false)
	c := e.client(t)
	ctx := context.Background()
	require.Equal(t, 1, e.sim.Logins())
	e.sim.ExpireSessions()
	_, err := c.FindHostByName(ctx, "worker-1.cluster.local")
	require.NoError(t, err, "one 401, one re-login, one retry")
	assert.Equal(t, 2, e.sim.Logins())
	var paths []string
	for _, a := range e.srv.Audit() {
		paths = append(paths, a.Method+" "+strings.SplitN(a.Path, "?", 2)[0]+" "+http.StatusText(a.Status))
	}
	assert.Equal(t, []string{
		"GET /api/types/loginSessionInfo OK",
		"GET /api/instances/host/name:worker-1.cluster.local Unauthorized",
		"GET /api/types/loginSessionInfo OK",
		"GET /api/instances/host/name:worker-1.cluster.local OK",
	}, paths)

	// A POST after expiry re-logs in too, and carries the new CSRF token.
	e.sim.ExpireSessions()
	q, err := c.CreateRealTimeMetricsQuery(ctx, []string{"sp.*.storage.lun.*.currentIOCount"}, 5)
	require.NoError(t, err)
	assert.Positive(t, q.Content.ID)
}

func TestBadCredentialsAndCSRF(t *testing.T) {
	e := start(t, false)
	ctx := context.Background()
	c, err := gounity.NewClientWithArgs(ctx, e.url, true)
	require.NoError(t, err)
	err = c.Authenticate(ctx, &gounity.ConfigConnect{Endpoint: e.url, Username: "admin", Password: "wrong"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Unauthenticated")

	// A POST with a session cookie but without the CSRF token is refused.
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar}
	req, _ := http.NewRequest(http.MethodGet, e.url+"/api/types/loginSessionInfo", nil)
	req.SetBasicAuth("admin", "secret")
	req.Header.Set("X-EMC-REST-CLIENT", "true")
	resp, err := hc.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NotEmpty(t, resp.Header.Get("EMC-CSRF-TOKEN"))
	resp, err = hc.Post(e.url+"/api/instances/storageResource/sv_1/action/modifyLun", "application/json", strings.NewReader(`{"lunParameters":{"hostAccess":[]}}`))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	assert.Empty(t, e.srv.AuditWrites())
}

func TestLookupErrors(t *testing.T) {
	e := start(t, false)
	c := e.client(t)
	ctx := context.Background()
	_, err := c.FindHostByName(ctx, "nosuch.cluster.local")
	require.ErrorIs(t, err, gounity.ErrorHostNotFound)
	_, err = c.FindHostByName(ctx, "twin")
	require.ErrorIs(t, err, gounity.ErrorMultipleHostFound)
	_, err = c.FindVolumeByID(ctx, "sv_999")
	require.ErrorIs(t, err, gounity.ErrorVolumeNotFound)
	err = c.ModifyVolumeExport(ctx, "sv_1", []string{"Host_999"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "0x7d13005")
}

func TestHealthSignalsAndMetrics(t *testing.T) {
	e := start(t, false)
	c := e.client(t)
	ctx := context.Background()
	h, err := c.FindHostByName(ctx, "worker-1.cluster.local")
	require.NoError(t, err)
	require.NoError(t, e.sim.SetSignals("worker-1.cluster.local", simcore.Signals{Connected: simcore.Bool(false), IOActive: simcore.Bool(true)}))
	hi, err := c.FindHostInitiatorByID(ctx, h.HostContent.IscsiInitiators[0].ID)
	require.NoError(t, err)
	require.NotEmpty(t, hi.HostInitiatorContent.Health.DescriptionIDs, "never empty: csi-unity indexes [0]")
	assert.NotEqual(t, "ALRT_COMPONENT_OK", hi.HostInitiatorContent.Health.DescriptionIDs[0])

	q, err := c.CreateRealTimeMetricsQuery(ctx, []string{"sp.*.storage.lun.*.currentIOCount"}, 5)
	require.NoError(t, err)
	io := func() int {
		res, err := c.GetMetricsCollection(ctx, q.Content.ID)
		require.NoError(t, err)
		require.Len(t, res.Entries, 1)
		total := 0
		for _, sp := range res.Entries[0].Content.Values {
			for lun, v := range sp.(map[string]any) {
				if lun == "sv_1" {
					total += len(strings.TrimLeft(v.(string), "0"))
				}
			}
		}
		return total
	}
	assert.Zero(t, io(), "a disconnected host does no I/O")
	require.NoError(t, e.sim.SetSignals("worker-1.cluster.local", simcore.Signals{Connected: simcore.Bool(true)}))
	assert.Positive(t, io())
	require.NoError(t, c.DeleteRealTimeMetricsQuery(ctx, q.Content.ID))
	res, err := c.GetMetricsCollection(ctx, q.Content.ID)
	require.NoError(t, err)
	assert.Empty(t, res.Entries, "a deleted query has no results")
	_, err = c.CreateRealTimeMetricsQuery(ctx, []string{"sp.*.bogus"}, 5)
	assert.Error(t, err)
}

func TestFaultsReachTheClient(t *testing.T) {
	e := start(t, false)
	c := e.client(t)
	path := `/api/instances/host/name:worker-1.cluster.local$`
	get := func(timeout time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		_, err := c.FindHostByName(ctx, "worker-1.cluster.local")
		return err
	}
	e.srv.AddFault(simcore.Fault{Kind: simcore.FaultError, Path: path, Status: http.StatusServiceUnavailable, Count: 1})
	err := get(time.Second)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "injected")
	require.NoError(t, get(time.Second))

	e.srv.AddFault(simcore.Fault{Kind: simcore.FaultReset, Path: path, Count: 2})
	require.Error(t, get(time.Second))
	e.srv.AddFault(simcore.Fault{Kind: simcore.FaultMalformed, Path: path, Count: 1})
	require.Error(t, get(time.Second))

	e.srv.AddFault(simcore.Fault{Kind: simcore.FaultHang, Path: path, Count: 1})
	began := time.Now()
	require.ErrorContains(t, get(300*time.Millisecond), "context deadline exceeded")
	assert.Less(t, time.Since(began), 5*time.Second)

	e.srv.AddFault(simcore.Fault{Kind: simcore.FaultError, Path: path, Status: http.StatusUnauthorized, Count: 1})
	require.NoError(t, get(time.Second), "an injected 401 makes the client log in again and retry")
	assert.Equal(t, 2, e.sim.Logins())
}

func TestConcurrentClients(t *testing.T) {
	e := start(t, false)
	before := dump(t, e.sim)
	ctx := context.Background()
	var wg sync.WaitGroup
	// gounity writes a package variable when a client is built: build them
	// all before any is used.
	clients := map[string]gounity.UnityClient{}
	for _, name := range []string{"worker-1.cluster.local", "worker-2.cluster.local"} {
		clients[name] = e.client(t)
	}
	for name, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h, err := c.FindHostByName(ctx, name)
			if !assert.NoError(t, err) {
				return
			}
			for range 5 {
				for i := range 3 {
					lun := "csivol-" + strings.SplitN(name, ".", 2)[0] + "-0" + string(rune('0'+i))
					v, err := c.FindVolumeByName(ctx, lun)
					if !assert.NoError(t, err) {
						return
					}
					assert.NoError(t, c.ModifyVolumeExport(ctx, v.VolumeContent.ResourceID, nil))
				}
				for i := range 3 {
					lun := "csivol-" + strings.SplitN(name, ".", 2)[0] + "-0" + string(rune('0'+i))
					v, err := c.FindVolumeByName(ctx, lun)
					if !assert.NoError(t, err) {
						return
					}
					assert.NoError(t, c.ModifyVolumeExport(ctx, v.VolumeContent.ResourceID, []string{h.HostContent.ID}))
				}
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, before, dump(t, e.sim))
}

// apiClient logs a client of gounity's api package in, as gounity's
// Authenticate does: the hostLUN type has no gounity call, and that
// package is how a gounity user reaches it.
func (e env) apiClient(t testing.TB) api.Client {
	t.Helper()
	ctx := context.Background()
	c, err := api.New(ctx, e.url, api.ClientOptions{Insecure: true}, false)
	require.NoError(t, err)
	resp, err := c.DoAndGetResponseBody(ctx, http.MethodGet, api.UnityAPILoginSessionInfoURI, map[string]string{
		api.AuthorizationHeader: "Basic " + base64.StdEncoding.EncodeToString([]byte("admin:secret")),
		api.XEmcRestClient:      "true",
	}, nil)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode)
	return c
}

type hostLUNEntry struct {
	Content struct {
		ID   string `json:"id"`
		Type int    `json:"type"`
		HLU  int    `json:"hlu"`
		Host struct {
			ID string `json:"id"`
		} `json:"host"`
		LUN struct {
			ID string `json:"id"`
		} `json:"lun"`
		IsReadOnly bool `json:"isReadOnly"`
	} `json:"content"`
}

func getHostLUNs(t *testing.T, c api.Client, filter string) (int, []hostLUNEntry) {
	t.Helper()
	var out struct {
		EntryCount int            `json:"entryCount"`
		Entries    []hostLUNEntry `json:"entries"`
	}
	q := url.Values{"fields": {"id,host,type,hlu,lun,isReadOnly"}, "filter": {filter}}
	err := c.DoWithHeaders(context.Background(), http.MethodGet, "/api/types/hostLUN/instances?"+
		strings.ReplaceAll(q.Encode(), "+", "%20"), map[string]string{api.XEmcRestClient: "true"}, nil, &out)
	require.NoError(t, err)
	return out.EntryCount, out.Entries
}

// TestHostLUNs: the hostLUN objects and a host's hostLUNs field follow
// every LUN's host access, through gounity's api package.
func TestHostLUNs(t *testing.T) {
	e := start(t, true)
	c := e.client(t)
	raw := e.apiClient(t)
	ctx := context.Background()
	h, err := c.FindHostByName(ctx, "worker-1.cluster.local")
	require.NoError(t, err)
	hostID := h.HostContent.ID

	n, hls := getHostLUNs(t, raw, `host.id eq "`+hostID+`"`)
	require.Equal(t, 4, n)
	want := lunsOf(t, c, hostID)
	got := map[string]int{}
	for _, hl := range hls {
		assert.Equal(t, hostID, hl.Content.Host.ID)
		assert.Equal(t, 1, hl.Content.Type, "a LUN, not a snapshot")
		assert.Equal(t, hostID+"_"+hl.Content.LUN.ID+"_prod", hl.Content.ID)
		assert.False(t, hl.Content.IsReadOnly)
		got[hl.Content.LUN.ID] = hl.Content.HLU
	}
	assert.Len(t, got, len(want))
	for lun := range want {
		assert.Contains(t, got, lun)
	}
	assert.Equal(t, 7, got["sv_7"], "the shared LUN's HLU for this host")

	n, hls = getHostLUNs(t, raw, `lun.id eq "sv_7"`)
	assert.Equal(t, 2, n, "the shared LUN: this host and the backup host")
	n, _ = getHostLUNs(t, raw, `host.id eq "`+hostID+`" and lun.id eq "sv_7"`)
	assert.Equal(t, 1, n)
	require.Len(t, hls, 2)

	// The host's hostLUNs field lists the same IDs, when asked for.
	var hostBody struct {
		Content struct {
			HostLUNs []struct {
				ID string `json:"id"`
			} `json:"hostLUNs"`
		} `json:"content"`
	}
	require.NoError(t, raw.DoWithHeaders(ctx, http.MethodGet, "/api/instances/host/"+hostID+"?fields=id,name,hostLUNs",
		map[string]string{api.XEmcRestClient: "true"}, nil, &hostBody))
	assert.Len(t, hostBody.Content.HostLUNs, 4)
	var one struct{ Content hostLUNEntry }
	require.NoError(t, raw.DoWithHeaders(ctx, http.MethodGet, "/api/instances/hostLUN/"+hostBody.Content.HostLUNs[0].ID+"?fields=id,hlu,lun",
		map[string]string{api.XEmcRestClient: "true"}, nil, &one.Content))
	assert.Equal(t, hostBody.Content.HostLUNs[0].ID, one.Content.Content.ID)

	// Taking the host off a LUN takes its hostLUN away.
	require.NoError(t, c.ModifyVolumeExport(ctx, "sv_7", []string{want["sv_7"][0]}))
	n, _ = getHostLUNs(t, raw, `host.id eq "`+hostID+`"`)
	assert.Equal(t, 3, n)
	err = raw.DoWithHeaders(ctx, http.MethodGet, "/api/instances/hostLUN/"+hostID+"_sv_7_prod", map[string]string{api.XEmcRestClient: "true"}, nil, nil)
	require.ErrorContains(t, err, "0x7d13005")

	// Filters the simulator does not know are refused, never ignored.
	var out any
	for _, bad := range []string{`name eq "x"`, `host.id lk "Host_1"`, `host.id eq Host_1`} {
		q := url.Values{"filter": {bad}}
		err = raw.DoWithHeaders(ctx, http.MethodGet, "/api/types/hostLUN/instances?"+strings.ReplaceAll(q.Encode(), "+", "%20"),
			map[string]string{api.XEmcRestClient: "true"}, nil, &out)
		require.Error(t, err, bad)
	}
}

// TestFieldsReturnOnlyTheNamedAttributes: as the array, a query with
// fields returns id and the named attributes only: related resources'
// attributes in dot notation, and a name with gounity's literal '?' read
// as the name before it (Unity REST API Programmer's Guide, "Request
// parameters"). gounity's own calls still decode.
func TestFieldsReturnOnlyTheNamedAttributes(t *testing.T) {
	e := start(t, false)
	c := e.apiClient(t)
	ctx := context.Background()
	get := func(uri string) map[string]any {
		t.Helper()
		var out map[string]any
		require.NoError(t, c.DoWithHeaders(ctx, http.MethodGet, uri, map[string]string{api.XEmcRestClient: "true"}, nil, &out))
		return out
	}
	lun := get("/api/instances/lun/name:shared?fields=name,hostAccess.hlu,originalParentLun?fields,health")
	content, ok := lun["content"].(map[string]any)
	require.True(t, ok, "%v", lun)
	assert.Subset(t, []string{"id", "name", "hostAccess", "health"}, keysOf(content))
	assert.Contains(t, content, "id")
	assert.Contains(t, content, "name")
	assert.NotContains(t, content, "wwn", "not asked for")
	access, ok := content["hostAccess"].([]any)
	require.True(t, ok)
	require.NotEmpty(t, access)
	assert.Equal(t, []string{"hlu"}, keysOf(access[0].(map[string]any)), "only the related attribute asked for")

	list := get("/api/types/host/instances?fields=name")
	entries, ok := list["entries"].([]any)
	require.True(t, ok)
	require.NotEmpty(t, entries)
	for _, en := range entries {
		assert.Subset(t, []string{"id", "name"}, keysOf(en.(map[string]any)["content"].(map[string]any)))
	}

	// gounity's field lists decode as before.
	gc := e.client(t)
	h, err := gc.FindHostByName(ctx, "worker-1.cluster.local")
	require.NoError(t, err)
	assert.NotEmpty(t, h.HostContent.IscsiInitiators)
	v, err := gc.FindVolumeByName(ctx, "shared")
	require.NoError(t, err)
	assert.NotEmpty(t, v.VolumeContent.Wwn)
	assert.Len(t, v.VolumeContent.HostAccessResponse, 2)
}

func keysOf(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
