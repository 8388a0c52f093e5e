package powerflex_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/tests/arraysim/fixture"
	"github.com/fenced-project/fenced/tests/arraysim/powerflex"
	"github.com/fenced-project/fenced/tests/arraysim/simcore/tracktest"
)

const trackFixture = `
nodes:
  - {name: worker-1, ip: 127.0.10.1, sdcGUID: 6A1B0001-0000-4000-8000-000000000001}
  - {name: worker-2, ip: 127.0.10.2, sdcGUID: 6A1B0002-0000-4000-8000-000000000002}
  - {name: worker-3, ip: 127.0.10.3, sdcGUID: 6A1B0003-0000-4000-8000-000000000003}
  - {name: worker-4, ip: 127.0.10.4, nvmeHost: 127.0.10.4-4f2d9b1c7e0a5d3b8c6, nqn: "nqn.2014-08.org.nvmexpress:uuid:worker-4"}
arrays:
  - name: pflex-1
    family: powerflex
    spec:
      systems: [{id: 1a2b3c4d5e6f7a8b, name: sys-1}, {id: 2a2b3c4d5e6f7a8b, name: sys-2}]
      perNode: {volumes: 3, limitIops: 500, limitBwInMbps: 10}
      volumes:
        - name: shared-vol
          mappings:
            - {sdc: worker-1, accessMode: ReadOnly}
            - {sdc: worker-2, accessMode: ReadOnly}
      fileSystems:
        - name: fs-listed
          export:
            readWriteRootHosts: [127.0.10.2/255.255.255.255, 127.0.10.9]
        - name: fs-bare
`

// newTrackBed serves the fixture with the audit check on, logged in.
func newTrackBed(t *testing.T) (*tracktest.Bed, *powerflex.Sim) {
	t.Helper()
	fx, err := fixture.Parse([]byte(trackFixture))
	require.NoError(t, err)
	sim, err := powerflex.New(&fx.Arrays[0].Spec, fx.Nodes)
	require.NoError(t, err)
	b := tracktest.New(t, "pflex-1", sim)
	req := httptest.NewRequest(http.MethodGet, "/api/login", nil)
	req.SetBasicAuth(powerflex.DefaultUsername, powerflex.DefaultPassword)
	w := httptest.NewRecorder()
	b.Srv.ServeHTTP(w, req)
	require.Equal(t, http.StatusOK, w.Code)
	var token string
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &token))
	b.Header.Set("Authorization", "Bearer "+token)
	return b, sim
}

