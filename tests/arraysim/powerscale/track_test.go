package powerscale_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/tests/arraysim/fixture"
	"github.com/fenced-project/fenced/tests/arraysim/powerscale"
	"github.com/fenced-project/fenced/tests/arraysim/simcore/tracktest"
)

// trackFixture adds to testFixture a client without a name, which makes
// the audit compare the Snapshot's clients by position.
const trackFixture = testFixture + `      clients: [{ip: 10.0.0.9, fqdn: backup.example}]
`

// newTrackBed serves a fixture with the audit check on, with Basic
// credentials.
func newTrackBed(t *testing.T, doc string) (*tracktest.Bed, *powerscale.Sim) {
	t.Helper()
	fx, err := fixture.Parse([]byte(doc))
	require.NoError(t, err)
	arr, ok := fx.Array("pscale-1")
	require.True(t, ok)
	sim, err := powerscale.New(&arr.Spec, fx.Nodes)
	require.NoError(t, err)
	b := tracktest.New(t, "pscale-1", sim)
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.SetBasicAuth(powerscale.DefaultUsername, powerscale.DefaultPassword)
	b.Header.Set("Authorization", req.Header.Get("Authorization"))
	return b, sim
}

const exportsV2, exportsV4 = "/platform/2/protocols/nfs/exports", "/platform/4/protocols/nfs/exports"

// mkdir creates a directory as csi-isilon's CreateVolume does.
func mkdir(dir string) tracktest.Call {
	return tracktest.Call{Method: http.MethodPut, Path: "/namespace" + dir,
		Header: http.Header{"X-Isi-Ifs-Target-Type": {"container"}}}
}

// TestTrackedAuditOfEveryWriteRoute drives every write the simulator
// serves (export creation, partial updates and deletion through both API
// versions and zones, directory creation, session login and logout),
// refused ones too, with signals in between: the tracked audit of each is
// what full snapshots give.
func TestTrackedAuditOfEveryWriteRoute(t *testing.T) {
	b, _ := newTrackBed(t, trackFixture)
	put := func(path, body string) tracktest.Call {
		return tracktest.Call{Method: http.MethodPut, Path: path, Body: body}
	}
	must := []tracktest.Call{
		put(exportsV2+"/2", `{"clients":["localhost","127.0.0.1"]}`),
		put(exportsV4+"/2", `{"clients":["localhost","127.0.0.1","worker-1.cluster.local"],"read_only_clients":["127.0.10.2"]}`),
		put(exportsV2+"/3?zone=System", `{"root_clients":[],"description":"not in the snapshot","paths":["/ifs/data/csi/moved"]}`),
		put(exportsV2+"/1?zone=tenant-b", `{"clients":["127.0.10.9"],"zone":"tenant-b"}`),
		{Method: http.MethodPost, Path: exportsV2, Body: `{"paths":["/ifs/data/csi/k8s-new"],"clients":["127.0.10.1"]}`},
		{Method: http.MethodPost, Path: exportsV4 + "?zone=tenant-b", Body: `{"paths":["/ifs/data/other2"],"read_write_clients":["127.0.10.3"]}`},
		{Method: http.MethodDelete, Path: exportsV2 + "/4"},
		mkdir("/ifs/data/csi/k8s-new"),
		mkdir("/ifs/data/csi/a-first"),
	}
	for _, c := range must {
		b.Must(t, c)
	}
	b.Signals(t, "10.0.0.9", false, true)
	b.Signals(t, "worker-2", true, true)
	refused := []tracktest.Call{
		put(exportsV2+"/2", `{"clients":null}`),
		put(exportsV2+"/2", `{"bogus":[]}`),
		put(exportsV2+"/99", `{"clients":[]}`),
		put(exportsV2+"/1", `{"clients":[]}`), // in zone tenant-b, not System
		{Method: http.MethodDelete, Path: exportsV2 + "/4"},
		mkdir("/ifs/data/none/x"),
		put("/namespace/ifs/data/csi/plain", ""), // not a container
		{Method: http.MethodPost, Path: "/session/1/session", Body: `{"username":"admin","password":"wrong","services":["platform"]}`},
	}
	for _, c := range refused {
		b.Do(t, c)
	}
	b.Must(t, tracktest.Call{Method: http.MethodPost, Path: "/session/1/session",
		Body: `{"username":"admin","password":"` + powerscale.DefaultPassword + `","services":["platform","namespace"]}`})
	b.Must(t, tracktest.Call{Method: http.MethodDelete, Path: "/session/1/session"})
	b.RequireAuditsMatch(t, len(must)-1) // the description is not in the snapshot, but the paths are
}

// TestTrackedAuditOfRandomWrites replays a random mix of client list
// edits, creations and deletions, with signals in between.
func TestTrackedAuditOfRandomWrites(t *testing.T) {
	b, sim := newTrackBed(t, trackFixture)
	var ids []int
	for _, e := range sim.State().Exports {
		if e.Zone == powerscale.DefaultZone {
			ids = append(ids, e.ID)
		}
	}
	clients := []string{"127.0.10.1", "127.0.10.2", "worker-3", "worker-1.cluster.local", "localhost"}
	lists := powerscale.ListNames
	pick := func(rng *rand.Rand, l []string) string { return l[rng.IntN(len(l))] }
	n := 0
	b.Random(t, 3, 400, func(rng *rand.Rand) tracktest.Call {
		n++
		if n%40 == 0 {
			b.Signals(t, pick(rng, []string{"10.0.0.9", "127.0.10.1", "worker-2"}), rng.IntN(2) == 0, rng.IntN(2) == 0)
		}
		id := ids[rng.IntN(len(ids))]
		switch rng.IntN(8) {
		case 0:
			return tracktest.Call{Method: http.MethodPost, Path: exportsV2,
				Body: fmt.Sprintf(`{"paths":["/ifs/data/csi/k8s-r%d"],"clients":[%q]}`, rng.IntN(50), pick(rng, clients))}
		case 1:
			return tracktest.Call{Method: http.MethodDelete, Path: fmt.Sprintf("%s/%d", exportsV4, id+rng.IntN(8))}
		default:
			l := rng.Perm(len(clients))[:rng.IntN(4)]
			body := "["
			for i, j := range l {
				if i > 0 {
					body += ","
				}
				body += fmt.Sprintf("%q", clients[j])
			}
			return tracktest.Call{Method: http.MethodPut, Path: fmt.Sprintf("%s/%d", exportsV2, id+rng.IntN(8)),
				Body: fmt.Sprintf(`{%q:%s]}`, pick(rng, lists), body)}
		}
	})
	b.RequireAuditsMatch(t, 100)
}
