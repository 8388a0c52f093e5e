package unity_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/tests/arraysim/fixture"
	"github.com/fenced-project/fenced/tests/arraysim/simcore/tracktest"
	"github.com/fenced-project/fenced/tests/arraysim/unity"
)

// newTrackBed serves a fixture with the audit check on, logged in with a
// session and its CSRF token.
func newTrackBed(t *testing.T, doc string) (*tracktest.Bed, *unity.Sim) {
	t.Helper()
	fx, err := fixture.Parse([]byte(doc))
	require.NoError(t, err)
	sim, err := unity.New(&fx.Arrays[0].Spec, fx.Nodes)
	require.NoError(t, err)
	b := tracktest.New(t, "unity-1", sim)
	req := httptest.NewRequest(http.MethodGet, "/api/types/loginSessionInfo", nil)
	req.SetBasicAuth("admin", "secret")
	req.Header.Set("X-EMC-REST-CLIENT", "true")
	w := httptest.NewRecorder()
	b.Srv.ServeHTTP(w, req)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	b.Header.Set("EMC-CSRF-TOKEN", w.Header().Get("EMC-CSRF-TOKEN"))
	for _, c := range w.Result().Cookies() {
		b.Header.Add("Cookie", c.Name+"="+c.Value)
	}
	return b, sim
}

func post(path, body string) tracktest.Call {
	return tracktest.Call{Method: http.MethodPost, Path: "/api/" + path, Body: body}
}

func modifyLun(lun string, hosts ...string) tracktest.Call {
	access := ""
	for i, h := range hosts {
		if i > 0 {
			access += ","
		}
		access += `{"host":{"id":"` + h + `"},"accessMask":"1"}`
	}
	return post("instances/storageResource/"+lun+"/action/modifyLun", `{"lunParameters":{"hostAccess":[`+access+`]}}`)
}

func modifyFS(res, body string) tracktest.Call {
	return post("instances/storageResource/"+res+"/action/modifyFilesystem", body)
}

