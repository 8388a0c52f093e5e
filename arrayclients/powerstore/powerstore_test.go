package powerstore_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/arrayclients/internal/arraytest"
	"github.com/fenced-project/fenced/arrayclients/powerstore"
	"github.com/fenced-project/fenced/tests/arraysim/fixture"
	powerstoresim "github.com/fenced-project/fenced/tests/arraysim/powerstore"
	"github.com/fenced-project/fenced/tests/arraysim/simcore"
)

const psFixture = `
nodes:
  - {name: worker-1, ip: 127.0.10.1, machineID: 0a1b2c3d4e5f60718293a4b5c6d7e8f9, iqn: "iqn.1994-05.com.redhat:worker-1", wwpns: ["10000000c9a0b001", "10000000c9a0b002"]}
  - {name: worker-2, ip: 127.0.10.2, machineID: 1a1b2c3d4e5f60718293a4b5c6d7e8f9, iqn: "iqn.1994-05.com.redhat:worker-2", wwpns: ["10000000c9a0b003"]}
  - {name: worker-3, ip: 127.0.10.3, machineID: 2a1b2c3d4e5f60718293a4b5c6d7e8f9, iqn: "iqn.1994-05.com.redhat:worker-3", wwpns: ["10000000c9a0b004"]}
  - {name: worker-4, ip: 127.0.10.4, machineID: 3a1b2c3d4e5f60718293a4b5c6d7e8f9, iqn: "iqn.1994-05.com.redhat:worker-4"}
arrays:
  - name: pstore-1
    family: powerstore
    spec:
      pageSize: 2
      hostGroups: [{name: hg-workers, volumes: [{volume: shared-1, lun: 9}]}]
      hosts:
        - name: csi-node-3a1b2c3d4e5f60718293a4b5c6d7e8f9
          initiators: [{portName: "iqn.1994-05.com.redhat:worker-4"}]
        - name: csi-node-3a1b2c3d4e5f60718293a4b5c6d7e8f9-127.0.10.4
          initiators: [{portName: "iqn.1994-05.com.redhat:worker-4b"}]
      perNode:
        nodes: [worker-1, worker-2, worker-3]
        protocol: both
        volumes: 3
        hostGroup: hg-workers
`

// psEnv is a PowerStore simulator on loopback with an adapter on it.
type psEnv struct {
	sim   *powerstoresim.Sim
	srv   *simcore.Server
	url   string
	nodes map[string]fixture.Node
	cfg   arrayclients.Config
}

