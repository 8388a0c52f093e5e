package families_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/tests/arraysim/families"
	"github.com/fenced-project/fenced/tests/arraysim/fixture"
	"github.com/fenced-project/fenced/tests/arraysim/simcore"
)

// scaleNodes is how many nodes the scale benchmarks generate, and
// scaleVolumes how many volumes (exports, LUNs) each has.
const (
	scaleNodes   = 1000
	scaleVolumes = 12
)

// scaleFixture is a fixture of scaleNodes nodes with every identity a
// family needs, and the one array given (a YAML flow mapping).
func scaleFixture(array string) string {
	var doc strings.Builder
	doc.WriteString("nodes:\n")
	for i := range scaleNodes {
		fmt.Fprintf(&doc, "  - {name: n%04d, ip: 127.1.%d.%d, fqdn: n%04d.cluster.local, machineID: %032x, "+
			"sdcGUID: 6A1B%04X-0000-4000-8000-%012X, iqn: \"iqn.1994-05.com.redhat:n%04d\"}\n",
			i, i/250, i%250+1, i, i+1, i, i, i)
	}
	doc.WriteString("arrays:\n  - " + array + "\n")
	return doc.String()
}

// call is one request to a simulator, served in-process.
type call struct {
	method, path, body string
	header             http.Header
}

// serve sends c to srv and returns the recorded answer.
func serve(srv *simcore.Server, c call) *httptest.ResponseRecorder {
	r := httptest.NewRequest(c.method, c.path, strings.NewReader(c.body))
	for k, v := range c.header {
		r.Header[k] = v
	}
	w := httptest.NewRecorder()
	srv.ServeHTTP(w, r)
	return w
}

// scaleCase is one family's benchmark: its array and a setup that logs in
// and returns a write and the write that undoes it (a fence and its
// unfence of one volume or host).
type scaleCase struct {
	family string
	array  string
	setup  func(tb testing.TB, srv *simcore.Server, fx *fixture.Fixture) (do, undo call)
}

var scaleCases = []scaleCase{
	{
		family: fixture.PowerFlex,
		array:  fmt.Sprintf("{name: pflex-1, family: powerflex, spec: {perNode: {volumes: %d}}}", scaleVolumes),
		setup: func(tb testing.TB, srv *simcore.Server, fx *fixture.Fixture) (call, call) {
			login := call{method: http.MethodGet, path: "/api/login", header: http.Header{}}
			req := httptest.NewRequest(login.method, login.path, nil)
			req.SetBasicAuth("admin", "Password123!")
			login.header = req.Header
			w := serve(srv, login)
			require.Equal(tb, http.StatusOK, w.Code, w.Body.String())
			var token string
			require.NoError(tb, json.Unmarshal(w.Body.Bytes(), &token))
			h := http.Header{"Authorization": {"Bearer " + token}, "Content-Type": {"application/json"}}
			st := stateOf(tb, srv)
			sdc := findID(tb, st["sdcs"], "name", fx.Nodes[500].Name, "id")
			vol := findID(tb, st["volumes"], "name", fx.Nodes[500].Name+"-vol-0", "id")
			path := "/api/instances/Volume::" + vol + "/action/"
			return call{http.MethodPost, path + "removeMappedSdc", `{"sdcId":"` + sdc + `"}`, h},
				call{http.MethodPost, path + "addMappedSdc", `{"sdcId":"` + sdc + `","allowMultipleMappings":"TRUE"}`, h}
		},
	},
	{
		family: fixture.PowerStore,
		array:  fmt.Sprintf("{name: pstore-1, family: powerstore, spec: {perNode: {volumes: %d}}}", scaleVolumes),
		setup: func(tb testing.TB, srv *simcore.Server, fx *fixture.Fixture) (call, call) {
			req := httptest.NewRequest(http.MethodGet, "/api/rest/login_session", nil)
			req.SetBasicAuth("admin", "Password123!")
			w := httptest.NewRecorder()
			srv.ServeHTTP(w, req)
			require.Equal(tb, http.StatusOK, w.Code, w.Body.String())
			h := http.Header{"Dell-Emc-Token": {w.Header().Get("DELL-EMC-TOKEN")}, "Content-Type": {"application/json"}}
			for _, c := range w.Result().Cookies() {
				h.Add("Cookie", c.Name+"="+c.Value)
			}
			st := stateOf(tb, srv)
			host := findID(tb, st["hosts"], "name", fx.Nodes[500].CSINodeIDs("")[fixture.DriverPowerStore], "id")
			vol := findID(tb, st["mappings"], "hostId", host, "volumeId")
			path := "/api/rest/host/" + host + "/"
			return call{http.MethodPost, path + "detach", `{"volume_id":"` + vol + `"}`, h},
				call{http.MethodPost, path + "attach", `{"volume_id":"` + vol + `"}`, h}
		},
	},
	{
		family: fixture.PowerScale,
		array:  fmt.Sprintf("{name: pscale-1, family: powerscale, spec: {perNode: {exports: %d}}}", scaleVolumes),
		setup: func(tb testing.TB, srv *simcore.Server, fx *fixture.Fixture) (call, call) {
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			req.SetBasicAuth("admin", "Password123!")
			h := http.Header{"Authorization": req.Header["Authorization"], "Content-Type": {"application/json"}}
			id := 500*scaleVolumes + 1 // the first export of node 500
			path := fmt.Sprintf("/platform/2/protocols/nfs/exports/%d", id)
			return call{http.MethodPut, path, `{"clients":["localhost","127.0.0.1"]}`, h},
				call{http.MethodPut, path, `{"clients":["localhost","127.0.0.1","` + fx.Nodes[500].FQDN + `"]}`, h}
		},
	},
	{
		family: fixture.PowerMax,
		array: fmt.Sprintf("{name: pmax-1, family: powermax, spec: {symmetrixID: \"000197900046\", "+
			"generate: {clusterPrefix: TST, volumesPerNode: %d}}}", scaleVolumes),
		setup: func(tb testing.TB, srv *simcore.Server, fx *fixture.Fixture) (call, call) {
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			req.SetBasicAuth("smc", "smc")
			h := http.Header{"Authorization": req.Header["Authorization"], "Content-Type": {"application/json"}}
			path := "/univmax/restapi/100/sloprovisioning/symmetrix/000197900046/host/csi-node-TST-" + fx.Nodes[500].Name
			edit := func(param string) string {
				return `{"editHostActionParam":{"` + param + `":{"initiator":["` + fx.Nodes[500].IQN + `"]}},"executionOption":"SYNCHRONOUS"}`
			}
			return call{http.MethodPut, path, edit("removeInitiatorParam"), h},
				call{http.MethodPut, path, edit("addInitiatorParam"), h}
		},
	},
	{
		family: fixture.Unity,
		array:  fmt.Sprintf("{name: unity-1, family: unity, spec: {generate: {lunsPerNode: %d}}}", scaleVolumes),
		setup: func(tb testing.TB, srv *simcore.Server, fx *fixture.Fixture) (call, call) {
			req := httptest.NewRequest(http.MethodGet, "/api/types/loginSessionInfo", nil)
			req.SetBasicAuth("admin", "Password123!")
			req.Header.Set("X-EMC-REST-CLIENT", "true")
			w := httptest.NewRecorder()
			srv.ServeHTTP(w, req)
			require.Equal(tb, http.StatusOK, w.Code, w.Body.String())
			h := http.Header{"Emc-Csrf-Token": {w.Header().Get("EMC-CSRF-TOKEN")}, "Content-Type": {"application/json"}}
			for _, c := range w.Result().Cookies() {
				h.Add("Cookie", c.Name+"="+c.Value)
			}
			st := stateOf(tb, srv)
			host := findID(tb, st["hosts"], "name", fx.Nodes[500].Name, "id")
			lun := findID(tb, st["luns"], "name", "csivol-"+fx.Nodes[500].Name+"-00", "id")
			path := "/api/instances/storageResource/" + lun + "/action/modifyLun"
			return call{http.MethodPost, path, `{"lunParameters":{"hostAccess":[]}}`, h},
				call{http.MethodPost, path, `{"lunParameters":{"hostAccess":[{"host":{"id":"` + host + `"},"accessMask":1}]}}`, h}
		},
	},
}

