package powermax_test

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
	"github.com/fenced-project/fenced/arrayclients/powermax"
	"github.com/fenced-project/fenced/tests/arraysim/fixture"
	powermaxsim "github.com/fenced-project/fenced/tests/arraysim/powermax"
	"github.com/fenced-project/fenced/tests/arraysim/simcore"
)

const pmaxSym = "000197900046"

// pmaxFixture has three FC nodes (two initiators, two paths each, three
// volumes), one with a second, iSCSI host (ambiguous), and a host of no node.
const pmaxFixture = `
nodes:
  - {name: worker-1, ip: 127.0.10.1, wwpns: ["10000000c9a0b001", "10000000c9a0b101"]}
  - {name: worker-2, ip: 127.0.10.2, wwpns: ["10000000c9a0b002", "10000000c9a0b102"]}
  - {name: worker-3, ip: 127.0.10.3, wwpns: ["10000000c9a0b003", "10000000c9a0b103"]}
arrays:
  - name: pmax-1
    family: powermax
    spec:
      symmetrixID: "000197900046"
      username: smc
      password: secret
      generate: {clusterPrefix: TST, protocol: FC, volumesPerNode: 3}
      hosts:
        - id: csi-node-TST-worker-3
          initiators: [{id: "iqn.1994-05.com.redhat:worker-3", paths: ["SE-1E:000"]}]
          volumes: ["00300"]
        - id: oracle-rac-1
          type: Fibre
          initiators: [{id: "10000000c9a0b0ff", paths: ["FA-1D:4"]}]
          volumes: ["00400"]
`

type pmaxEnv struct {
	srv     *simcore.Server
	sim     *powermaxsim.Sim
	adapter *powermax.PowerMaxAdapter
	cfg     arrayclients.Config
	close   func() error
}

