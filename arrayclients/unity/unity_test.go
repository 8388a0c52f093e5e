package unity_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/arrayclients/internal/arraytest"
	"github.com/fenced-project/fenced/arrayclients/unity"
	"github.com/fenced-project/fenced/tests/arraysim/fixture"
	"github.com/fenced-project/fenced/tests/arraysim/simcore"
	unitysim "github.com/fenced-project/fenced/tests/arraysim/unity"
)

// unityFixture: worker-1 has three initiators, three own LUNs and a LUN
// shared with a backup host; worker-2 has its own LUNs; two hosts share a
// name (ambiguous).
const unityFixture = `
nodes:
  - {name: worker-1.cluster.local, ip: 127.0.10.1, fqdn: worker-1.cluster.local, iqn: "iqn.1994-05.com.redhat:worker-1", wwpns: ["10000000c9a0b001", "10000000c9a0b101"]}
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
            - {host: worker-1.cluster.local, hlu: 3}
            - {host: backup, hlu: 0}
`

type unityEnv struct {
	srv     *simcore.Server
	sim     *unitysim.Sim
	adapter *unity.UnityAdapter
	cfg     arrayclients.Config
	close   func() error
}

func startUnity(t testing.TB, doc string, timeout time.Duration) unityEnv {
	t.Helper()
	f, err := fixture.Parse([]byte(doc))
	require.NoError(t, err)
	sim, err := unitysim.New(&f.Arrays[0].Spec, f.Nodes)
	require.NoError(t, err)
	srv := simcore.New("unity-1", sim, nil)
	l, err := simcore.Serve(srv, "127.0.0.1:0", true, t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	// gounity trusts only the system pool: a test array needs insecure.
	cfg := arrayclients.Config{
		Name: "unity-1", Family: arrayclients.Unity, Endpoint: l.URL, Username: "admin", Password: "secret",
		Insecure: true, RequestTimeout: timeout,
	}
	a, err := unity.NewUnity(context.Background(), cfg, nil)
	require.NoError(t, err)
	return unityEnv{srv: srv, sim: sim, adapter: a, cfg: cfg, close: l.Close}
}

func unityNode(name string) arrayclients.Node {
	return arrayclients.Node{Cluster: "c1", Name: name, CSINodeIDs: map[string]string{arrayclients.DriverUnity: name + "," + name + ".cluster.local"}}
}

// unityState is the dump plus each LUN's host access, for "others untouched".
func unityState(t testing.TB, sim *unitysim.Sim) (all string, luns map[string]string) {
	t.Helper()
	b, err := json.Marshal(sim.Snapshot())
	require.NoError(t, err)
	var s struct {
		LUNs []struct {
			ID         string          `json:"id"`
			HostAccess json.RawMessage `json:"hostAccess"`
		} `json:"luns"`
	}
	require.NoError(t, json.Unmarshal(b, &s))
	luns = map[string]string{}
	for _, l := range s.LUNs {
		luns[l.ID] = string(l.HostAccess)
	}
	return string(b), luns
}

func modifyLunPosts(srv *simcore.Server) int {
	n := 0
	for _, a := range srv.Audit() {
		if a.Method == http.MethodPost && strings.HasSuffix(strings.SplitN(a.Path, "?", 2)[0], "/modifyLun") {
			n++
		}
	}
	return n
}

func TestUnityFenceCycle(t *testing.T) {
	e := startUnity(t, unityFixture, 5*time.Second)
	ctx := context.Background()
	before, lunsBefore := unityState(t, e.sim)

	id, err := e.adapter.Resolve(ctx, unityNode("worker-1"))
	require.NoError(t, err)
	assert.Equal(t, "worker-1.cluster.local", id.ObjectName)
	assert.Equal(t, []string{"10000000c9a0b001", "10000000c9a0b101", "iqn.1994-05.com.redhat:worker-1"}, id.Keys)

	plan, err := e.adapter.Plan(ctx, id, nil)
	require.NoError(t, err)
	var entries unity.UnityEntries
	require.NoError(t, json.Unmarshal(plan.Entries, &entries))
	require.Len(t, entries.LUNs, 4)
	for i, l := range entries.LUNs {
		assert.Equal(t, i, l.HLU)
		assert.Equal(t, "1", l.AccessMask)
	}
	assert.Equal(t, "shared", entries.LUNs[3].Name)
	assert.Len(t, entries.LUNs[3].OtherHosts, 1)
	assert.Zero(t, modifyLunPosts(e.srv), "resolve and plan never write")

	require.NoError(t, e.adapter.Apply(ctx, plan))
	v, err := e.adapter.Verify(ctx, plan)
	require.NoError(t, err)
	assert.True(t, v.Fenced, "%+v", v)
	assert.Len(t, v.Missing, 4)
	posts := modifyLunPosts(e.srv)
	assert.Equal(t, 4, posts)

	_, lunsFenced := unityState(t, e.sim)
	for lun, acc := range lunsBefore {
		if !strings.Contains(acc, id.ObjectID+`"`) {
			assert.Equal(t, acc, lunsFenced[lun], "LUN %s of other hosts untouched", lun)
		}
	}
	backupID, err := e.sim.HostID("backup")
	require.NoError(t, err)
	assert.Contains(t, lunsFenced["sv_7"], backupID, "the shared LUN keeps its other host")

	require.NoError(t, e.adapter.Apply(ctx, plan), "apply twice")
	assert.Equal(t, posts, modifyLunPosts(e.srv), "a second apply sends nothing")

	require.NoError(t, e.adapter.Undo(ctx, plan, arrayclients.RestoreScope{}))
	v, err = e.adapter.Verify(ctx, plan)
	require.NoError(t, err)
	assert.True(t, v.Restored, "%+v", v)
	assert.False(t, v.Fenced)
	require.NoError(t, e.adapter.Undo(ctx, plan, arrayclients.RestoreScope{}), "undo twice")
	assert.Equal(t, posts+4, modifyLunPosts(e.srv), "a second undo sends nothing")
	assert.Len(t, e.srv.AuditWrites(), 8)

	after, _ := unityState(t, e.sim)
	assert.Equal(t, before, after, "the dump after undo equals the dump before plan")
}

func TestUnityApplyInterruptedThenRetried(t *testing.T) {
	e := startUnity(t, unityFixture, 5*time.Second)
	ctx := context.Background()
	id, err := e.adapter.Resolve(ctx, unityNode("worker-1"))
	require.NoError(t, err)
	plan, err := e.adapter.Plan(ctx, id, nil)
	require.NoError(t, err)

	// The second LUN's write fails: the first is done, the rest are not.
	e.srv.AddFault(simcore.Fault{Kind: simcore.FaultError, Method: http.MethodPost, Path: `/storageResource/sv_2/action/modifyLun$`, Status: http.StatusServiceUnavailable, Count: 1})
	err = e.adapter.Apply(ctx, plan)
	require.Error(t, err)
	require.ErrorContains(t, err, "sv_2")
	v, err := e.adapter.Verify(ctx, plan)
	require.NoError(t, err)
	assert.False(t, v.Fenced)
	require.Len(t, v.Remaining, 3)
	assert.Contains(t, v.Remaining[0], "LUN sv_2")
	assert.Contains(t, v.Remaining[2], "LUN sv_7 (shared) grants host")

	require.NoError(t, e.adapter.Apply(ctx, plan), "the retry completes")
	v, err = e.adapter.Verify(ctx, plan)
	require.NoError(t, err)
	assert.True(t, v.Fenced)
	require.NoError(t, e.adapter.Undo(ctx, plan, arrayclients.RestoreScope{}))
	v, err = e.adapter.Verify(ctx, plan)
	require.NoError(t, err)
	assert.True(t, v.Restored)
}

func TestUnityIdentityErrors(t *testing.T) {
	e := startUnity(t, unityFixture, 5*time.Second)
	ctx := context.Background()
	_, err := e.adapter.Resolve(ctx, arrayclients.Node{Name: "t", Override: "twin"})
	require.ErrorIs(t, err, arrayclients.ErrAmbiguousIdentity)
	require.ErrorContains(t, err, "twin")

	_, err = e.adapter.Resolve(ctx, unityNode("worker-9"))
	require.ErrorIs(t, err, arrayclients.ErrNoIdentity)
	_, err = e.adapter.Resolve(ctx, arrayclients.Node{Name: "worker-1"})
	require.ErrorIs(t, err, arrayclients.ErrNoIdentity)

	for _, bad := range []arrayclients.Node{
		{Name: "worker-1", CSINodeIDs: map[string]string{arrayclients.DriverUnity: "worker-1"}},
		{Name: "worker-1", Override: "worker-1/../../lun"},
		{Name: "worker-1", Override: "worker 1"},
	} {
		_, err = e.adapter.Resolve(ctx, bad)
		require.Error(t, err)
		require.NotErrorIs(t, err, arrayclients.ErrNoIdentity, "%v", err)
	}

	// Exact names only: the short name is not the host.
	_, err = e.adapter.Resolve(ctx, arrayclients.Node{Name: "worker-1", Override: "worker-1"})
	require.ErrorIs(t, err, arrayclients.ErrNoIdentity)

	id, err := e.adapter.Resolve(ctx, unityNode("worker-1"))
	require.NoError(t, err)
	plan, err := e.adapter.Plan(ctx, id, nil)
	require.NoError(t, err)
	plan.Family = arrayclients.PowerMax
	require.ErrorIs(t, e.adapter.Apply(ctx, plan), arrayclients.ErrPlanMismatch)
	assert.Zero(t, modifyLunPosts(e.srv), "no identity problem ever wrote")
}

func TestUnityHealth(t *testing.T) {
	e := startUnity(t, unityFixture, 2*time.Second)
	ctx := context.Background()
	id, err := e.adapter.Resolve(ctx, unityNode("worker-1"))
	require.NoError(t, err)

	h, err := e.adapter.Health(ctx, id)
	require.NoError(t, err)
	arraytest.RequireReadOnlyProbes(t, e.srv)
	assert.Equal(t, arrayclients.Connected, h.Connectivity, h.Reason)
	assert.Equal(t, arrayclients.IOIdle, h.IO, h.Reason)

	require.NoError(t, e.sim.SetSignals(id.ObjectName, simcore.Signals{IOActive: simcore.Bool(true)}))
	e.sim.ExpireMetricQueries() // the adapter's query expired: it makes a new one
	h, err = e.adapter.Health(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, arrayclients.IOActive, h.IO, h.Reason)
	assert.WithinDuration(t, time.Now(), h.SampledAt, 10*time.Second)

	require.NoError(t, e.sim.SetSignals(id.ObjectName, simcore.Signals{Connected: simcore.Bool(false)}))
	h, err = e.adapter.Health(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, arrayclients.Disconnected, h.Connectivity, h.Reason)
	assert.Contains(t, h.Reason, "ALRT_INITIATOR_NO_LOGGED_IN_PATH")
	assert.Equal(t, arrayclients.IOIdle, h.IO, h.Reason)

	// Stale samples are unknown, not idle.
	e.sim.SetClock(func() time.Time { return time.Now().Add(-5 * time.Minute) })
	h, err = e.adapter.Health(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, arrayclients.IOUnknown, h.IO, h.Reason)
	e.sim.SetClock(time.Now)

	require.NoError(t, e.close())
	h, err = e.adapter.Health(ctx, id)
	require.ErrorIs(t, err, arrayclients.ErrUnreachable)
	assert.Equal(t, arrayclients.ConnectivityUnknown, h.Connectivity)
	assert.Equal(t, arrayclients.IOUnknown, h.IO)
	assert.False(t, e.adapter.Check(ctx).Reachable)
}

func TestUnityReloginAndCheck(t *testing.T) {
	e := startUnity(t, unityFixture, 2*time.Second)
	ctx := context.Background()
	var r arrayclients.CheckResult
	for range 16 { // log every pooled session in
		r = e.adapter.Check(ctx)
		require.True(t, r.Reachable, r.Error)
	}
	id, err := e.adapter.Resolve(ctx, unityNode("worker-1"))
	require.NoError(t, err)
	logins := e.sim.Logins()

	e.sim.ExpireSessions()
	_, err = e.adapter.Plan(ctx, id, nil)
	require.NoError(t, err, "401, one re-login, retry")
	assert.Greater(t, e.sim.Logins(), logins)
	unauthorized := 0
	for _, a := range e.srv.Audit() {
		if a.Status == http.StatusUnauthorized {
			unauthorized++
		}
	}
	assert.Positive(t, unauthorized)

	bad := e.cfg
	bad.Password = "wrong"
	a, err := unity.NewUnity(context.Background(), bad, nil)
	require.NoError(t, err)
	r = a.Check(ctx)
	assert.False(t, r.Reachable)
	assert.NotContains(t, r.Error, "wrong")
	_, err = a.Resolve(ctx, unityNode("worker-1"))
	require.ErrorIs(t, err, arrayclients.ErrUnreachable)

	_, err = unity.NewUnity(context.Background(), arrayclients.Config{Name: "u", Endpoint: "https://10.0.0.1", CAFile: "/ca.pem"}, nil)
	require.ErrorContains(t, err, "caFile")
	_, err = unity.NewUnity(context.Background(), arrayclients.Config{Name: "u", Endpoint: "https://api.example.com", Insecure: true}, nil)
	assert.ErrorContains(t, err, "api")
}

func TestUnityFaults(t *testing.T) {
	e := startUnity(t, unityFixture, 300*time.Millisecond)
	ctx := context.Background()
	id, err := e.adapter.Resolve(ctx, unityNode("worker-1"))
	require.NoError(t, err)
	path := `^/api/types/hostLUN/instances$`
	for _, tc := range []struct {
		name        string
		fault       simcore.Fault
		unreachable bool
	}{
		{"error", simcore.Fault{Kind: simcore.FaultError, Status: http.StatusInternalServerError}, false},
		{"reset", simcore.Fault{Kind: simcore.FaultReset}, true},
		{"hang", simcore.Fault{Kind: simcore.FaultHang}, true},
		{"malformed", simcore.Fault{Kind: simcore.FaultMalformed}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.fault.Path = path
			fid := e.srv.AddFault(tc.fault)
			defer e.srv.RemoveFault(fid)
			began := time.Now()
			_, err := e.adapter.Plan(ctx, id, nil)
			require.Error(t, err)
			assert.Equal(t, tc.unreachable, strings.Contains(err.Error(), arrayclients.ErrUnreachable.Error()), "%v", err)
			assert.Less(t, time.Since(began), 3*time.Second, "bounded by the request timeout")
		})
	}
	fid := e.srv.AddFault(simcore.Fault{Kind: simcore.FaultLatency, Path: path, Latency: 50 * time.Millisecond})
	_, err = e.adapter.Plan(ctx, id, nil)
	require.NoError(t, err)
	e.srv.RemoveFault(fid)
}