// stateOf is the simulator's snapshot as generic JSON.
func stateOf(tb testing.TB, srv *simcore.Server) map[string][]map[string]any {
	tb.Helper()
	b, err := json.Marshal(srv.Family().Snapshot())
	require.NoError(tb, err)
	var st map[string]json.RawMessage
	require.NoError(tb, json.Unmarshal(b, &st))
	out := map[string][]map[string]any{}
	for k, raw := range st {
		var list []map[string]any
		if json.Unmarshal(raw, &list) == nil {
			out[k] = list
		}
	}
	return out
}

// findID returns field want of the one object whose field key is value.
func findID(tb testing.TB, list []map[string]any, key, value, want string) string {
	tb.Helper()
	for _, o := range list {
		if fmt.Sprint(o[key]) == value {
			return fmt.Sprint(o[want])
		}
	}
	require.Failf(tb, "not found", "no object with %s %q", key, value)
	return ""
}

// BenchmarkAuditedWriteAtScale measures one audited write on an array of
// 1,000 hosts with 12 volumes (exports, LUNs) each, served in-process: a
// fence write and its undo alternate, each one op. It is what the audit
// costs per write at the storm benchmark's scale.
func BenchmarkAuditedWriteAtScale(b *testing.B) {
	for _, sc := range scaleCases {
		b.Run(sc.family, func(b *testing.B) {
			fx, err := fixture.Parse([]byte(scaleFixture(sc.array)))
			require.NoError(b, err)
			fam, err := families.New(fx.Arrays[0], fx.Nodes)
			require.NoError(b, err)
			srv := simcore.New(fx.Arrays[0].Name, fam, nil)
			do, undo := sc.setup(b, srv, fx)
			// One write of each before timing, so one-off costs are out.
			for _, c := range []call{do, undo} {
				w := serve(srv, c)
				require.Less(b, w.Code, 300, w.Body.String())
			}
			i := 0
			for b.Loop() {
				c := do
				if i%2 == 1 {
					c = undo
				}
				i++
				if w := serve(srv, c); w.Code >= 300 {
					b.Fatalf("%s %s: %d %s", c.method, c.path, w.Code, w.Body.String())
				}
			}
			b.StopTimer()
			writes := srv.AuditWrites()
			require.GreaterOrEqual(b, len(writes), i, "every write changed the array")
		})
	}
}
