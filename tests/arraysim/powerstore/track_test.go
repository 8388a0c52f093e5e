package powerstore_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/tests/arraysim/fixture"
	"github.com/fenced-project/fenced/tests/arraysim/powerstore"
	"github.com/fenced-project/fenced/tests/arraysim/simcore/tracktest"
)

// newTrackBed serves a fixture with the audit check on, logged in.
func newTrackBed(t *testing.T, doc string) (*tracktest.Bed, *powerstore.Sim) {
	t.Helper()
	fx, err := fixture.Parse([]byte(doc))
	require.NoError(t, err)
	arr, ok := fx.Array("pstore-1")
	require.True(t, ok)
	sim, err := powerstore.New(&arr.Spec, fx.Nodes)
	require.NoError(t, err)
	b := tracktest.New(t, "pstore-1", sim)
	req := httptest.NewRequest(http.MethodGet, powerstore.APIPrefix+"login_session", nil)
	req.SetBasicAuth(powerstore.DefaultUsername, powerstore.DefaultPassword)
	w := httptest.NewRecorder()
	b.Srv.ServeHTTP(w, req)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	b.Header.Set("DELL-EMC-TOKEN", w.Header().Get("DELL-EMC-TOKEN"))
	for _, c := range w.Result().Cookies() {
		b.Header.Add("Cookie", c.Name+"="+c.Value)
	}
	return b, sim
}

func call(method, path, body string) tracktest.Call {
	return tracktest.Call{Method: method, Path: powerstore.APIPrefix + path, Body: body}
}

// TestTrackedAuditOfEveryWriteRoute drives every write the simulator
// serves (host, host group, volume and mapping edits of fenced and
// csi-powerstore; file systems and NFS exports), refused ones too, with
// signals and SetExportHosts in between: the tracked audit of each is
// what full snapshots give. The array starts with no file system, so the
// first one adds the Snapshot's fileSystems member.
func TestTrackedAuditOfEveryWriteRoute(t *testing.T) {
	b, sim := newTrackBed(t, testFixture)
	st := sim.State()
	byName := map[string]string{}
	for _, h := range st.Hosts {
		byName[h.Name] = h.ID
	}
	require.Len(t, st.HostGroups, 1)
	group := st.HostGroups[0].ID
	legacy := byName["legacy-host"]
	var w1, w2 string
	for name, id := range byName {
		if name != "legacy-host" && w1 == "" {
			w1 = id
		} else if name != "legacy-host" {
			w2 = id
		}
	}
	var vol string
	for _, m := range st.Mappings {
		if m.HostID == w1 {
			vol = m.VolumeID
		}
	}
	var w1Ports []string
	for _, h := range st.Hosts {
		if h.ID == w1 {
			for _, in := range h.Initiators {
				w1Ports = append(w1Ports, in.PortName)
			}
		}
	}
	ports, _ := json.Marshal(w1Ports)
	var add []map[string]string
	for _, p := range w1Ports {
		typ := "iSCSI"
		if len(p) == 23 {
			typ = "FC"
		}
		add = append(add, map[string]string{"port_name": p, "port_type": typ})
	}
	adds, _ := json.Marshal(add)

	must := []tracktest.Call{
		call(http.MethodPatch, "host/"+w1, `{"remove_initiators":`+string(ports)+`}`),
		call(http.MethodPatch, "host/"+w1, `{"add_initiators":`+string(adds)+`}`),
		call(http.MethodPost, "host/"+w1+"/detach", `{"volume_id":"`+vol+`"}`),
		call(http.MethodPost, "host/"+w1+"/attach", `{"volume_id":"`+vol+`","logical_unit_number":9}`),
		call(http.MethodPost, "host/"+w2+"/attach", `{"volume_id":"`+vol+`"}`),
		call(http.MethodPatch, "host/"+w2, `{"name":"aaa-renamed","description":"moved first"}`),
		call(http.MethodPatch, "host_group/"+group, `{"remove_host_ids":["`+legacy+`"]}`),
		call(http.MethodPatch, "host_group/"+group, `{"add_host_ids":["`+legacy+`","`+w2+`"],"name":"hg-renamed"}`),
		call(http.MethodPost, "host_group/"+group+"/attach", `{"volume_id":"`+vol+`"}`),
		call(http.MethodPost, "host_group/"+group+"/detach", `{"volume_id":"`+vol+`"}`),
		call(http.MethodPost, "volume", `{"name":"pvc-1","size":1073741824}`),
		call(http.MethodPost, "host", `{"name":"csi-node-new-127.0.10.9","os_type":"Linux",`+
			`"initiators":[{"port_name":"iqn.1994-05.com.redhat:new","port_type":"iSCSI"}]}`),
	}
	for _, c := range must {
		b.Must(t, c)
	}
	b.Signals(t, legacy, false, true)
	refused := []tracktest.Call{
		call(http.MethodPatch, "host/"+w1, `{"remove_initiators":["iqn.none"]}`),
		call(http.MethodPost, "host/"+w1+"/attach", `{"volume_id":"`+vol+`"}`),
		call(http.MethodPost, "host/"+w1+"/detach", `{"volume_id":"nope"}`),
		call(http.MethodPatch, "host_group/"+group, `{"add_host_ids":["`+w1+`","nope"]}`),
		call(http.MethodPost, "volume", `{"name":"pvc-1","size":1073741824}`),
		call(http.MethodPost, "host", `{"name":"other","os_type":"Linux","initiators":[{"port_name":"iqn.1994-05.com.redhat:new","port_type":"iSCSI"}]}`),
	}
	for _, c := range refused {
		b.Do(t, c)
	}

	// File systems and NFS exports, as csi-powerstore creates and
	// publishes them and fenced edits them.
	nas := b.Must(t, call(http.MethodGet, "nas_server?name=eq."+powerstore.DefaultNASName, ""))
	var servers []struct{ ID string }
	require.NoError(t, json.Unmarshal(nas.Body.Bytes(), &servers))
	require.NotEmpty(t, servers)
	w := b.Must(t, call(http.MethodPost, "file_system", `{"name":"fs-1","nas_server_id":"`+servers[0].ID+`","size_total":3221225472}`))
	var fs struct{ ID string }
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &fs))
	w = b.Must(t, call(http.MethodPost, "nfs_export", `{"name":"fs-1","file_system_id":"`+fs.ID+`","path":"/fs-1"}`))
	var x struct{ ID string }
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &x))
	for _, body := range []string{
		`{"add_read_write_root_hosts":["127.0.10.1"],"is_no_SUID":false}`,
		`{"add_read_only_hosts":["10.9.0.0/24"],"default_access":"Read_Only","is_no_SUID":true}`,
		`{"remove_read_write_root_hosts":["127.0.10.1/255.255.255.255"],"is_no_SUID":true}`,
		`{"no_access_hosts":["127.0.10.3"],"is_no_SUID":true}`,
	} {
		b.Must(t, call(http.MethodPatch, "nfs_export/"+x.ID, body))
	}
	b.Do(t, call(http.MethodPatch, "nfs_export/"+x.ID, `{"remove_read_only_hosts":["127.0.10.9"]}`))
	require.NoError(t, sim.SetExportHosts("fs-1", "read_write_hosts", []string{"127.0.10.7"}))
	b.Must(t, call(http.MethodPatch, "nfs_export/"+x.ID, `{"add_read_write_hosts":["127.0.10.8"]}`))
	// metrics/generate is a query, outside the comparison.
	b.Must(t, call(http.MethodPost, "metrics/generate", `{"entity":"performance_metrics_by_volume","entity_id":"`+vol+`","interval":"Twenty_Sec"}`))
	b.RequireAuditsMatch(t, len(must)+7)
}