// unityNodesDoc is a fixture of n nodes n00.. on one Unity array with
// lunsPerNode LUNs each.
func unityNodesDoc(n, lunsPerNode int) string {
	doc := "nodes:\n"
	for i := range n {
		doc += fmt.Sprintf("  - {name: n%02d.cluster.local, ip: 127.0.11.%d, fqdn: n%02d.cluster.local, iqn: \"iqn.1994-05.com.redhat:n%02d\"}\n", i, i+1, i, i)
	}
	return doc + fmt.Sprintf("arrays:\n  - {name: unity-1, family: unity, spec: {username: admin, password: secret, generate: {lunsPerNode: %d}}}\n", lunsPerNode)
}

func TestUnityConcurrentFences(t *testing.T) {
	e := startUnity(t, unityNodesDoc(12, 2), 5*time.Second)
	before, _ := unityState(t, e.sim)
	ctx := context.Background()
	plans := make([]arrayclients.Plan, 12)
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id, err := e.adapter.Resolve(ctx, unityNode(fmt.Sprintf("n%02d", i)))
			if !assert.NoError(t, err) {
				return
			}
			plans[i], err = e.adapter.Plan(ctx, id, nil)
			if assert.NoError(t, err) {
				assert.NoError(t, e.adapter.Apply(ctx, plans[i]))
			}
		}()
	}
	wg.Wait()
	for _, p := range plans {
		v, err := e.adapter.Verify(ctx, p)
		require.NoError(t, err)
		assert.True(t, v.Fenced)
	}
	for i := range 12 {
		wg.Add(1)
		go func() { defer wg.Done(); assert.NoError(t, e.adapter.Undo(ctx, plans[i], arrayclients.RestoreScope{})) }()
	}
	wg.Wait()
	after, _ := unityState(t, e.sim)
	assert.Equal(t, before, after)
}