// TestTrackedAuditOfEveryWriteRoute drives every write the simulator
// serves (the mapping actions of goscaleio and csi-vxflexos, volume
// creation, the file API), refused ones too, and signals in between: the
// tracked audit of each is what full snapshots give.
func TestTrackedAuditOfEveryWriteRoute(t *testing.T) {
	b, sim := newTrackBed(t)
	sdc1, _ := sim.SDCID("worker-1")
	sdc2, _ := sim.SDCID("worker-2")
	nvme, _ := sim.SDCID("127.0.10.4-4f2d9b1c7e0a5d3b8c6")
	own, _ := sim.VolumeID("worker-1-vol-0")
	shared, _ := sim.VolumeID("shared-vol")
	nvmeVol, _ := sim.VolumeID("worker-4-vol-0")
	act := func(vol, name, body string) tracktest.Call {
		return tracktest.Call{Method: http.MethodPost, Path: "/api/instances/Volume::" + vol + "/action/" + name, Body: body}
	}
	must := []tracktest.Call{
		act(own, "removeMappedSdc", `{"sdcId":"`+sdc1+`","ignoreScsiInitiators":"TRUE"}`),
		act(own, "addMappedSdc", `{"sdcId":"`+sdc1+`","allowMultipleMappings":"TRUE","accessMode":"ReadWrite"}`),
		act(own, "setMappedSdcLimits", `{"sdcId":"`+sdc1+`","iopsLimit":"100","bandwidthLimitInKbps":"2048"}`),
		act(own, "addMappedSdc", `{"sdcId":"`+sdc2+`","allowMultipleMappings":"TRUE","accessMode":"ReadOnly"}`),
		act(shared, "removeMappedSdc", `{"allSdcs":"TRUE"}`),
		act(shared, "addMappedSdc", `{"sdcId":"`+sdc2+`"}`),
		act(nvmeVol, "removeMappedHost", `{"hostId":"`+nvme+`"}`),
		act(nvmeVol, "addMappedHost", `{"hostId":"`+nvme+`","allowMultipleMappings":"FALSE"}`),
		act(nvmeVol, "addMappedHost", `{"hostId":"`+sdc1+`","allowMultipleMappings":"TRUE"}`),
		act(nvmeVol, "removeMappedHost", `{"allHosts":"TRUE"}`),
		{Method: http.MethodPost, Path: "/api/types/Volume/instances",
			Body: `{"storagePoolId":"` + poolOf(t, b, 1) + `","name":"pvc-new","volumeSizeInKb":"8388608","volumeType":"ThinProvisioned"}`},
	}
	for _, c := range must {
		b.Must(t, c)
	}
	b.Signals(t, "worker-3", false, false)
	refused := []tracktest.Call{
		act(own, "addMappedSdc", `{"sdcId":"`+sdc1+`"}`),
		act(own, "removeMappedSdc", `{"sdcId":"`+sdc1+`"}`), // then refused below
		act(own, "removeMappedSdc", `{"sdcId":"`+sdc1+`"}`),
		act(own, "setMappedSdcLimits", `{"sdcId":"`+sdc2+`","bandwidthLimitInKbps":"1000"}`),
		act(own, "addMappedSdc", `{"sdcId":"nosuchsdc00000000"}`),
		act("0000000000000000", "addMappedSdc", `{"sdcId":"`+sdc1+`"}`),
		{Method: http.MethodPost, Path: "/api/types/Volume/instances",
			Body: `{"storagePoolId":"` + poolOf(t, b, 1) + `","name":"pvc-new","volumeSizeInKb":"8"}`},
	}
	for _, c := range refused {
		b.Do(t, c)
	}

	// The file API: a file system, its export, and every kind of edit.
	fsBody := fmt.Sprintf(`{"name":"fs-new","size_total":3221225472,"storage_pool_id":%q,"nas_server_id":%q}`,
		poolOf(t, b, 0), nasOf(t, b, 0))
	w := b.Must(t, tracktest.Call{Method: http.MethodPost, Path: "/rest/v1/file-systems", Body: fsBody})
	var created struct{ ID string }
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &created))
	w = b.Must(t, tracktest.Call{Method: http.MethodPost, Path: "/rest/v1/nfs-exports",
		Body: `{"name":"csishare-fs-new","file_system_id":"` + created.ID + `","path":"/fs-new","read_write_root_hosts":["127.0.10.1"]}`})
	var export struct{ ID string }
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &export))
	listed, ok := sim.FileSystemID("fs-listed")
	require.True(t, ok)
	old, ok := sim.ExportOf(listed)
	require.True(t, ok)
	for _, body := range []string{
		`{"add_read_write_root_hosts":["127.0.10.2"]}`,
		`{"remove_read_write_root_hosts":["127.0.10.1/255.255.255.255"]}`,
		`{"read_only_hosts":["127.0.10.3","10.1.0.0/16"],"default_access":"Read_Only"}`,
		`{"description":"nothing stored"}`,
	} {
		b.Must(t, tracktest.Call{Method: http.MethodPatch, Path: "/rest/v1/nfs-exports/" + export.ID, Body: body})
	}
	b.Must(t, tracktest.Call{Method: http.MethodPatch, Path: "/rest/v1/nfs-exports/" + old.ID,
		Body: `{"remove_read_write_root_hosts":["127.0.10.9"]}`})
	b.Do(t, tracktest.Call{Method: http.MethodPatch, Path: "/rest/v1/nfs-exports/" + old.ID, Body: `{"bogus_hosts":[]}`})
	b.Do(t, tracktest.Call{Method: http.MethodPost, Path: "/rest/v1/file-systems", Body: fsBody})
	// Queries are served as reads, outside the audit's comparison.
	b.Must(t, tracktest.Call{Method: http.MethodPost, Path: "/api/types/Sdc/instances/action/queryIdByKey", Body: `{"name":"worker-1"}`})
	b.Must(t, tracktest.Call{Method: http.MethodPost, Path: "/api/instances/Sdc::" + sdc1 + "/action/queryVolumeSdcBwc", Body: `{}`})
	b.RequireAuditsMatch(t, len(must)+7)
}

