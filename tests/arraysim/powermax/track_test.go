package powermax_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/tests/arraysim/fixture"
	"github.com/fenced-project/fenced/tests/arraysim/powermax"
	"github.com/fenced-project/fenced/tests/arraysim/simcore/tracktest"
)

// newTrackBed serves the test fixture with the audit check on.
func newTrackBed(t *testing.T) (*tracktest.Bed, *powermax.Sim) {
	t.Helper()
	f, err := fixture.Parse([]byte(testFixture))
	require.NoError(t, err)
	sim, err := powermax.New(&f.Arrays[0].Spec, f.Nodes)
	require.NoError(t, err)
	b := tracktest.New(t, "pmax-1", sim)
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.SetBasicAuth("smc", "secret")
	b.Header.Set("Authorization", req.Header.Get("Authorization"))
	return b, sim
}

const prov = "/univmax/restapi/100/sloprovisioning/symmetrix/" + sym + "/"

func hostEdit(host, param string, initiators ...string) tracktest.Call {
	list, _ := json.Marshal(initiators)
	return tracktest.Call{Method: http.MethodPut, Path: prov + "host/" + host,
		Body: `{"editHostActionParam":{"` + param + `":{"initiator":` + string(list) + `}},"executionOption":"SYNCHRONOUS"}`}
}

func sgEdit(sg, param string, vols ...string) tracktest.Call {
	list, _ := json.Marshal(vols)
	body := `{"editStorageGroupActionParam":{"removeVolumeParam":{"volumeId":` + string(list) + `}},"executionOption":"SYNCHRONOUS"}`
	if param == "add" {
		body = `{"editStorageGroupActionParam":{"expandStorageGroupParam":{"addSpecificVolumeParam":{"volumeId":` + string(list) +
			`}}},"executionOption":"SYNCHRONOUS"}`
	}
	return tracktest.Call{Method: http.MethodPut, Path: prov + "storagegroup/" + sg, Body: body}
}

func createVolume(sg, ident string) tracktest.Call {
	return tracktest.Call{Method: http.MethodPut, Path: prov + "storagegroup/" + sg,
		Body: `{"editStorageGroupActionParam":{"expandStorageGroupParam":{"addVolumeParam":{"create_new_volumes":true,"emulation":"FBA",` +
			`"volumeAttributes":[{"num_of_vols":1,"capacityUnit":"CYL","volume_size":"4370","volumeIdentifier":` +
			`{"volumeIdentifierChoice":"identifier_name","identifier_name":"` + ident + `"}}]}}},"executionOption":"SYNCHRONOUS"}`}
}

func createSG(id, srp string) tracktest.Call {
	return tracktest.Call{Method: http.MethodPost, Path: prov + "storagegroup",
		Body: `{"storageGroupId":"` + id + `","srpId":"` + srp + `","emulation":"FBA","executionOption":"SYNCHRONOUS",` +
			`"sloBasedStorageGroupParam":[{"sloId":"Diamond"}]}`}
}

func createMV(id, host, sg string) tracktest.Call {
	return tracktest.Call{Method: http.MethodPost, Path: prov + "maskingview",
		Body: `{"maskingViewId":"` + id + `","hostOrHostGroupSelection":{"useExistingHostParam":{"hostId":"` + host + `"}},` +
			`"portGroupSelection":{"useExistingPortGroupParam":{"portGroupId":"csi-TST-iscsi-PG"}},` +
			`"storageGroupSelection":{"useExistingStorageGroupParam":{"storageGroupId":"` + sg + `"}},"executionOption":"SYNCHRONOUS"}`}
}

func del(kind, id string) tracktest.Call {
	return tracktest.Call{Method: http.MethodDelete, Path: prov + kind + "/" + id}
}

// snapshot is the simulator's state as the audit sees it.
type snapshot struct {
	Hosts []struct {
		ID         string   `json:"hostId"`
		Initiators []string `json:"initiator"`
	} `json:"hosts"`
	StorageGroups []struct {
		ID string `json:"storageGroupId"`
	} `json:"storageGroups"`
	Volumes []struct {
		ID string `json:"volumeId"`
	} `json:"volumes"`
}

func stateOf(t *testing.T, sim *powermax.Sim) snapshot {
	t.Helper()
	b, err := json.Marshal(sim.Snapshot())
	require.NoError(t, err)
	var st snapshot
	require.NoError(t, json.Unmarshal(b, &st))
	return st
}