// TestUnityPlansAndReadBacksAddressTheHost: a plan and a read-back make
// one hostLUN call for the host and read its LUNs by ID; no LUN is listed,
// however many the array has. Twelve at once still each see their own
// write.
func TestUnityPlansAndReadBacksAddressTheHost(t *testing.T) {
	e := startUnity(t, unityNodesDoc(12, 2), 5*time.Second)
	ctx := context.Background()
	ids := make([]arrayclients.Identity, 12)
	for i := range ids {
		var err error
		ids[i], err = e.adapter.Resolve(ctx, unityNode(fmt.Sprintf("n%02d", i)))
		require.NoError(t, err)
	}
	calls := func(since int64) (lunLists, hostLUNLists, lunReads int) {
		for _, a := range e.srv.AuditSince(since) {
			path := strings.SplitN(a.Path, "?", 2)[0]
			switch {
			case a.Method != http.MethodGet:
			case path == "/api/types/lun/instances":
				lunLists++
			case path == "/api/types/hostLUN/instances":
				hostLUNLists++
			case strings.HasPrefix(path, "/api/instances/lun/"):
				lunReads++
			}
		}
		return
	}
	all := func(fn func(i int)) {
		var wg sync.WaitGroup
		for i := range 12 {
			wg.Go(func() { fn(i) })
		}
		wg.Wait()
	}

	seq := e.srv.LastSeq()
	plans := make([]arrayclients.Plan, 12)
	all(func(i int) {
		var err error
		plans[i], err = e.adapter.Plan(ctx, ids[i], nil)
		assert.NoError(t, err)
	})
	require.False(t, t.Failed())
	lists, hostLUNs, reads := calls(seq)
	assert.Zero(t, lists, "no plan lists every LUN")
	assert.Equal(t, 12, hostLUNs, "one hostLUN call per plan")
	assert.Equal(t, 24, reads, "one read per LUN of each host")
	for i, p := range plans {
		assert.Contains(t, p.Summary, "from 2 LUN(s)", "plan %d", i)
	}

	all(func(i int) { assert.NoError(t, e.adapter.Apply(ctx, plans[i])) })
	seq = e.srv.LastSeq()
	all(func(i int) {
		v, err := e.adapter.Verify(ctx, plans[i])
		if assert.NoError(t, err) {
			assert.True(t, v.Fenced, "read-back %d sees its write: %v", i, v.Remaining)
		}
	})
	lists, hostLUNs, reads = calls(seq)
	assert.Zero(t, lists, "no read-back lists every LUN")
	assert.Equal(t, 12, hostLUNs, "one hostLUN call per read-back")
	assert.Zero(t, reads, "plans without footprint volumes read no LUN back")
	all(func(i int) { assert.NoError(t, e.adapter.Undo(ctx, plans[i], arrayclients.RestoreScope{})) })
}