func newPSEnv(t testing.TB, fixtureYAML string) *psEnv {
	t.Helper()
	fx, err := fixture.Parse([]byte(fixtureYAML))
	require.NoError(t, err)
	arr, ok := fx.Array("pstore-1")
	require.True(t, ok)
	sim, err := powerstoresim.New(&arr.Spec, fx.Nodes)
	require.NoError(t, err)
	srv := simcore.New("pstore-1", sim, nil)
	l, err := simcore.Serve(srv, "127.0.0.1:0", true, t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	e := &psEnv{sim: sim, srv: srv, url: l.URL, nodes: map[string]fixture.Node{}, cfg: arrayclients.Config{
		Name: "pstore-1", Family: arrayclients.PowerStore, Endpoint: l.URL, CAFile: l.CAFile,
		Username: powerstoresim.DefaultUsername, Password: powerstoresim.DefaultPassword,
		RequestTimeout: 2 * time.Second,
	}}
	for _, n := range fx.Nodes {
		e.nodes[n.Name] = n
	}
	return e
}

func (e *psEnv) adapter(t testing.TB, mutate func(*arrayclients.Config)) arrayclients.Adapter {
	t.Helper()
	cfg := e.cfg
	if mutate != nil {
		mutate(&cfg)
	}
	a, err := powerstore.NewPowerStore(context.Background(), cfg, nil)
	require.NoError(t, err)
	return a
}

func (e *psEnv) node(name string) arrayclients.Node {
	n := e.nodes[name]
	return arrayclients.Node{Cluster: "c1", Name: n.Name, Addresses: []string{n.IP}, CSINodeIDs: n.CSINodeIDs("")}
}

func (e *psEnv) state(t testing.TB) powerstoresim.Snapshot {
	t.Helper()
	return e.sim.State()
}

// psSnap is a PowerStore snapshot with comparison helpers.
type psSnap powerstoresim.Snapshot

// without is the state of every host but one, with their mappings, and
// the volumes.
func (s psSnap) without(hostID string) string {
	var hosts []powerstoresim.HostState
	for _, h := range s.Hosts {
		if h.ID != hostID {
			hosts = append(hosts, h)
		}
	}
	var maps []powerstoresim.MappingState
	for _, m := range s.Mappings {
		if m.HostID != hostID {
			maps = append(maps, m)
		}
	}
	b, _ := json.Marshal([]any{hosts, maps, s.Volumes})
	return string(b)
}

func TestPowerStoreFenceCycle(t *testing.T) {
	for _, mode := range []string{arrayclients.PowerStoreModeInitiators, arrayclients.PowerStoreModeDetach} {
		t.Run(mode, func(t *testing.T) {
			e := newPSEnv(t, psFixture)
			a := e.adapter(t, func(c *arrayclients.Config) { c.PowerStoreFenceMode = mode })
			ctx := context.Background()
			before := e.state(t)

			id, err := a.Resolve(ctx, e.node("worker-1"))
			require.NoError(t, err)
			assert.Equal(t, e.node("worker-1").CSINodeIDs[arrayclients.DriverPowerStore], id.ObjectName)
			assert.Equal(t, []string{"10:00:00:00:c9:a0:b0:01", "10:00:00:00:c9:a0:b0:02", "127.0.10.1", "iqn.1994-05.com.redhat:worker-1"},
				id.Keys, "the host's three initiators, and the node's IP for NFS exports")

			seq := e.srv.LastSeq()
			plan, err := a.Plan(ctx, id, nil)
			require.NoError(t, err)
			assert.Empty(t, arraytest.WritesSince(e.srv, seq), "Plan never writes")
			plan = arraytest.RoundTrip(t, plan)
			t.Log(plan.Summary)

			require.NoError(t, a.Apply(ctx, plan))
			v, err := a.Verify(ctx, plan)
			require.NoError(t, err)
			assert.True(t, v.Fenced, "remaining: %v", v.Remaining)
			assert.False(t, v.Restored)
			assert.NotEmpty(t, v.Missing)
			afterFence := e.state(t)
			assert.Equal(t, psSnap(before).without(id.ObjectID), psSnap(afterFence).without(id.ObjectID),
				"other hosts, their mappings and the volumes are untouched")

			seq = e.srv.LastSeq()
			require.NoError(t, a.Apply(ctx, plan), "Apply twice")
			assert.Empty(t, arraytest.WritesSince(e.srv, seq), "the second Apply writes nothing")
			assert.Equal(t, afterFence, e.state(t))

			require.NoError(t, a.Undo(ctx, plan, arrayclients.RestoreScope{}))
			v, err = a.Verify(ctx, plan)
			require.NoError(t, err)
			assert.False(t, v.Fenced)
			assert.True(t, v.Restored, "missing: %v", v.Missing)
			seq = e.srv.LastSeq()
			require.NoError(t, a.Undo(ctx, plan, arrayclients.RestoreScope{}), "Undo twice")
			assert.Empty(t, arraytest.WritesSince(e.srv, seq), "the second Undo writes nothing")

			assert.Equal(t, arraytest.DumpJSON(t, before), arraytest.DumpJSON(t, e.state(t)), "state after Undo equals state before Plan")
		})
	}
}

func TestPowerStoreApplyInterrupted(t *testing.T) {
	t.Run("initiators", func(t *testing.T) {
		e := newPSEnv(t, psFixture)
		a := e.adapter(t, nil)
		ctx := context.Background()
		id, err := a.Resolve(ctx, e.node("worker-2"))
		require.NoError(t, err)
		plan, err := a.Plan(ctx, id, nil)
		require.NoError(t, err)
		e.srv.AddFault(simcore.Fault{Kind: simcore.FaultError, Method: "PATCH", Path: "^/api/rest/host/", Status: 500, Count: 1})
		require.Error(t, a.Apply(ctx, plan))
		v, err := a.Verify(ctx, plan)
		require.NoError(t, err)
		assert.False(t, v.Fenced)
		assert.Len(t, v.Remaining, 2, "both initiators remain: %v", v.Remaining)
		require.NoError(t, a.Apply(ctx, plan), "a retry completes")
		v, err = a.Verify(ctx, plan)
		require.NoError(t, err)
		assert.True(t, v.Fenced)
	})
	t.Run("detach", func(t *testing.T) {
		e := newPSEnv(t, psFixture)
		a := e.adapter(t, func(c *arrayclients.Config) { c.PowerStoreFenceMode = arrayclients.PowerStoreModeDetach })
		ctx := context.Background()
		before := e.state(t)
		id, err := a.Resolve(ctx, e.node("worker-2"))
		require.NoError(t, err)
		plan, err := a.Plan(ctx, id, nil)
		require.NoError(t, err)
		// The three detaches succeed; leaving the host group fails.
		e.srv.AddFault(simcore.Fault{Kind: simcore.FaultReset, Method: "PATCH", Path: "^/api/rest/host_group/", Count: 1})
		err = a.Apply(ctx, plan)
		require.Error(t, err)
		require.ErrorIs(t, err, arrayclients.ErrUnreachable)
		v, err := a.Verify(ctx, plan)
		require.NoError(t, err)
		assert.False(t, v.Fenced)
		require.Len(t, v.Remaining, 1)
		assert.Contains(t, v.Remaining[0], "host group")
		require.NoError(t, a.Apply(ctx, plan), "a retry completes")
		v, err = a.Verify(ctx, plan)
		require.NoError(t, err)
		assert.True(t, v.Fenced, "remaining: %v", v.Remaining)
		require.NoError(t, a.Undo(ctx, plan, arrayclients.RestoreScope{}))
		assert.Equal(t, arraytest.DumpJSON(t, before), arraytest.DumpJSON(t, e.state(t)))
	})
}

func TestPowerStoreIdentity(t *testing.T) {
	e := newPSEnv(t, psFixture)
	a := e.adapter(t, nil)
	ctx := context.Background()
	seq := e.srv.LastSeq()

	_, err := a.Resolve(ctx, arrayclients.Node{Name: "no-driver"})
	require.ErrorIs(t, err, arrayclients.ErrNoIdentity)
	assert.Contains(t, err.Error(), "no-driver")

	// worker-4 has hosts under both names csi-powerstore may use.
	_, err = a.Resolve(ctx, e.node("worker-4"))
	require.ErrorIs(t, err, arrayclients.ErrAmbiguousIdentity)
	assert.Contains(t, err.Error(), "set an override")
	id, err := a.Resolve(ctx, arrayclients.Node{Name: "worker-4", Override: "csi-node-3a1b2c3d4e5f60718293a4b5c6d7e8f9"})
	require.NoError(t, err, "an override resolves the ambiguity")
	assert.Equal(t, []string{"iqn.1994-05.com.redhat:worker-4"}, id.Keys)

	// Exact names only: a prefix, a longer name or another case is not the node.
	n := e.node("worker-1")
	full := n.CSINodeIDs[arrayclients.DriverPowerStore]
	for _, wrong := range []string{full[:len(full)-3], full + "0", strings.ToUpper(full)} {
		_, err = a.Resolve(ctx, arrayclients.Node{Name: "worker-1", Override: wrong})
		require.ErrorIs(t, err, arrayclients.ErrNoIdentity, wrong)
	}
	_, err = a.Resolve(ctx, arrayclients.Node{Name: "worker-1", Override: "a,b"})
	require.Error(t, err)

	id, err = a.Resolve(ctx, n)
	require.NoError(t, err)
	plan, err := a.Plan(ctx, id, nil)
	require.NoError(t, err)
	other := plan
	other.Array = "pstore-2"
	require.ErrorIs(t, a.Apply(ctx, other), arrayclients.ErrPlanMismatch)
	other = plan
	other.Entries = json.RawMessage(`{"mode":"bogus"}`)
	require.ErrorIs(t, a.Undo(ctx, other, arrayclients.RestoreScope{}), arrayclients.ErrPlanMismatch)
	assert.Empty(t, arraytest.WritesSince(e.srv, seq), "no identity problem ever writes")

	// The CSI controller's fallback name (no -<ip> suffix) is found too.
	e2 := newPSEnv(t, strings.Replace(psFixture, "        hostGroup: hg-workers", "        noIPSuffix: true\n        hostGroup: hg-workers", 1))
	id, err = e2.adapter(t, nil).Resolve(ctx, e2.node("worker-2"))
	require.NoError(t, err)
	assert.Equal(t, "csi-node-1a1b2c3d4e5f60718293a4b5c6d7e8f9", id.ObjectName)

	_, err = powerstore.NewPowerStore(context.Background(), arrayclients.Config{Name: "x", Endpoint: e.url, Username: "u", Password: "p",
		PowerStoreFenceMode: "unmap"}, nil)
	require.ErrorContains(t, err, "powerStoreFenceMode")
}

func TestPowerStoreHealth(t *testing.T) {
	e := newPSEnv(t, psFixture)
	a := e.adapter(t, func(c *arrayclients.Config) { c.RequestTimeout = 300 * time.Millisecond })
	ctx := context.Background()
	id, err := a.Resolve(ctx, e.node("worker-1"))
	require.NoError(t, err)

	h, err := a.Health(ctx, id)
	require.NoError(t, err)
	arraytest.RequireReadOnlyProbes(t, e.srv)
	assert.Equal(t, arrayclients.Connected, h.Connectivity)
	assert.Equal(t, arrayclients.IOIdle, h.IO)
	assert.WithinDuration(t, time.Now(), h.SampledAt, time.Minute)

	require.NoError(t, e.sim.SetSignals(id.ObjectName, simcore.Signals{IOActive: simcore.Bool(true)}))
	h, err = a.Health(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, arrayclients.IOActive, h.IO, h.Reason)

	require.NoError(t, e.sim.SetSignals(id.ObjectID, simcore.Signals{Connected: simcore.Bool(false), IOActive: simcore.Bool(false)}))
	h, err = a.Health(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, arrayclients.Disconnected, h.Connectivity)
	assert.Equal(t, arrayclients.IOIdle, h.IO)

	// Metrics older than a minute do not count as I/O.
	require.NoError(t, e.sim.SetSignals(id.ObjectID, simcore.Signals{IOActive: simcore.Bool(true)}))
	e.sim.SetClock(func() time.Time { return time.Now().Add(-5 * time.Minute) })
	h, err = a.Health(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, arrayclients.IOIdle, h.IO, h.Reason)
	e.sim.SetClock(time.Now)

	fid := e.srv.AddFault(simcore.Fault{Kind: simcore.FaultHang})
	start := time.Now()
	h, err = a.Health(ctx, id)
	require.ErrorIs(t, err, arrayclients.ErrUnreachable)
	assert.Equal(t, arrayclients.ConnectivityUnknown, h.Connectivity)
	assert.Equal(t, arrayclients.IOUnknown, h.IO)
	assert.Less(t, time.Since(start), 3*time.Second, "bounded by the request timeout")
	res := a.Check(ctx)
	assert.False(t, res.Reachable)
	assert.NotEmpty(t, res.Error)
	e.srv.RemoveFault(fid)

	res = a.Check(ctx)
	assert.True(t, res.Reachable, res.Error)
	assert.Equal(t, "4.1.0.0", res.APIVersion)
}

func TestPowerStoreAuth(t *testing.T) {
	e := newPSEnv(t, psFixture)
	ctx := context.Background()
	bad := e.adapter(t, func(c *arrayclients.Config) { c.Password = "wrong" })
	_, err := bad.Resolve(ctx, e.node("worker-1"))
	require.ErrorIs(t, err, arrayclients.ErrUnreachable)
	assert.NotContains(t, err.Error(), "wrong")
	res := bad.Check(ctx)
	assert.False(t, res.Reachable)

	a := e.adapter(t, nil)
	id, err := a.Resolve(ctx, e.node("worker-1"))
	require.NoError(t, err)
	plan, err := a.Plan(ctx, id, nil)
	require.NoError(t, err)
	e.sim.ExpireSessions()
	seq := e.srv.LastSeq()
	require.NoError(t, a.Apply(ctx, plan), "403 on a stale session, then a new login")
	var logins int
	for _, x := range e.srv.AuditSince(seq) {
		if strings.HasPrefix(x.Path, "/api/rest/login_session") {
			logins++
		}
	}
	assert.Positive(t, logins)
}

func TestPowerStoreFaultModes(t *testing.T) {
	e := newPSEnv(t, psFixture)
	a := e.adapter(t, func(c *arrayclients.Config) { c.RequestTimeout = 300 * time.Millisecond })
	ctx := context.Background()
	id, err := a.Resolve(ctx, e.node("worker-1"))
	require.NoError(t, err)
	for _, f := range []simcore.Fault{
		{Kind: simcore.FaultError, Status: 503},
		{Kind: simcore.FaultError, Status: 404},
		{Kind: simcore.FaultReset},
		{Kind: simcore.FaultHang},
		{Kind: simcore.FaultMalformed},
	} {
		t.Run(f.Kind+"/"+arraytest.StatusLabel(f.Status), func(t *testing.T) {
			f.Path = "^/api/rest/host/"
			fid := e.srv.AddFault(f)
			defer e.srv.RemoveFault(fid)
			start := time.Now()
			_, err := a.Plan(ctx, id, nil)
			require.Error(t, err)
			assert.Less(t, time.Since(start), 3*time.Second)
			switch {
			case f.Kind == simcore.FaultError && f.Status == 404:
				require.ErrorIs(t, err, arrayclients.ErrNoIdentity, "a 404 for the host means it is gone")
			case f.Kind == simcore.FaultMalformed:
				require.NotErrorIs(t, err, arrayclients.ErrUnreachable)
			default:
				assert.ErrorIs(t, err, arrayclients.ErrUnreachable)
			}
		})
	}
}

func TestPowerStoreConcurrentFences(t *testing.T) {
	yaml := psFixture
	e := newPSEnv(t, yaml)
	a := e.adapter(t, nil)
	ctx := context.Background()
	before := arraytest.DumpJSON(t, e.state(t))
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for _, name := range []string{"worker-1", "worker-2", "worker-3"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- arraytest.Cycle(ctx, a, e.node(name))
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	assert.Equal(t, before, arraytest.DumpJSON(t, e.state(t)))
}