func startPowerMax(t testing.TB, doc string, timeout time.Duration) pmaxEnv {
	t.Helper()
	f, err := fixture.Parse([]byte(doc))
	require.NoError(t, err)
	sim, err := powermaxsim.New(&f.Arrays[0].Spec, f.Nodes)
	require.NoError(t, err)
	srv := simcore.New("pmax-1", sim, nil)
	l, err := simcore.Serve(srv, "127.0.0.1:0", true, t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	cfg := arrayclients.Config{
		Name: "pmax-1", Family: arrayclients.PowerMax, Endpoint: l.URL, Username: "smc", Password: "secret",
		CAFile: l.CAFile, RequestTimeout: timeout, SymmetrixID: pmaxSym,
	}
	a, err := powermax.NewPowerMaxWithPrefixes(context.Background(), cfg, powermax.PowerMaxPrefixes{"": "TST"}, nil)
	require.NoError(t, err)
	return pmaxEnv{srv: srv, sim: sim, adapter: a, cfg: cfg, close: l.Close}
}

func pmaxNode(name string) arrayclients.Node {
	return arrayclients.Node{Cluster: "c1", Name: name, CSINodeIDs: map[string]string{arrayclients.DriverPowerMax: name}}
}

// pmaxState is the simulator dump, split per host for "others untouched".
func pmaxState(t testing.TB, sim *powermaxsim.Sim) (all string, hosts map[string]string) {
	t.Helper()
	b, err := json.Marshal(sim.Snapshot())
	require.NoError(t, err)
	var s struct {
		Hosts      []json.RawMessage `json:"hosts"`
		Initiators []struct {
			ID   string `json:"initiatorId"`
			Host string `json:"host"`
		} `json:"initiators"`
	}
	require.NoError(t, json.Unmarshal(b, &s))
	hosts = map[string]string{}
	for _, h := range s.Hosts {
		var id struct {
			HostID string `json:"hostId"`
		}
		require.NoError(t, json.Unmarshal(h, &id))
		hosts[id.HostID] = string(h)
	}
	return string(b), hosts
}

func TestPowerMaxFenceCycle(t *testing.T) {
	e := startPowerMax(t, pmaxFixture, 5*time.Second)
	ctx := context.Background()
	before, hostsBefore := pmaxState(t, e.sim)

	id, err := e.adapter.Resolve(ctx, pmaxNode("worker-1"))
	require.NoError(t, err)
	assert.Equal(t, "csi-node-TST-worker-1-FC", id.ObjectID)
	assert.Equal(t, []string{"10000000c9a0b001", "10000000c9a0b101"}, id.Keys)

	plan, err := e.adapter.Plan(ctx, id, nil)
	require.NoError(t, err)
	var entries powermax.PowerMaxEntries
	require.NoError(t, json.Unmarshal(plan.Entries, &entries))
	assert.Equal(t, []string{"10000000c9a0b001", "10000000c9a0b101"}, entries.Initiators)
	assert.Equal(t, []powermax.PowerMaxView{{ID: "csi-mv-TST-worker-1-FC", StorageGroup: "csi-no-srp-sg-TST-worker-1-FC", PortGroup: "csi-TST-fc-PG"}}, entries.MaskingViews)
	assert.Contains(t, plan.Summary, "remove 2 initiator(s)")
	assert.Empty(t, e.srv.AuditWrites(), "resolve and plan never write")

	v, err := e.adapter.Verify(ctx, plan)
	require.NoError(t, err)
	assert.False(t, v.Fenced)
	assert.True(t, v.Restored)
	assert.Len(t, v.Remaining, 2)

	require.NoError(t, e.adapter.Apply(ctx, plan))
	v, err = e.adapter.Verify(ctx, plan)
	require.NoError(t, err)
	assert.True(t, v.Fenced, "%+v", v)
	assert.Empty(t, v.Remaining)
	assert.Len(t, v.Missing, 2)
	writes := len(e.srv.AuditWrites())
	assert.Equal(t, 1, writes)

	require.NoError(t, e.adapter.Apply(ctx, plan), "apply twice")
	assert.Len(t, e.srv.AuditWrites(), writes, "a second apply writes nothing")

	_, hostsFenced := pmaxState(t, e.sim)
	for h, s := range hostsBefore {
		if h != id.ObjectID {
			assert.Equal(t, s, hostsFenced[h], "host %s untouched", h)
		}
	}

	require.NoError(t, e.adapter.Undo(ctx, plan, arrayclients.RestoreScope{}))
	v, err = e.adapter.Verify(ctx, plan)
	require.NoError(t, err)
	assert.False(t, v.Fenced)
	assert.True(t, v.Restored)
	require.NoError(t, e.adapter.Undo(ctx, plan, arrayclients.RestoreScope{}), "undo twice")
	assert.Len(t, e.srv.AuditWrites(), writes+1, "a second undo writes nothing")

	after, _ := pmaxState(t, e.sim)
	assert.Equal(t, before, after, "the dump after undo equals the dump before plan")
}

func TestPowerMaxApplyInterruptedThenRetried(t *testing.T) {
	e := startPowerMax(t, pmaxFixture, 5*time.Second)
	ctx := context.Background()
	id, err := e.adapter.Resolve(ctx, pmaxNode("worker-2"))
	require.NoError(t, err)
	plan, err := e.adapter.Plan(ctx, id, nil)
	require.NoError(t, err)

	// The PUT that removes the initiators fails: the array changed nothing.
	e.srv.AddFault(simcore.Fault{Kind: simcore.FaultError, Method: http.MethodPut, Status: http.StatusInternalServerError, Count: 1})
	require.Error(t, e.adapter.Apply(ctx, plan))
	v, err := e.adapter.Verify(ctx, plan)
	require.NoError(t, err)
	assert.False(t, v.Fenced)
	assert.Equal(t, []string{
		"initiator 10000000c9a0b002 in host csi-node-TST-worker-2-FC",
		"initiator 10000000c9a0b102 in host csi-node-TST-worker-2-FC",
	}, v.Remaining)

	// Part-way: one initiator was removed by hand (or by an earlier,
	// half-finished run); the retry removes what remains.
	c := e.rawHostEdit(t, "csi-node-TST-worker-2-FC", "removeInitiatorParam", "10000000c9a0b002")
	assert.Equal(t, http.StatusOK, c)
	v, err = e.adapter.Verify(ctx, plan)
	require.NoError(t, err)
	assert.False(t, v.Fenced)
	assert.Equal(t, []string{"initiator 10000000c9a0b102 in host csi-node-TST-worker-2-FC"}, v.Remaining)

	require.NoError(t, e.adapter.Apply(ctx, plan))
	v, err = e.adapter.Verify(ctx, plan)
	require.NoError(t, err)
	assert.True(t, v.Fenced)
	require.NoError(t, e.adapter.Undo(ctx, plan, arrayclients.RestoreScope{}))
	v, err = e.adapter.Verify(ctx, plan)
	require.NoError(t, err)
	assert.True(t, v.Restored)
}

// rawHostEdit sends one host edit straight to the simulator.
func (e pmaxEnv) rawHostEdit(t *testing.T, host, action, initiator string) int {
	t.Helper()
	body := fmt.Sprintf(`{"editHostActionParam":{"%s":{"initiator":["%s"]}},"executionOption":"SYNCHRONOUS"}`, action, initiator)
	req, err := http.NewRequest(http.MethodPut, "http://unused/univmax/restapi/100/sloprovisioning/symmetrix/"+pmaxSym+"/host/"+host, strings.NewReader(body))
	require.NoError(t, err)
	req.SetBasicAuth("smc", "secret")
	rec := &statusWriter{header: http.Header{}}
	e.srv.ServeHTTP(rec, req)
	return rec.status
}

type statusWriter struct {
	header http.Header
	status int
}

func (w *statusWriter) Header() http.Header         { return w.header }
func (w *statusWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *statusWriter) WriteHeader(s int)           { w.status = s }

func TestPowerMaxIdentityErrors(t *testing.T) {
	e := startPowerMax(t, pmaxFixture, 5*time.Second)
	ctx := context.Background()

	_, err := e.adapter.Resolve(ctx, pmaxNode("worker-3"))
	require.ErrorIs(t, err, arrayclients.ErrAmbiguousIdentity)
	require.ErrorContains(t, err, "csi-node-TST-worker-3, csi-node-TST-worker-3-FC")

	id, err := e.adapter.Resolve(ctx, arrayclients.Node{Name: "worker-3", Override: "csi-node-TST-worker-3-FC"})
	require.NoError(t, err, "an override settles it")
	assert.Equal(t, "csi-node-TST-worker-3-FC", id.ObjectID)

	_, err = e.adapter.Resolve(ctx, pmaxNode("worker-9"))
	require.ErrorIs(t, err, arrayclients.ErrNoIdentity)
	require.ErrorContains(t, err, "csi-node-TST-worker-9")

	_, err = e.adapter.Resolve(ctx, arrayclients.Node{Name: "worker-1"})
	require.ErrorIs(t, err, arrayclients.ErrNoIdentity, "no csi-powermax CSINode ID")

	_, err = e.adapter.Resolve(ctx, arrayclients.Node{Name: "x", Override: "../../system/symmetrix"})
	require.Error(t, err)
	require.NotErrorIs(t, err, arrayclients.ErrNoIdentity)
	require.ErrorContains(t, err, "override")

	noPrefix, err := powermax.NewPowerMaxWithPrefixes(ctx, e.cfg, powermax.PowerMaxPrefixes{"other": "OTH"}, nil)
	require.NoError(t, err)
	_, err = noPrefix.Resolve(ctx, pmaxNode("worker-1"))
	require.Error(t, err)
	require.NotErrorIs(t, err, arrayclients.ErrNoIdentity, "a missing prefix is not 'nothing to fence'")

	// A plan of another array is refused before anything is sent.
	id, err = e.adapter.Resolve(ctx, pmaxNode("worker-1"))
	require.NoError(t, err)
	plan, err := e.adapter.Plan(ctx, id, nil)
	require.NoError(t, err)
	plan.Array = "pmax-2"
	require.ErrorIs(t, e.adapter.Apply(ctx, plan), arrayclients.ErrPlanMismatch)
	assert.Empty(t, e.srv.AuditWrites(), "no identity problem ever wrote")
}

// pmaxFreshSamplesFixture is pmaxFixture with performance samples every
// 10 s: the I/O rule's idle and active answers need a sample of the last
// minute, which Unisphere's 5-minute samples seldom give (see
// TestPowerMaxIOStaleSamples for those).
var pmaxFreshSamplesFixture = strings.Replace(pmaxFixture, "      username: smc\n", "      username: smc\n      metricsIntervalSeconds: 10\n", 1)

func TestPowerMaxHealth(t *testing.T) {
	require.Contains(t, pmaxFreshSamplesFixture, "metricsIntervalSeconds: 10")
	e := startPowerMax(t, pmaxFreshSamplesFixture, 2*time.Second)
	ctx := context.Background()
	id, err := e.adapter.Resolve(ctx, pmaxNode("worker-1"))
	require.NoError(t, err)

	h, err := e.adapter.Health(ctx, id)
	require.NoError(t, err)
	arraytest.RequireReadOnlyProbes(t, e.srv)
	assert.Equal(t, arrayclients.Connected, h.Connectivity, h.Reason)
	assert.Equal(t, arrayclients.IOIdle, h.IO, h.Reason)
	// Unisphere's newest sample is the last completed 5-minute interval.
	assert.WithinDuration(t, time.Now(), h.SampledAt, 5*time.Minute)

	require.NoError(t, e.sim.SetSignals(id.ObjectID, simcore.Signals{IOActive: simcore.Bool(true)}))
	h, err = e.adapter.Health(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, arrayclients.IOActive, h.IO, h.Reason)

	require.NoError(t, e.sim.SetSignals(id.ObjectID, simcore.Signals{Connected: simcore.Bool(false)}))
	h, err = e.adapter.Health(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, arrayclients.Disconnected, h.Connectivity, h.Reason)
	assert.Equal(t, arrayclients.IOIdle, h.IO, h.Reason)

	// Samples ten minutes old say nothing about now.
	e.sim.SetClock(func() time.Time { return time.Now().Add(-10 * time.Minute) })
	h, err = e.adapter.Health(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, arrayclients.IOUnknown, h.IO, h.Reason)
	e.sim.SetClock(time.Now)

	// A fenced host still shows its node's initiators logged in.
	require.NoError(t, e.sim.SetSignals(id.ObjectID, simcore.Signals{Connected: simcore.Bool(true)}))
	plan, err := e.adapter.Plan(ctx, id, nil)
	require.NoError(t, err)
	require.NoError(t, e.adapter.Apply(ctx, plan))
	h, err = e.adapter.Health(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, arrayclients.Connected, h.Connectivity, h.Reason)
	assert.Equal(t, arrayclients.IOIdle, h.IO, "a host without initiators does no I/O: %s", h.Reason)

	require.NoError(t, e.close())
	h, err = e.adapter.Health(ctx, id)
	require.ErrorIs(t, err, arrayclients.ErrUnreachable)
	assert.Equal(t, arrayclients.ConnectivityUnknown, h.Connectivity)
	assert.Equal(t, arrayclients.IOUnknown, h.IO)
	assert.NotEmpty(t, h.Reason)
	assert.False(t, e.adapter.Check(ctx).Reachable)
}

// TestPowerMaxIOStaleSamples: Unisphere serves samples at 5-minute
// granularity, the newest a few minutes old. Such a sample still tells
// idle from active; one older than two intervals is unknown, whatever it
// says, never "no I/O".
func TestPowerMaxIOStaleSamples(t *testing.T) {
	e := startPowerMax(t, pmaxFixture, 2*time.Second)
	ctx := context.Background()
	id, err := e.adapter.Resolve(ctx, pmaxNode("worker-1"))
	require.NoError(t, err)
	health := func(ago time.Duration, busy bool) arrayclients.Health {
		t.Helper()
		e.sim.SetClock(func() time.Time { return time.Now().Add(-ago) })
		require.NoError(t, e.sim.SetSignals(id.ObjectID, simcore.Signals{IOActive: simcore.Bool(busy)}))
		h, err := e.adapter.Health(ctx, id)
		require.NoError(t, err)
		return h
	}
	// A newest sample 3 to 8 minutes old, as a real array usually answers:
	// it says nothing about the last minute, so the signal is unknown,
	// busy or not (csi-powermax's 60 s rule).
	for _, busy := range []bool{false, true} {
		h := health(3*time.Minute, busy)
		assert.Equal(t, arrayclients.IOUnknown, h.IO, "busy=%v: %s", busy, h.Reason)
		assert.Contains(t, h.Reason, "newest volume sample is")
		assert.GreaterOrEqual(t, time.Since(h.SampledAt), 3*time.Minute)
		assert.Equal(t, arrayclients.Connected, h.Connectivity, "connectivity does not depend on the samples")
	}
	// 12 to 17 minutes old: unknown too.
	for _, busy := range []bool{false, true} {
		h := health(12*time.Minute, busy)
		assert.Equal(t, arrayclients.IOUnknown, h.IO, "busy=%v: %s", busy, h.Reason)
	}
}

func TestPowerMaxCheckAndAuth(t *testing.T) {
	e := startPowerMax(t, pmaxFixture, 2*time.Second)
	ctx := context.Background()
	r := e.adapter.Check(ctx)
	assert.True(t, r.Reachable, r.Error)
	assert.Equal(t, "V10.1.0.2 (api 101)", r.APIVersion)

	bad := e.cfg
	bad.Password = "wrong"
	a, err := powermax.NewPowerMaxWithPrefixes(ctx, bad, powermax.PowerMaxPrefixes{"": "TST"}, nil)
	require.NoError(t, err)
	r = a.Check(ctx)
	assert.False(t, r.Reachable)
	assert.NotContains(t, r.Error, "wrong", "no secret in errors")
	_, err = a.Resolve(ctx, pmaxNode("worker-1"))
	require.ErrorIs(t, err, arrayclients.ErrUnreachable)

	_, err = powermax.NewPowerMax(ctx, arrayclients.Config{Name: "p", Endpoint: "https://api.example.com", SymmetrixID: pmaxSym}, nil)
	require.ErrorContains(t, err, "api")
	_, err = powermax.NewPowerMax(ctx, arrayclients.Config{Name: "p", Endpoint: "https://10.0.0.1", SymmetrixID: "46"}, nil)
	assert.ErrorContains(t, err, "symmetrixID")
}

func TestPowerMaxFaults(t *testing.T) {
	e := startPowerMax(t, pmaxFixture, 300*time.Millisecond)
	ctx := context.Background()
	id, err := e.adapter.Resolve(ctx, pmaxNode("worker-1"))
	require.NoError(t, err)
	hostPath := `/host/csi-node-TST-worker-1-FC$`
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
			tc.fault.Path = hostPath
			fid := e.srv.AddFault(tc.fault)
			defer e.srv.RemoveFault(fid)
			began := time.Now()
			_, err := e.adapter.Plan(ctx, id, nil)
			require.Error(t, err)
			assert.Equal(t, tc.unreachable, strings.Contains(err.Error(), arrayclients.ErrUnreachable.Error()), "%v", err)
			assert.Less(t, time.Since(began), 3*time.Second, "bounded by the request timeout")
		})
	}
	fid := e.srv.AddFault(simcore.Fault{Kind: simcore.FaultLatency, Path: hostPath, Latency: 50 * time.Millisecond})
	_, err = e.adapter.Plan(ctx, id, nil)
	require.NoError(t, err, "latency under the timeout is only slow")
	e.srv.RemoveFault(fid)
}

