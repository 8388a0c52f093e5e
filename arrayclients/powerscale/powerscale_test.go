package powerscale_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/arrayclients/internal/arraytest"
	"github.com/fenced-project/fenced/arrayclients/powerscale"
	"github.com/fenced-project/fenced/tests/arraysim/fixture"
	scsim "github.com/fenced-project/fenced/tests/arraysim/powerscale"
	"github.com/fenced-project/fenced/tests/arraysim/simcore"
)

const scFixture = `
nodes:
  - {name: worker-1, ip: 127.0.10.1, fqdn: worker-1.cluster.local}
  - {name: worker-2, ip: 127.0.10.2, fqdn: worker-2.cluster.local}
  - {name: worker-3, ip: 127.0.10.3, fqdn: worker-3.cluster.local}
arrays:
  - name: pscale-1
    family: powerscale
    spec:
      pageSize: 3
      zones: [tenant-b]
      exports:
        - {paths: [/ifs/data/tenant-b], zone: tenant-b, clients: [127.0.10.1, worker-1.cluster.local]}
        - {paths: [/ifs/data/static], clients: [127.0.10.2], readOnlyClients: [worker-1, 127.0.10.3]}
      perNode:
        exports: 3
        shared: 2
        lists: [clients, rootClients, readWriteClients, readOnlyClients]
        forms: [fqdn, ip, name]
`

type scEnv struct {
	sim   *scsim.Sim
	srv   *simcore.Server
	url   string
	nodes map[string]fixture.Node
	cfg   arrayclients.Config
}