// TestTrackedAuditOfEveryWriteRoute drives every write the simulator
// serves (modifyLun as fenced and csi-unity send it, LUN and file system
// creation, NFS share creation, host list edits and deletion), refused
// ones too, with signals in between: the tracked audit of each is what
// full snapshots give. LUN IDs past sv_9 check the Host_2-before-Host_10
// order.
func TestTrackedAuditOfEveryWriteRoute(t *testing.T) {
	b, sim := newTrackBed(t, nfsFixtureDoc)
	w1, err := sim.HostID("worker-1.cluster.local")
	require.NoError(t, err)
	w2, err := sim.HostID("worker-2.cluster.local")
	require.NoError(t, err)
	backup, err := sim.HostID("backup")
	require.NoError(t, err)
	must := []tracktest.Call{
		modifyLun("sv_1"),
		modifyLun("sv_1", w1),
		modifyLun("sv_1", w1, w2),
		modifyLun("sv_7", backup),
		post("types/storageResource/action/createLun", `{"name":"csivol-new-1","lunParameters":{"pool":{"id":"pool_1"},"size":8589934592}}`),
		post("types/storageResource/action/createLun", `{"name":"csivol-new-2","lunParameters":{"pool":{"id":"pool_1"},"size":"8589934592","isThinEnabled":"true"}}`),
		post("types/storageResource/action/createLun", `{"name":"csivol-new-3","lunParameters":{"pool":{"id":"pool_1"},"size":8589934592}}`),
		post("types/storageResource/action/createLun", `{"name":"csivol-new-4","lunParameters":{"pool":{"id":"pool_1"},"size":8589934592}}`),
		modifyLun("sv_10", w2),
		post("types/storageResource/action/createFilesystem", `{"name":"csivol-nfs-3","fsParameters":{"pool":{"id":"pool_1"},`+
			`"nasServer":{"id":"nas_1"},"supportedProtocols":0,"size":3221225472}}`),
		modifyFS("res_3", `{"nfsShareCreate":[{"name":"csishare-csivol-nfs-3","path":"/","nfsShareParameters":{"defaultAccess":"0",`+
			`"rootAccessHosts":[{"id":"`+w1+`"}]}}]}`),
		modifyFS("res_3", `{"nfsShareModify":[{"nfsShare":{"id":"NFSShare_2"},"nfsShareParameters":{"rootAccessHosts":[{"id":"`+w1+`"},{"id":"`+w2+`"}]}}]}`),
		modifyFS("res_1", `{"nfsShareModify":[{"nfsShare":{"id":"NFSShare_1"},"nfsShareParameters":{"rootAccessHosts":[],"readWriteHosts":[{"id":"`+w2+`"}]}}]}`),
		modifyFS("res_1", `{"description":"edited"}`),
		modifyFS("res_3", `{"nfsShareDelete":[{"nfsShare":{"id":"NFSShare_2"}}]}`),
	}
	for _, c := range must {
		b.Must(t, c)
	}
	b.Signals(t, w1, false, true)
	b.Signals(t, "backup", true, false)
	refused := []tracktest.Call{
		modifyLun("sv_1", w1, w2), // nothing to modify
		modifyLun("sv_1", "Host_99"),
		modifyLun("sv_99", w1),
		post("types/storageResource/action/createLun", `{"name":"csivol-new-1","lunParameters":{"pool":{"id":"pool_1"},"size":8589934592}}`),
		modifyFS("res_1", `{"nfsShareModify":[{"nfsShare":{"id":"NFSShare_9"}}]}`),
		modifyFS("res_9", `{"description":"x"}`),
	}
	for _, c := range refused {
		b.Do(t, c)
	}
	// Real-time metric queries are queries, outside the comparison.
	b.Must(t, post("types/metricRealTimeQuery/instances", `{"paths":["sp.*.storage.lun.*.currentIOCount"],"interval":5}`))
	b.RequireAuditsMatch(t, len(must))
}

// TestTrackedAuditOfRandomWrites replays a random mix of host access
// changes, LUN creations and share host list edits.
func TestTrackedAuditOfRandomWrites(t *testing.T) {
	b, sim := newTrackBed(t, nfsFixtureDoc)
	var hosts []string
	for _, name := range []string{"worker-1.cluster.local", "worker-2.cluster.local", "backup", "twin-ro"} {
		id, err := sim.HostID(name)
		require.NoError(t, err)
		hosts = append(hosts, id)
	}
	lists := []string{"readOnlyHosts", "readWriteHosts", "readOnlyRootAccessHosts", "rootAccessHosts"}
	n := 0
	b.Random(t, 5, 400, func(rng *rand.Rand) tracktest.Call {
		n++
		if n%40 == 0 {
			b.Signals(t, hosts[rng.IntN(len(hosts))], rng.IntN(2) == 0, rng.IntN(2) == 0)
		}
		var some []string
		for _, i := range rng.Perm(len(hosts))[:rng.IntN(3)] {
			some = append(some, hosts[i])
		}
		switch rng.IntN(6) {
		case 0:
			return post("types/storageResource/action/createLun",
				fmt.Sprintf(`{"name":"csivol-r%d","lunParameters":{"pool":{"id":"pool_1"},"size":8589934592}}`, rng.IntN(40)))
		case 1, 2:
			refs := "["
			for i, h := range some {
				if i > 0 {
					refs += ","
				}
				refs += `{"id":"` + h + `"}`
			}
			return modifyFS("res_1", fmt.Sprintf(`{"nfsShareModify":[{"nfsShare":{"id":"NFSShare_1"},"nfsShareParameters":{%q:%s]}}]}`,
				lists[rng.IntN(len(lists))], refs))
		default:
			return modifyLun(fmt.Sprintf("sv_%d", 1+rng.IntN(12)), some...)
		}
	})
	b.RequireAuditsMatch(t, 100)
}