// TestRegistryBuildsPowerMaxAndUnity goes through New and the family's
// constructor: the Unity adapter comes out decorated, checked and able to
// fence (the PowerMax half of this test is with the PowerMax tests).
func TestRegistryBuildsPowerMaxAndUnity(t *testing.T) {
	u := startUnity(t, unityFixture, 5*time.Second)
	reg, err := arraytest.New(arrayclients.Unity, unity.New, []arrayclients.Config{u.cfg}, arrayclients.Options{})
	require.NoError(t, err)
	ctx := context.Background()
	for _, r := range reg.Check(ctx) {
		assert.True(t, r.Reachable, "%s: %s", r.Array, r.Error)
	}

	ua, ok := reg.Get("unity-1")
	require.True(t, ok)
	id, err := ua.Resolve(ctx, unityNode("worker-2"))
	require.NoError(t, err)
	plan, err := ua.Plan(ctx, id, nil)
	require.NoError(t, err)
	require.NoError(t, ua.Apply(ctx, plan))
	v, err := ua.Verify(ctx, plan)
	require.NoError(t, err)
	assert.True(t, v.Fenced)
	require.NoError(t, ua.Undo(ctx, plan, arrayclients.RestoreScope{}))

	for _, endpoint := range []string{"/api", "https://api.example.com", "10.0.0.1"} {
		_, err = unity.NewUnity(ctx, arrayclients.Config{Name: "u", Endpoint: endpoint, Insecure: true}, nil)
		require.Error(t, err, endpoint)
	}
}