// TestTrackedAuditOfEveryWriteRoute drives every write the simulator
// serves (fenced's initiator edits; csi-powermax's storage group, volume
// and masking view calls), refused ones too, with signals in between, and
// takes the masking views to none and back (a null list): the tracked
// audit of each is what full snapshots give. Hosts, views, groups and
// volumes are compared by position, so a new volume or group shifts the
// ones after it.
func TestTrackedAuditOfEveryWriteRoute(t *testing.T) {
	b, _ := newTrackBed(t)
	h1, h2 := "csi-node-TST-worker-1", "csi-node-TST-worker-2"
	sg1, sg2 := "csi-no-srp-sg-TST-worker-1", "csi-no-srp-sg-TST-worker-2"
	iqn1 := "iqn.1994-05.com.redhat:worker-1"
	must := []tracktest.Call{
		hostEdit(h1, "removeInitiatorParam", iqn1),
		hostEdit(h1, "addInitiatorParam", iqn1),
		hostEdit("legacy-fc-host", "removeInitiatorParam", "10000000c9a0b0ff"),
		hostEdit(h2, "addInitiatorParam", "10000000c9a0b0ff"),
		sgEdit(sg1, "remove", "00100"),
		sgEdit(sg2, "add", "00100"),
		createSG("csi-TST-Diamond-SRP_1-SG", "SRP_1"),
		createVolume("csi-TST-Diamond-SRP_1-SG", "csi-TST-k8s-1"),
		createSG("aaa-first-sg", "None"),
		del("maskingview", "csi-mv-TST-worker-1"),
		sgEdit(sg1, "remove", "00101", "00102"),
		del("storagegroup", sg1),
		createSG(sg1, "None"),
		sgEdit(sg1, "add", "00101"),
		createMV("csi-mv-TST-worker-1", h1, sg1),
	}
	for _, c := range must {
		b.Must(t, c)
	}
	b.Signals(t, h1, false, true)
	b.Signals(t, "legacy-fc-host", false, false)
	refused := []tracktest.Call{
		hostEdit(h1, "addInitiatorParam", iqn1),
		hostEdit(h1, "removeInitiatorParam", "iqn.none"),
		sgEdit(sg1, "remove", "00101"), // the last volume of a masked group
		sgEdit(sg2, "add", "0FFFF"),
		createSG(sg1, "None"),
		createMV("csi-mv-TST-worker-1", h1, sg1),
		del("storagegroup", sg2),
		del("maskingview", "none"),
		createVolume(sg2, "csi-TST-k8s-nosrp"),
	}
	for _, c := range refused {
		b.Do(t, c)
	}
	// Every masking view gone, then one back: null and a list again.
	w := b.Must(t, tracktest.Call{Method: http.MethodGet, Path: prov + "maskingview"})
	var views struct {
		IDs []string `json:"maskingViewId"`
	}
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &views))
	for _, mv := range views.IDs {
		b.Must(t, del("maskingview", mv))
	}
	b.Must(t, createMV("csi-mv-TST-worker-1", h1, sg1))
	// Performance metrics are a query, outside the comparison.
	b.Must(t, tracktest.Call{Method: http.MethodPost, Path: "/univmax/restapi/performance/Volume/metrics",
		Body: `{"systemId":"` + sym + `","startDate":1,"endDate":9999999999999,"dataFormat":"Average","metrics":["IoRate"]}`})
	b.RequireAuditsMatch(t, len(must)+len(views.IDs)+1)
}

// TestTrackedAuditOfRandomWrites replays a random mix of initiator moves,
// storage group edits, creations and masking view changes.
func TestTrackedAuditOfRandomWrites(t *testing.T) {
	b, sim := newTrackBed(t)
	st := stateOf(t, sim)
	var hosts, inits, groups, vols []string
	for _, h := range st.Hosts {
		hosts = append(hosts, h.ID)
		inits = append(inits, h.Initiators...)
	}
	for _, g := range st.StorageGroups {
		groups = append(groups, g.ID)
	}
	for _, v := range st.Volumes {
		vols = append(vols, v.ID)
	}
	groups = append(groups, "csi-TST-Diamond-SRP_1-SG")
	pick := func(rng *rand.Rand, l []string) string { return l[rng.IntN(len(l))] }
	n := 0
	b.Random(t, 4, 400, func(rng *rand.Rand) tracktest.Call {
		n++
		if n%40 == 0 {
			b.Signals(t, pick(rng, hosts), rng.IntN(2) == 0, rng.IntN(2) == 0)
		}
		switch rng.IntN(9) {
		case 0, 1:
			return hostEdit(pick(rng, hosts), pick(rng, []string{"addInitiatorParam", "removeInitiatorParam"}), pick(rng, inits))
		case 2, 3:
			return sgEdit(pick(rng, groups), pick(rng, []string{"add", "remove"}), pick(rng, vols))
		case 4:
			return createSG(pick(rng, groups), pick(rng, []string{"None", "SRP_1"}))
		case 5:
			return del("storagegroup", pick(rng, groups))
		case 6:
			return createVolume(pick(rng, groups), fmt.Sprintf("csi-TST-k8s-%d", rng.IntN(1000)))
		case 7:
			i := rng.IntN(len(hosts))
			return createMV(fmt.Sprintf("mv-%d", rng.IntN(4)), hosts[i], pick(rng, groups))
		default:
			return del("maskingview", pick(rng, []string{"mv-0", "mv-1", "mv-2", "mv-3", "csi-mv-TST-worker-1"}))
		}
	})
	b.RequireAuditsMatch(t, 100)
}