// TestTrackedAuditOfRandomWrites replays a random mix of mapping actions,
// creations and export edits on random objects.
func TestTrackedAuditOfRandomWrites(t *testing.T) {
	b, sim := newTrackBed(t)
	st := sim.State()
	var sdcs, vols, exports []string
	for _, c := range st.SDCs {
		sdcs = append(sdcs, c.ID)
	}
	for _, v := range st.Volumes {
		vols = append(vols, v.ID)
	}
	for _, x := range st.NFSExports {
		exports = append(exports, x.ID)
	}
	pool := poolOf(t, b, 0)
	hosts := []string{"127.0.10.1", "127.0.10.2/24", "127.0.10.3/255.255.255.255", "nodeX"}
	lists := []string{"read_write_root_hosts", "read_only_hosts", "no_access_hosts"}
	pick := func(rng *rand.Rand, l []string) string { return l[rng.IntN(len(l))] }
	n := 0
	b.Random(t, 1, 400, func(rng *rand.Rand) tracktest.Call {
		n++
		if n%40 == 0 {
			b.Signals(t, pick(rng, sdcs), rng.IntN(2) == 0, rng.IntN(2) == 0)
		}
		vol := pick(rng, vols)
		path := "/api/instances/Volume::" + vol + "/action/"
		switch rng.IntN(7) {
		case 0:
			return tracktest.Call{Method: http.MethodPost, Path: path + "removeMappedSdc",
				Body: fmt.Sprintf(`{"sdcId":%q,"allSdcs":%q}`, pick(rng, sdcs), pick(rng, []string{"", "", "TRUE"}))}
		case 1:
			return tracktest.Call{Method: http.MethodPost, Path: path + "setMappedSdcLimits",
				Body: fmt.Sprintf(`{"sdcId":%q,"iopsLimit":"%d","bandwidthLimitInKbps":"%d"}`, pick(rng, sdcs), rng.IntN(3)*100, rng.IntN(3)*1024)}
		case 2:
			if rng.IntN(3) == 0 {
				name := fmt.Sprintf("pvc-%d", rng.IntN(30))
				if id, ok := sim.VolumeID(name); ok {
					vols = append(vols, id)
				}
				return tracktest.Call{Method: http.MethodPost, Path: "/api/types/Volume/instances",
					Body: `{"storagePoolId":"` + pool + `","name":"` + name + `","volumeSizeInKb":"8388608"}`}
			}
			fallthrough
		case 3:
			return tracktest.Call{Method: http.MethodPost, Path: path + pick(rng, []string{"addMappedHost", "removeMappedHost"}),
				Body: fmt.Sprintf(`{"hostId":%q,"allowMultipleMappings":"TRUE"}`, pick(rng, sdcs))}
		case 4:
			op := pick(rng, []string{"add_", "remove_", ""})
			return tracktest.Call{Method: http.MethodPatch, Path: "/rest/v1/nfs-exports/" + pick(rng, exports),
				Body: fmt.Sprintf(`{"%s%s":[%q]}`, op, pick(rng, lists), pick(rng, hosts))}
		default:
			return tracktest.Call{Method: http.MethodPost, Path: path + "addMappedSdc",
				Body: fmt.Sprintf(`{"sdcId":%q,"allowMultipleMappings":%q,"accessMode":%q}`, pick(rng, sdcs),
					pick(rng, []string{"TRUE", "FALSE"}), pick(rng, []string{"ReadWrite", "ReadOnly", "NoAccess"}))}
		}
	})
	b.RequireAuditsMatch(t, 100)
}

// poolOf is the ID of the i-th system's storage pool (by system ID, as
// the gateway lists them).
func poolOf(t *testing.T, b *tracktest.Bed, i int) string {
	t.Helper()
	return listedID(t, b, "/api/types/StoragePool/instances", i)
}

// nasOf is the ID of the i-th system's NAS server.
func nasOf(t *testing.T, b *tracktest.Bed, i int) string {
	t.Helper()
	return listedID(t, b, "/rest/v1/nas-servers", i)
}

func listedID(t *testing.T, b *tracktest.Bed, path string, i int) string {
	t.Helper()
	w := b.Must(t, tracktest.Call{Method: http.MethodGet, Path: path})
	var list []struct{ ID string }
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &list))
	require.Greater(t, len(list), i)
	return list[i].ID
}