// TestTrackedAuditOfRandomWrites replays a random mix of initiator,
// mapping, group and export edits on random objects.
func TestTrackedAuditOfRandomWrites(t *testing.T) {
	b, sim := newTrackBed(t, nfsFixture)
	st := sim.State()
	var hosts, vols, exports []string
	ports := map[string]string{}
	for _, h := range st.Hosts {
		hosts = append(hosts, h.ID)
		for _, in := range h.Initiators {
			ports[in.PortName] = in.PortType
		}
	}
	for _, v := range st.Volumes {
		vols = append(vols, v.ID)
	}
	for _, x := range st.NFSExports {
		exports = append(exports, x.ID)
	}
	group := st.HostGroups[0].ID
	var portNames []string
	for p := range ports {
		portNames = append(portNames, p)
	}
	pick := func(rng *rand.Rand, l []string) string { return l[rng.IntN(len(l))] }
	n := 0
	b.Random(t, 2, 400, func(rng *rand.Rand) tracktest.Call {
		n++
		if n%40 == 0 {
			b.Signals(t, pick(rng, hosts), rng.IntN(2) == 0, rng.IntN(2) == 0)
		}
		h := pick(rng, hosts)
		switch rng.IntN(7) {
		case 0, 1:
			return call(http.MethodPost, "host/"+h+"/"+pick(rng, []string{"attach", "detach"}), `{"volume_id":"`+pick(rng, vols)+`"}`)
		case 2:
			p := pick(rng, portNames)
			if rng.IntN(2) == 0 {
				return call(http.MethodPatch, "host/"+h, `{"remove_initiators":["`+p+`"]}`)
			}
			return call(http.MethodPatch, "host/"+h, fmt.Sprintf(`{"add_initiators":[{"port_name":%q,"port_type":%q}]}`, p, ports[p]))
		case 3:
			op := pick(rng, []string{"add_host_ids", "remove_host_ids"})
			return call(http.MethodPatch, "host_group/"+group, `{"`+op+`":["`+h+`"]}`)
		case 4:
			return call(http.MethodPost, "host_group/"+group+"/"+pick(rng, []string{"attach", "detach"}), `{"volume_id":"`+pick(rng, vols)+`"}`)
		case 5:
			if rng.IntN(4) == 0 {
				return call(http.MethodPatch, "host/"+h, fmt.Sprintf(`{"name":"host-%d"}`, rng.IntN(10)))
			}
			fallthrough
		default:
			op := pick(rng, []string{"add_", "remove_"})
			list := pick(rng, []string{"read_write_root_hosts", "read_only_hosts", "no_access_hosts"})
			host := pick(rng, []string{"127.0.10.1", "127.0.10.2/255.255.255.255", "10.9.0.0/24", "node-x"})
			return call(http.MethodPatch, "nfs_export/"+pick(rng, exports), fmt.Sprintf(`{"%s%s":[%q]}`, op, list, host))
		}
	})
	b.RequireAuditsMatch(t, 100)
}