func newSCEnv(t testing.TB, fixtureYAML string, wrap func(http.Handler) http.Handler) *scEnv {
	t.Helper()
	fx, err := fixture.Parse([]byte(fixtureYAML))
	require.NoError(t, err)
	arr, ok := fx.Array("pscale-1")
	require.True(t, ok)
	sim, err := scsim.New(&arr.Spec, fx.Nodes)
	require.NoError(t, err)
	srv := simcore.New("pscale-1", sim, nil)
	var h http.Handler = srv
	if wrap != nil {
		h = wrap(srv)
	}
	l, err := simcore.Serve(h, "127.0.0.1:0", true, t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	e := &scEnv{sim: sim, srv: srv, url: l.URL, nodes: map[string]fixture.Node{}, cfg: arrayclients.Config{
		Name: "pscale-1", Family: arrayclients.PowerScale, Endpoint: l.URL, Insecure: true,
		Username: scsim.DefaultUsername, Password: scsim.DefaultPassword, RequestTimeout: 2 * time.Second,
	}}
	for _, n := range fx.Nodes {
		e.nodes[n.Name] = n
	}
	return e
}

func (e *scEnv) adapter(t testing.TB, mutate func(*arrayclients.Config)) arrayclients.Adapter {
	t.Helper()
	cfg := e.cfg
	if mutate != nil {
		mutate(&cfg)
	}
	a, err := powerscale.NewPowerScale(context.Background(), cfg, nil)
	require.NoError(t, err)
	return a
}

func (e *scEnv) node(name string) arrayclients.Node {
	n := e.nodes[name]
	return arrayclients.Node{Cluster: "c1", Name: n.Name, Addresses: []string{n.IP}, FQDN: n.FQDN, CSINodeIDs: n.CSINodeIDs("")}
}

// withoutNode is the export state with one node's strings taken out, to
// show that nothing else changed.
func withoutNode(s scsim.Snapshot, n fixture.Node) string {
	drop := func(l []string) []string {
		var out []string
		for _, v := range l {
			if v != n.IP && !strings.EqualFold(v, n.Name) && !strings.EqualFold(v, n.FQDN) {
				out = append(out, v)
			}
		}
		return out
	}
	var out []scsim.ExportState
	for _, x := range s.Exports {
		x.Clients, x.RootClients = drop(x.Clients), drop(x.RootClients)
		x.ReadWriteClients, x.ReadOnlyClients = drop(x.ReadWriteClients), drop(x.ReadOnlyClients)
		out = append(out, x)
	}
	b, _ := json.Marshal(out)
	return string(b)
}

func TestPowerScaleFenceCycle(t *testing.T) {
	for _, session := range []bool{false, true} {
		t.Run("session="+strconv.FormatBool(session), func(t *testing.T) {
			e := newSCEnv(t, scFixture, nil)
			a := e.adapter(t, func(c *arrayclients.Config) { c.SessionAuth = session })
			ctx := context.Background()
			before := e.sim.State()
			n := e.nodes["worker-1"]

			id, err := a.Resolve(ctx, e.node("worker-1"))
			require.NoError(t, err)
			assert.Equal(t, []string{n.IP, n.Name, n.FQDN}, id.Keys)
			seq := e.srv.LastSeq()
			plan, err := a.Plan(ctx, id, nil)
			require.NoError(t, err)
			assert.Empty(t, arraytest.WritesSince(e.srv, seq))
			plan = arraytest.RoundTrip(t, plan)
			t.Log(plan.Summary)
			var entries struct {
				Exports []struct {
					ID      int
					Entries []struct{ List, Value string }
				}
			}
			require.NoError(t, json.Unmarshal(plan.Entries, &entries))
			require.Len(t, entries.Exports, 6, "3 own + 2 shared + the static export; not the other zone")
			lists := map[string]bool{}
			for _, x := range entries.Exports {
				for _, en := range x.Entries {
					lists[en.List] = true
				}
			}
			assert.Len(t, lists, 4, "the node is in all four lists somewhere")

			require.NoError(t, a.Apply(ctx, plan))
			v, err := a.Verify(ctx, plan)
			require.NoError(t, err)
			assert.True(t, v.Fenced, "remaining: %v", v.Remaining)
			assert.Len(t, v.Missing, 6)
			fenced := e.sim.State()
			assert.Equal(t, withoutNode(before, n), withoutNode(fenced, n), "nothing but the node's entries changed")
			for _, x := range fenced.Exports {
				if x.Zone == "System" && strings.HasPrefix(x.Paths[0], "/ifs/data/csi/") {
					assert.Subset(t, x.Clients, []string{"localhost", "127.0.0.1"})
				}
			}
			assert.Equal(t, before.Exports[0], fenced.Exports[0], "the other zone is untouched")

			seq = e.srv.LastSeq()
			require.NoError(t, a.Apply(ctx, plan))
			assert.Empty(t, arraytest.WritesSince(e.srv, seq), "the second Apply writes nothing")

			require.NoError(t, a.Undo(ctx, plan, arrayclients.RestoreScope{}))
			v, err = a.Verify(ctx, plan)
			require.NoError(t, err)
			assert.False(t, v.Fenced)
			assert.True(t, v.Restored, "missing: %v", v.Missing)
			seq = e.srv.LastSeq()
			require.NoError(t, a.Undo(ctx, plan, arrayclients.RestoreScope{}))
			assert.Empty(t, arraytest.WritesSince(e.srv, seq), "the second Undo writes nothing")
			assert.Equal(t, arraytest.DumpJSON(t, before), arraytest.DumpJSON(t, e.sim.State()), "state after Undo equals state before Plan, list order included")
		})
	}
}

func TestPowerScaleApplyInterrupted(t *testing.T) {
	e := newSCEnv(t, scFixture, nil)
	a := e.adapter(t, nil)
	ctx := context.Background()
	before := e.sim.State()
	id, err := a.Resolve(ctx, e.node("worker-2"))
	require.NoError(t, err)
	plan, err := a.Plan(ctx, id, nil)
	require.NoError(t, err)
	var entries struct{ Exports []struct{ ID int } }
	require.NoError(t, json.Unmarshal(plan.Entries, &entries))
	require.Greater(t, len(entries.Exports), 3)
	third := entries.Exports[2].ID
	e.srv.AddFault(simcore.Fault{Kind: simcore.FaultError, Method: "PUT", Status: 500, Count: 1,
		Path: "^/platform/2/protocols/nfs/exports/" + strconv.Itoa(third) + "$"})
	require.Error(t, a.Apply(ctx, plan))
	v, err := a.Verify(ctx, plan)
	require.NoError(t, err)
	assert.False(t, v.Fenced)
	assert.Len(t, v.Remaining, len(entries.Exports)-2, "the first two exports are done: %v", v.Remaining)
	require.NoError(t, a.Apply(ctx, plan), "a retry completes")
	v, err = a.Verify(ctx, plan)
	require.NoError(t, err)
	assert.True(t, v.Fenced)
	require.NoError(t, a.Undo(ctx, plan, arrayclients.RestoreScope{}))
	assert.Equal(t, arraytest.DumpJSON(t, before), arraytest.DumpJSON(t, e.sim.State()))
}

func TestPowerScaleIdentity(t *testing.T) {
	e := newSCEnv(t, scFixture, nil)
	a := e.adapter(t, nil)
	ctx := context.Background()
	seq := e.srv.LastSeq()

	_, err := a.Resolve(ctx, arrayclients.Node{Name: "no-driver"})
	require.ErrorIs(t, err, arrayclients.ErrNoIdentity)
	_, err = a.Resolve(ctx, arrayclients.Node{Name: "bad", CSINodeIDs: map[string]string{arrayclients.DriverPowerScale: "bad=#=#=bad"}})
	require.ErrorContains(t, err, "want name=#=#=fqdn=#=#=ip")
	for _, o := range []string{"localhost", "worker-1,127.0.0.1", "127.0.10.0/24", "@ng"} {
		_, err = a.Resolve(ctx, arrayclients.Node{Name: "worker-1", Override: o})
		require.ErrorIs(t, err, arrayclients.ErrAmbiguousIdentity, o)
	}
	id, err := a.Resolve(ctx, arrayclients.Node{Name: "worker-3", Override: "127.0.10.3, worker-3"})
	require.NoError(t, err)
	assert.Equal(t, []string{"127.0.10.3", "worker-3"}, id.Keys)
	// A node with several IPs (AzNetwork interfaces) lists them all.
	id, err = a.Resolve(ctx, arrayclients.Node{Name: "worker-3", Override: "127.0.10.3,127.0.20.3,worker-3,127.0.10.3"})
	require.NoError(t, err)
	assert.Equal(t, []string{"127.0.10.3", "127.0.20.3", "worker-3"}, id.Keys)

	id, err = a.Resolve(ctx, e.node("worker-1"))
	require.NoError(t, err)
	plan, err := a.Plan(ctx, id, nil)
	require.NoError(t, err)
	other := plan
	other.Array = "pscale-2"
	require.ErrorIs(t, a.Apply(ctx, other), arrayclients.ErrPlanMismatch)
	zoneB := e.adapter(t, func(c *arrayclients.Config) { c.Zone = "tenant-b" })
	require.ErrorIs(t, zoneB.Undo(ctx, plan, arrayclients.RestoreScope{}), arrayclients.ErrPlanMismatch)
	forged := plan
	forged.Entries = json.RawMessage(`{"zone":"System","keys":["127.0.10.1"],"exports":[{"id":3,"entries":[{"list":"clients","value":"localhost"}]}]}`)
	require.ErrorIs(t, a.Apply(ctx, forged), arrayclients.ErrPlanMismatch, "a plan never removes localhost")
	assert.Empty(t, arraytest.WritesSince(e.srv, seq), "no identity problem ever writes")
}

func TestPowerScalePlanRefusesUnfenceableAccess(t *testing.T) {
	cases := map[string]string{
		"subnet":   "        - {paths: [/ifs/data/subnet], clients: [127.0.10.0/24]}\n",
		"netgroup": "        - {paths: [/ifs/data/ng], clients: [\"@k8s-nodes\"]}\n",
		"wildcard": "        - {paths: [/ifs/data/wild], clients: [\"worker-*.cluster.local\"]}\n",
		"open":     "        - {paths: [/ifs/data/open]}\n",
		"only":     "        - {paths: [/ifs/data/only], rootClients: [worker-1.cluster.local]}\n",
	}
	for name, extra := range cases {
		t.Run(name, func(t *testing.T) {
			fx := strings.Replace(scFixture, "      perNode:\n", extra+"      perNode:\n", 1)
			e := newSCEnv(t, fx, nil)
			a := e.adapter(t, nil)
			ctx := context.Background()
			id, err := a.Resolve(ctx, e.node("worker-1"))
			require.NoError(t, err)
			_, err = a.Plan(ctx, id, nil)
			require.ErrorIs(t, err, arrayclients.ErrAmbiguousIdentity)
			t.Log(err)
			assert.Empty(t, e.srv.AuditWrites())
		})
	}
}

func TestPowerScaleHealth(t *testing.T) {
	e := newSCEnv(t, scFixture, nil)
	a := e.adapter(t, func(c *arrayclients.Config) { c.RequestTimeout = 300 * time.Millisecond })
	ctx := context.Background()
	// worker-2: worker-1 is also listed in zone tenant-b, which this
	// adapter (zone System) does not fence, so its traffic would go on.
	id, err := a.Resolve(ctx, e.node("worker-2"))
	require.NoError(t, err)

	h, err := a.Health(ctx, id)
	require.NoError(t, err)
	arraytest.RequireReadOnlyProbes(t, e.srv)
	assert.Equal(t, arrayclients.ConnectivityUnknown, h.Connectivity, "absence of traffic is not disconnection")
	assert.Equal(t, arrayclients.IOIdle, h.IO)

	require.NoError(t, e.sim.SetSignals("worker-2", simcore.Signals{IOActive: simcore.Bool(true)}))
	h, err = a.Health(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, arrayclients.Connected, h.Connectivity)
	assert.Equal(t, arrayclients.IOActive, h.IO, h.Reason)

	plan, err := a.Plan(ctx, id, nil)
	require.NoError(t, err)
	require.NoError(t, a.Apply(ctx, plan))
	h, err = a.Health(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, arrayclients.IOIdle, h.IO, "a fenced node's traffic stops")
	assert.Equal(t, arrayclients.ConnectivityUnknown, h.Connectivity)

	fid := e.srv.AddFault(simcore.Fault{Kind: simcore.FaultHang})
	start := time.Now()
	h, err = a.Health(ctx, id)
	require.ErrorIs(t, err, arrayclients.ErrUnreachable)
	assert.Equal(t, arrayclients.ConnectivityUnknown, h.Connectivity)
	assert.Equal(t, arrayclients.IOUnknown, h.IO)
	assert.Less(t, time.Since(start), 3*time.Second)
	assert.False(t, a.Check(ctx).Reachable)
	e.srv.RemoveFault(fid)
	res := a.Check(ctx)
	assert.True(t, res.Reachable, res.Error)
	assert.Equal(t, "platform 16, OneFS 9.5.0.0", res.APIVersion)
}

func TestPowerScaleAuth(t *testing.T) {
	e := newSCEnv(t, scFixture, nil)
	ctx := context.Background()
	for _, session := range []bool{false, true} {
		bad := e.adapter(t, func(c *arrayclients.Config) { c.Password = "wrong-pw"; c.SessionAuth = session })
		id, err := bad.Resolve(ctx, e.node("worker-1"))
		require.NoError(t, err, "Resolve reads nothing")
		_, err = bad.Plan(ctx, id, nil)
		require.ErrorIs(t, err, arrayclients.ErrUnreachable)
		assert.NotContains(t, err.Error(), "wrong-pw")
	}
	a := e.adapter(t, func(c *arrayclients.Config) { c.SessionAuth = true })
	id, err := a.Resolve(ctx, e.node("worker-1"))
	require.NoError(t, err)
	plan, err := a.Plan(ctx, id, nil)
	require.NoError(t, err)
	e.sim.ExpireSessions()
	seq := e.srv.LastSeq()
	require.NoError(t, a.Apply(ctx, plan), "401 on a stale session, then a new session")
	var logins int
	for _, x := range e.srv.AuditSince(seq) {
		if strings.HasPrefix(x.Path, "/session/1/session") && x.Status == 201 {
			logins++
		}
	}
	assert.Positive(t, logins)

	_, err = powerscale.NewPowerScale(context.Background(), arrayclients.Config{Name: "x", Endpoint: e.url, Username: "u", Password: "p", CAFile: "ca.pem"}, nil)
	require.ErrorContains(t, err, "caFile")
}

func TestPowerScaleFaultModes(t *testing.T) {
	e := newSCEnv(t, scFixture, nil)
	a := e.adapter(t, func(c *arrayclients.Config) { c.RequestTimeout = 300 * time.Millisecond })
	ctx := context.Background()
	id, err := a.Resolve(ctx, e.node("worker-1"))
	require.NoError(t, err)
	for _, f := range []simcore.Fault{
		{Kind: simcore.FaultError, Status: 503},
		{Kind: simcore.FaultError, Status: 400},
		{Kind: simcore.FaultReset},
		{Kind: simcore.FaultHang},
		{Kind: simcore.FaultMalformed},
	} {
		t.Run(f.Kind+"/"+arraytest.StatusLabel(f.Status), func(t *testing.T) {
			f.Path = "^/platform/4/protocols/nfs/exports"
			fid := e.srv.AddFault(f)
			defer e.srv.RemoveFault(fid)
			start := time.Now()
			_, err := a.Plan(ctx, id, nil)
			require.Error(t, err)
			assert.Less(t, time.Since(start), 3*time.Second)
			if f.Kind == simcore.FaultMalformed || f.Status == 400 {
				assert.NotErrorIs(t, err, arrayclients.ErrUnreachable)
			} else {
				assert.ErrorIs(t, err, arrayclients.ErrUnreachable)
			}
		})
	}
}

func TestPowerScaleEmptyErrorListDoesNotPanic(t *testing.T) {
	// A server answering {"errors":[]} makes goisilon's JSONError.Error
	// index an empty slice; the adapter must turn it into a plain error.
	e := newSCEnv(t, scFixture, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasPrefix(r.URL.Path, "/platform/4/") {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusInternalServerError)
				_, _ = w.Write([]byte(`{"errors":[]}`))
				return
			}
			next.ServeHTTP(w, r)
		})
	})
	a := e.adapter(t, nil)
	id, err := a.Resolve(context.Background(), e.node("worker-1"))
	require.NoError(t, err)
	require.NotPanics(t, func() {
		_, err = a.Plan(context.Background(), id, nil)
	})
	require.ErrorContains(t, err, "empty error list")
}