func TestPowerMaxConcurrentFences(t *testing.T) {
	doc := "nodes:\n"
	for i := range 12 {
		doc += fmt.Sprintf("  - {name: n%02d, ip: 127.0.11.%d, iqn: \"iqn.1994-05.com.redhat:n%02d\"}\n", i, i+1, i)
	}
	doc += "arrays:\n  - {name: pmax-1, family: powermax, spec: {username: smc, password: secret, generate: {clusterPrefix: TST, volumesPerNode: 2}}}\n"
	e := startPowerMax(t, doc, 5*time.Second)
	before, _ := pmaxState(t, e.sim)
	ctx := context.Background()
	var wg sync.WaitGroup
	plans := make([]arrayclients.Plan, 12)
	for i := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id, err := e.adapter.Resolve(ctx, pmaxNode(fmt.Sprintf("n%02d", i)))
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
	after, _ := pmaxState(t, e.sim)
	assert.Equal(t, before, after)
}

// TestRegistryBuildsPowerMaxAndUnity goes through New and the family's
// constructor: the PowerMax adapter comes out decorated, checked and able
// to fence, by override, since Config carries no cluster prefix (the
// Unity half of this test is with the Unity tests).
func TestRegistryBuildsPowerMaxAndUnity(t *testing.T) {
	p := startPowerMax(t, pmaxFixture, 5*time.Second)
	reg, err := arraytest.New(arrayclients.PowerMax, powermax.New, []arrayclients.Config{p.cfg}, arrayclients.Options{})
	require.NoError(t, err)
	ctx := context.Background()
	for _, r := range reg.Check(ctx) {
		assert.True(t, r.Reachable, "%s: %s", r.Array, r.Error)
	}

	pa, ok := reg.Get("pmax-1")
	require.True(t, ok)
	_, err = pa.Resolve(ctx, pmaxNode("worker-1"))
	require.Error(t, err, "no prefix in Config")
	require.NotErrorIs(t, err, arrayclients.ErrNoIdentity)
	id, err := pa.Resolve(ctx, arrayclients.Node{Name: "worker-1", Override: "csi-node-TST-worker-1-FC"})
	require.NoError(t, err)
	plan, err := pa.Plan(ctx, id, nil)
	require.NoError(t, err)
	require.NoError(t, pa.Apply(ctx, plan))
	v, err := pa.Verify(ctx, plan)
	require.NoError(t, err)
	assert.True(t, v.Fenced)
	require.NoError(t, pa.Undo(ctx, plan, arrayclients.RestoreScope{}))

	for _, endpoint := range []string{"/api", "https://api.example.com", "10.0.0.1"} {
		_, err = powermax.NewPowerMax(ctx, arrayclients.Config{Name: "p", Endpoint: endpoint, SymmetrixID: pmaxSym}, nil)
		assert.Error(t, err, endpoint)
	}
}