func TestPowerScaleConcurrentFences(t *testing.T) {
	e := newSCEnv(t, scFixture, nil)
	a := e.adapter(t, func(c *arrayclients.Config) { c.SessionAuth = true })
	ctx := context.Background()
	before := arraytest.DumpJSON(t, e.sim.State())
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	// worker-3 is left out: with worker-1 and worker-2 fenced, removing it
	// too would empty the static export (refused, see the "only" case).
	for _, name := range []string{"worker-1", "worker-2"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- arraytest.Cycle(ctx, a, e.node(name))
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		// Nodes share exports: the adapter serialises the read-modify-write
		// of each export, so no fence puts back another's removed entry.
		require.NoError(t, err)
	}
	assert.Equal(t, before, arraytest.DumpJSON(t, e.sim.State()))
}

// TestPowerScaleInterleavedFencesRestoreBoth is the interleaving that
// TestPowerScaleConcurrentFences hits only by chance: worker-2's fence is
// planned after worker-1's has removed its entries from the shared
// exports, and worker-1 is unfenced first. worker-1's returning entries
// are not new clients of the exports, so worker-2's unfence gives its own
// back too.
func TestPowerScaleInterleavedFencesRestoreBoth(t *testing.T) {
	e := newSCEnv(t, scFixture, nil)
	a := e.adapter(t, nil)
	ctx := context.Background()
	before := arraytest.DumpJSON(t, e.sim.State())
	fence := func(name string) arrayclients.Plan {
		id, err := a.Resolve(ctx, e.node(name))
		require.NoError(t, err)
		p, err := a.Plan(ctx, id, nil)
		require.NoError(t, err)
		require.NoError(t, a.Apply(ctx, p))
		return p
	}
	unfence := func(p arrayclients.Plan) {
		require.NoError(t, a.Undo(ctx, p, arrayclients.RestoreScope{}))
		v, err := a.Verify(ctx, p)
		require.NoError(t, err)
		assert.True(t, v.Restored, "%s not given back: %v", p.Identity.Node, v.Missing)
	}
	p1 := fence("worker-1")
	p2 := fence("worker-2")
	unfence(p1)
	unfence(p2)
	assert.Equal(t, before, arraytest.DumpJSON(t, e.sim.State()))
}

// TestPowerScaleReadBacksShareExportListings: plans and read-backs running
// at once share a listing of the zone's exports begun after each started,
// instead of one listing each; a read-back that starts after a write still
// lists the exports again and sees it.
func TestPowerScaleReadBacksShareExportListings(t *testing.T) {
	slow := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/nfs/exports/") {
				time.Sleep(100 * time.Millisecond) // the listings overlap
			}
			h.ServeHTTP(w, r)
		})
	}
	e := newSCEnv(t, scFixture, slow)
	a := e.adapter(t, nil)
	ctx := context.Background()
	id, err := a.Resolve(ctx, e.node("worker-1"))
	require.NoError(t, err)
	plan, err := a.Plan(ctx, id, nil)
	require.NoError(t, err)

	listings := func(seq int64) int {
		n := 0
		for _, x := range e.srv.AuditSince(seq) {
			if x.Method == http.MethodGet && strings.Contains(x.Path, "/nfs/exports/?") && !strings.Contains(x.Path, "resume=") {
				n++
			}
		}
		return n
	}
	const calls = 12
	seq := e.srv.LastSeq()
	var wg sync.WaitGroup
	results := make([]arrayclients.Verification, calls)
	errs := make([]error, calls)
	for i := range calls {
		wg.Go(func() { results[i], errs[i] = a.Verify(ctx, plan) })
	}
	wg.Wait()
	for i := range calls {
		require.NoError(t, errs[i])
		assert.False(t, results[i].Fenced, "not applied yet")
	}
	assert.Less(t, listings(seq), calls/2, "%d read-backs at once share listings", calls)

	require.NoError(t, a.Apply(ctx, plan))
	seq = e.srv.LastSeq()
	v, err := a.Verify(ctx, plan)
	require.NoError(t, err)
	assert.True(t, v.Fenced, "a read-back after the write lists again: remaining %v", v.Remaining)
	assert.Equal(t, 1, listings(seq))
}
