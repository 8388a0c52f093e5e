package powerflex_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/arrayclients/internal/arraytest"
	"github.com/fenced-project/fenced/arrayclients/powerflex"
	"github.com/fenced-project/fenced/tests/arraysim/fixture"
	powerflexsim "github.com/fenced-project/fenced/tests/arraysim/powerflex"
	"github.com/fenced-project/fenced/tests/arraysim/simcore"
)

// pflexFixture: worker-1 and worker-2 each have three volumes (with limits)
// plus a ReadOnly volume they share; two stale SDCs share one IP
// (ambiguous by IP); worker-9 has no SDC on the array.
const pflexFixture = `
nodes:
  - {name: worker-1, ip: 127.0.10.1, sdcGUID: 6A1B0001-0000-4000-8000-000000000001}
  - {name: worker-2, ip: 127.0.10.2, sdcGUID: 6A1B0002-0000-4000-8000-000000000002}
arrays:
  - name: pflex-1
    family: powerflex
    spec:
      username: admin
      password: s3cret-pw
      systems: [{id: 1a2b3c4d5e6f7a8b, name: sys-1}]
      perNode: {volumes: 3, limitIops: 500, limitBwInMbps: 10}
      sdcs:
        - {name: stale-a, guid: 6A1B00AA-0000-4000-8000-0000000000AA, ips: [127.0.30.1]}
        - {name: stale-b, guid: 6A1B00BB-0000-4000-8000-0000000000BB, ips: [127.0.30.1]}
      volumes:
        - name: shared-vol
          mappings:
            - {sdc: worker-1, accessMode: ReadOnly}
            - {sdc: worker-2, accessMode: ReadOnly}
`

type pflexEnv struct {
	sim     *powerflexsim.Sim
	srv     *simcore.Server
	url     string
	caFile  string
	cfg     arrayclients.Config
	adapter arrayclients.Adapter
	reg     *prometheus.Registry
	close   func() error
}

func startPowerFlex(t testing.TB, doc string, opts arrayclients.Options, timeout time.Duration) pflexEnv {
	t.Helper()
	fx, err := fixture.Parse([]byte(doc))
	require.NoError(t, err)
	sim, err := powerflexsim.New(&fx.Arrays[0].Spec, fx.Nodes)
	require.NoError(t, err)
	srv := simcore.New("pflex-1", sim, nil)
	srv.SetAuditLimit(0)
	l, err := simcore.Serve(srv, "127.0.0.1:0", true, t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	user, pass := sim.Credentials()
	cfg := arrayclients.Config{
		Name: "pflex-1", Family: arrayclients.PowerFlex, Endpoint: l.URL, Username: user, Password: pass,
		CAFile: l.CAFile, RequestTimeout: timeout, SystemID: "1a2b3c4d5e6f7a8b",
	}
	if opts.Registry == nil {
		opts.Registry = prometheus.NewRegistry()
	}
	reg, err := arraytest.New(arrayclients.PowerFlex, powerflex.NewPowerFlex, []arrayclients.Config{cfg}, opts)
	require.NoError(t, err)
	a, ok := reg.Get("pflex-1")
	require.True(t, ok)
	return pflexEnv{sim: sim, srv: srv, url: l.URL, caFile: l.CAFile, cfg: cfg, adapter: a, reg: opts.Registry, close: l.Close}
}

func pflexNode(name, guid string) arrayclients.Node {
	n := arrayclients.Node{Cluster: "c1", Name: name}
	if guid != "" {
		n.CSINodeIDs = map[string]string{arrayclients.DriverPowerFlex: guid}
	}
	return n
}

var (
	pflexW1 = pflexNode("worker-1", "6A1B0001-0000-4000-8000-000000000001")
	pflexW2 = pflexNode("worker-2", "6A1B0002-0000-4000-8000-000000000002")
)

// pflexWrites counts the audited requests that changed state.
func pflexWrites(e pflexEnv) int { return len(e.srv.AuditWrites()) }

// pflexWriteRequests counts audited write-method requests (changed or not).
func pflexWriteRequests(e pflexEnv) int {
	n := 0
	for _, a := range e.srv.Audit() {
		if simcore.IsWrite(a.Method) {
			n++
		}
	}
	return n
}

// pflexVolumesOf returns the volumes of the state mapped to the SDC, with
// their mapping.
func pflexVolumesOf(st powerflexsim.State, sdcID string) map[string]powerflexsim.Mapping {
	out := map[string]powerflexsim.Mapping{}
	for _, v := range st.Volumes {
		for _, m := range v.Mappings {
			if m.SdcID == sdcID {
				out[v.Name] = m
			}
		}
	}
	return out
}

func TestPowerFlexFenceVerifyUndo(t *testing.T) {
	ctx := context.Background()
	e := startPowerFlex(t, pflexFixture, arrayclients.Options{}, 5*time.Second)
	before := e.sim.State()
	w2, _ := e.sim.SDCID("worker-2")
	w2Before := pflexVolumesOf(before, w2)
	require.Len(t, w2Before, 4)

	id, err := e.adapter.Resolve(ctx, pflexW1)
	require.NoError(t, err)
	w1, _ := e.sim.SDCID("worker-1")
	assert.Equal(t, w1, id.ObjectID)
	assert.Equal(t, "worker-1", id.ObjectName)
	assert.Equal(t, []string{"6A1B0001-0000-4000-8000-000000000001", "127.0.10.1"}, id.Keys)

	plan, err := e.adapter.Plan(ctx, id, nil)
	require.NoError(t, err)
	var entries powerflex.PowerFlexEntries
	require.NoError(t, json.Unmarshal(plan.Entries, &entries))
	require.Len(t, entries.Mappings, 4)
	modes := map[string]powerflex.PowerFlexMapping{}
	for _, m := range entries.Mappings {
		modes[m.VolumeName] = m
	}
	assert.Equal(t, "ReadOnly", modes["shared-vol"].AccessMode)
	assert.Equal(t, powerflex.PowerFlexMapping{
		VolumeID: modes["worker-1-vol-0"].VolumeID, VolumeName: "worker-1-vol-0", AccessMode: "ReadWrite",
		LimitIops: 500, LimitBwInMbps: 10,
	}, modes["worker-1-vol-0"])
	assert.Zero(t, pflexWriteRequests(e), "resolve and plan never write")

	require.NoError(t, e.adapter.Apply(ctx, plan))
	v, err := e.adapter.Verify(ctx, plan)
	require.NoError(t, err)
	assert.True(t, v.Fenced)
	assert.False(t, v.Restored)
	assert.Empty(t, v.Remaining)
	assert.Len(t, v.Missing, 4)
	assert.Empty(t, e.sim.MappedVolumes("worker-1"))
	assert.Equal(t, w2Before, pflexVolumesOf(e.sim.State(), w2), "worker-2 untouched by the fence")

	require.NoError(t, e.adapter.Undo(ctx, plan, arrayclients.RestoreScope{}))
	v, err = e.adapter.Verify(ctx, plan)
	require.NoError(t, err)
	assert.False(t, v.Fenced)
	assert.True(t, v.Restored)
	assert.Len(t, v.Remaining, 4)
	assert.Empty(t, v.Missing)
	assert.Equal(t, before, e.sim.State(), "the dump after undo equals the dump before plan")

	// The array-side witness: 4 unmaps, 4 maps, 3 limit restores (the
	// shared volume has no limits), all by this client.
	writes := e.srv.AuditWrites()
	require.Len(t, writes, 11)
	for _, w := range writes {
		assert.NotContains(t, w.Change, w2, "no write touched worker-2's mappings")
	}
}

func TestPowerFlexApplyAndUndoAreIdempotent(t *testing.T) {
	ctx := context.Background()
	e := startPowerFlex(t, pflexFixture, arrayclients.Options{}, 5*time.Second)
	before := e.sim.State()
	id, err := e.adapter.Resolve(ctx, pflexW1)
	require.NoError(t, err)
	plan, err := e.adapter.Plan(ctx, id, nil)
	require.NoError(t, err)

	require.NoError(t, e.adapter.Apply(ctx, plan))
	writes, requests := pflexWrites(e), pflexWriteRequests(e)
	fenced := e.sim.State()
	require.NoError(t, e.adapter.Apply(ctx, plan), "a second apply succeeds")
	assert.Equal(t, fenced, e.sim.State())
	assert.Equal(t, writes, pflexWrites(e), "and changes nothing")
	assert.Equal(t, requests, pflexWriteRequests(e), "and sends no write at all")

	require.NoError(t, e.adapter.Undo(ctx, plan, arrayclients.RestoreScope{}))
	writes, requests = pflexWrites(e), pflexWriteRequests(e)
	require.NoError(t, e.adapter.Undo(ctx, plan, arrayclients.RestoreScope{}), "a second undo succeeds")
	assert.Equal(t, before, e.sim.State())
	assert.Equal(t, writes, pflexWrites(e))
	assert.Equal(t, requests, pflexWriteRequests(e))
}

func TestPowerFlexApplyInterruptedThenRetried(t *testing.T) {
	ctx := context.Background()
	e := startPowerFlex(t, pflexFixture, arrayclients.Options{}, 5*time.Second)
	id, err := e.adapter.Resolve(ctx, pflexW1)
	require.NoError(t, err)
	plan, err := e.adapter.Plan(ctx, id, nil)
	require.NoError(t, err)
	var entries powerflex.PowerFlexEntries
	require.NoError(t, json.Unmarshal(plan.Entries, &entries))

	// The connection is reset when one volume (the plan's third) is
	// unmapped.
	third := entries.Mappings[2].VolumeID
	fid := e.srv.AddFault(simcore.Fault{Kind: simcore.FaultReset, Path: "Volume::" + third + "/action/removeMappedSdc$"})
	err = e.adapter.Apply(ctx, plan)
	require.Error(t, err)
	assert.True(t, arrayclients.IsTransient(err), "a reset is worth a retry: %v", err)
	var opErr *arrayclients.OpError
	require.ErrorAs(t, err, &opErr)
	assert.Equal(t, "apply", opErr.Op)
	assert.Equal(t, "worker-1", opErr.Node)
	assert.Contains(t, err.Error(), "array pflex-1: apply node worker-1:")

	v, err := e.adapter.Verify(ctx, plan)
	require.NoError(t, err)
	assert.False(t, v.Fenced)
	// The unmaps run side by side: the one reset is still mapped, the
	// others were unmapped all the same.
	require.Len(t, v.Remaining, 1, "only the volume whose unmap was reset is still mapped")
	assert.Contains(t, v.Remaining[0], third)

	require.True(t, e.srv.RemoveFault(fid))
	require.NoError(t, e.adapter.Apply(ctx, plan))
	v, err = e.adapter.Verify(ctx, plan)
	require.NoError(t, err)
	assert.True(t, v.Fenced)
}

func TestPowerFlexIdentityErrorsWriteNothing(t *testing.T) {
	ctx := context.Background()
	e := startPowerFlex(t, pflexFixture, arrayclients.Options{}, 5*time.Second)
	tcs := []struct {
		name string
		node arrayclients.Node
		want error
		msg  string
	}{
		{"no CSI node ID", pflexNode("worker-3", ""), arrayclients.ErrNoIdentity, "no csi-vxflexos.dellemc.com node ID"},
		{"GUID not on the array", pflexNode("worker-9", "6A1B0009-0000-4000-8000-000000000009"), arrayclients.ErrNoIdentity, "no SDC with GUID"},
		{"GUID prefix is not a match", pflexNode("worker-1", "6A1B0001-0000-4000-8000-00000000000"), arrayclients.ErrNoIdentity, "no SDC"},
		{"override IP shared by two SDCs", arrayclients.Node{Name: "worker-7", Override: "127.0.30.1"}, arrayclients.ErrAmbiguousIdentity, "2 SDCs match"},
		{"override by name", arrayclients.Node{Name: "worker-7", Override: "stale-a"}, nil, ""},
	}
	for _, tc := range tcs {
		t.Run(tc.name, func(t *testing.T) {
			id, err := e.adapter.Resolve(ctx, tc.node)
			if tc.want == nil {
				require.NoError(t, err)
				assert.Equal(t, "stale-a", id.ObjectName)
				return
			}
			require.ErrorIs(t, err, tc.want)
			assert.Contains(t, err.Error(), tc.msg)
			assert.Contains(t, err.Error(), "array pflex-1: resolve node "+tc.node.Name)
			assert.Equal(t, arrayclients.Permanent, arrayclients.Classify(err))
		})
	}
	assert.Zero(t, pflexWriteRequests(e), "no request that could write reached the array")

	// A plan whose SDC vanished cannot be made, and nothing is written.
	_, err := e.adapter.Plan(ctx, arrayclients.Identity{Array: "pflex-1", Family: arrayclients.PowerFlex, Node: "worker-9", ObjectID: "00000000deadbeef"}, nil)
	require.ErrorIs(t, err, arrayclients.ErrNoIdentity)
	// A plan of another array is refused before any request.
	_, err = e.adapter.Plan(ctx, arrayclients.Identity{Array: "other", Family: arrayclients.PowerFlex, ObjectID: "x"}, nil)
	require.ErrorIs(t, err, arrayclients.ErrPlanMismatch)
	err = e.adapter.Apply(ctx, arrayclients.Plan{Array: "other", Family: arrayclients.PowerFlex})
	require.ErrorIs(t, err, arrayclients.ErrPlanMismatch)
	assert.Zero(t, pflexWriteRequests(e))
}

func TestPowerFlexHealth(t *testing.T) {
	ctx := context.Background()
	e := startPowerFlex(t, pflexFixture, arrayclients.Options{}, 2*time.Second)
	id, err := e.adapter.Resolve(ctx, pflexW1)
	require.NoError(t, err)

	h, err := e.adapter.Health(ctx, id)
	require.NoError(t, err)
	arraytest.RequireReadOnlyProbes(t, e.srv)
	assert.Equal(t, arrayclients.Connected, h.Connectivity)
	assert.Equal(t, arrayclients.IOActive, h.IO)
	assert.False(t, h.SampledAt.IsZero())
	assert.Equal(t, "worker-1", h.Node)

	require.NoError(t, e.sim.SetSignals("worker-1", simcore.Signals{Connected: simcore.Bool(false), IOActive: simcore.Bool(false)}))
	h, err = e.adapter.Health(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, arrayclients.Disconnected, h.Connectivity)
	assert.Equal(t, arrayclients.IOIdle, h.IO)
	assert.Contains(t, h.Reason, "Disconnected")

	// Unreachable: a busy gateway, then no gateway at all.
	e.srv.AddFault(simcore.Fault{Kind: simcore.FaultError, Status: 503})
	h, err = e.adapter.Health(ctx, id)
	require.ErrorIs(t, err, arrayclients.ErrUnreachable)
	assert.Equal(t, arrayclients.ConnectivityUnknown, h.Connectivity)
	assert.Equal(t, arrayclients.IOUnknown, h.IO)
	assert.Contains(t, h.Reason, "HTTP 503")
	e.srv.ClearFaults()

	require.NoError(t, e.close())
	h, err = e.adapter.Health(ctx, id)
	require.ErrorIs(t, err, arrayclients.ErrUnreachable)
	assert.Equal(t, arrayclients.ConnectivityUnknown, h.Connectivity)
	assert.Equal(t, arrayclients.IOUnknown, h.IO)
	assert.NotEmpty(t, h.Reason)
	r := e.adapter.Check(ctx)
	assert.False(t, r.Reachable)
	assert.NotEmpty(t, r.Error)
}

func TestPowerFlexReloginAfter401(t *testing.T) {
	ctx := context.Background()
	e := startPowerFlex(t, pflexFixture, arrayclients.Options{}, 5*time.Second)
	r := e.adapter.Check(ctx)
	require.True(t, r.Reachable, r.Error)
	assert.Equal(t, "4.5", r.APIVersion)
	logins := e.sim.Logins()

	e.sim.ExpireSessions()
	id, err := e.adapter.Resolve(ctx, pflexW1)
	require.NoError(t, err, "the client logs in again after a 401")
	assert.Equal(t, logins+1, e.sim.Logins())
	for range 20 {
		_, err = e.adapter.Plan(ctx, id, nil)
		require.NoError(t, err)
	}
	assert.LessOrEqual(t, e.sim.Logins(), logins+8, "sessions are reused: at most one login per pooled client")
}

func TestPowerFlexBadCredentials(t *testing.T) {
	ctx := context.Background()
	e := startPowerFlex(t, pflexFixture, arrayclients.Options{}, 5*time.Second)
	var logs strings.Builder
	cfg := e.cfg
	cfg.Password = "wrong-pw-xyz"
	reg, err := arraytest.New(arrayclients.PowerFlex, powerflex.NewPowerFlex, []arrayclients.Config{cfg}, arrayclients.Options{
		Logger: arraytest.SlogTo(&logs), Registry: prometheus.NewRegistry(),
	})
	require.NoError(t, err)
	a, _ := reg.Get("pflex-1")
	r := a.Check(ctx)
	assert.False(t, r.Reachable)
	assert.Contains(t, r.Error, "Unauthorized")
	_, err = a.Resolve(ctx, pflexW1)
	require.ErrorIs(t, err, arrayclients.ErrUnreachable)
	assert.NotContains(t, logs.String(), "wrong-pw-xyz")
	assert.NotContains(t, err.Error(), "wrong-pw-xyz")
	assert.Equal(t, 0, e.sim.Logins())
}

func TestPowerFlexFaultsReachTheCaller(t *testing.T) {
	ctx := context.Background()
	e := startPowerFlex(t, pflexFixture, arrayclients.Options{}, 500*time.Millisecond)
	id, err := e.adapter.Resolve(ctx, pflexW1)
	require.NoError(t, err)
	sdcPath := "/api/instances/Sdc::" + id.ObjectID + "$"
	tcs := []struct {
		name      string
		fault     simcore.Fault
		transient bool
		msg       string
	}{
		{"busy", simcore.Fault{Kind: simcore.FaultError, Status: 503, Message: "gateway busy"}, true, "gateway busy"},
		{"MDM failure", simcore.Fault{Kind: simcore.FaultError, Status: 500, Message: "MDM failed command"}, false, "MDM failed command"},
		{"bad request", simcore.Fault{Kind: simcore.FaultError, Status: 400, Message: "Request message is not valid"}, false, "not valid"},
		{"reset", simcore.Fault{Kind: simcore.FaultReset}, true, ""},
		{"malformed", simcore.Fault{Kind: simcore.FaultMalformed}, true, "unexpected EOF"},
		{"hang", simcore.Fault{Kind: simcore.FaultHang}, true, "deadline exceeded"},
	}
	for _, tc := range tcs {
		t.Run(tc.name, func(t *testing.T) {
			tc.fault.Path = sdcPath
			fid := e.srv.AddFault(tc.fault)
			defer e.srv.RemoveFault(fid)
			start := time.Now()
			_, err := e.adapter.Plan(ctx, id, nil)
			require.Error(t, err)
			assert.Less(t, time.Since(start), 5*time.Second, "never hangs past the timeout")
			assert.Equal(t, tc.transient, arrayclients.IsTransient(err), "%v", err)
			assert.Contains(t, err.Error(), tc.msg)
		})
	}
	_, err = e.adapter.Plan(ctx, id, nil)
	require.NoError(t, err, "the adapter recovers once the faults are gone")
}

func TestPowerFlexDryRun(t *testing.T) {
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	e := startPowerFlex(t, pflexFixture, arrayclients.Options{DryRun: true, Registry: reg}, 5*time.Second)
	id, err := e.adapter.Resolve(ctx, pflexW1)
	require.NoError(t, err)
	plan, err := e.adapter.Plan(ctx, id, nil)
	require.NoError(t, err)
	require.NoError(t, e.adapter.Apply(ctx, plan))
	require.NoError(t, e.adapter.Undo(ctx, plan, arrayclients.RestoreScope{}))
	v, err := e.adapter.Verify(ctx, plan)
	require.NoError(t, err)
	assert.False(t, v.Fenced, "dry run changes nothing")
	assert.Zero(t, pflexWriteRequests(e))
	assert.InDelta(t, 1.0, arraytest.CounterValue(t, reg, "pflex-1", "apply", "dry_run"), 0)
	assert.InDelta(t, 1.0, arraytest.CounterValue(t, reg, "pflex-1", "undo", "dry_run"), 0)
}

func TestPowerFlexMetrics(t *testing.T) {
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	e := startPowerFlex(t, pflexFixture, arrayclients.Options{Registry: reg}, 5*time.Second)
	id, err := e.adapter.Resolve(ctx, pflexW1)
	require.NoError(t, err)
	_, err = e.adapter.Resolve(ctx, pflexNode("worker-9", "nope"))
	require.Error(t, err)
	_, err = e.adapter.Plan(ctx, id, nil)
	require.NoError(t, err)
	r := e.adapter.Check(ctx)
	require.True(t, r.Reachable)
	assert.InDelta(t, 1.0, arraytest.CounterValue(t, reg, "pflex-1", "resolve", "ok"), 0)
	assert.InDelta(t, 1.0, arraytest.CounterValue(t, reg, "pflex-1", "resolve", "no_identity"), 0)
	assert.InDelta(t, 1.0, arraytest.CounterValue(t, reg, "pflex-1", "plan", "ok"), 0)
	assert.InDelta(t, 1.0, arraytest.CounterValue(t, reg, "pflex-1", "check", "ok"), 0)
	mfs, err := reg.Gather()
	require.NoError(t, err)
	names := map[string]bool{}
	for _, mf := range mfs {
		names[mf.GetName()] = true
	}
	assert.True(t, names["fenced_array_request_duration_seconds"])
	assert.True(t, names["fenced_array_up"])
}

func TestPowerFlexConcurrentFences(t *testing.T) {
	ctx := context.Background()
	doc := pflexManyNodes(12, 2)
	e := startPowerFlex(t, doc, arrayclients.Options{}, 5*time.Second)
	before := e.sim.State()
	var wg sync.WaitGroup
	errs := make([]error, 12)
	for i := range 12 {
		wg.Go(func() {
			errs[i] = fenceAndRestore(ctx, e.adapter, pflexNode(fmt.Sprintf("node-%02d", i), pflexGUID(i)))
		})
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "node-%02d", i)
	}
	assert.Equal(t, before, e.sim.State())
}

// fenceAndRestore fences a node, checks the fence, undoes it and checks the
// restore; it runs off the test goroutine, so it returns what went wrong.
func fenceAndRestore(ctx context.Context, a arrayclients.Adapter, node arrayclients.Node) error {
	id, err := a.Resolve(ctx, node)
	if err != nil {
		return fmt.Errorf("resolve: %w", err)
	}
	plan, err := a.Plan(ctx, id, nil)
	if err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	if err := a.Apply(ctx, plan); err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	v, err := a.Verify(ctx, plan)
	if err != nil {
		return fmt.Errorf("verify after apply: %w", err)
	}
	if !v.Fenced {
		return fmt.Errorf("not fenced after apply: %v", v.Remaining)
	}
	if err := a.Undo(ctx, plan, arrayclients.RestoreScope{}); err != nil {
		return fmt.Errorf("undo: %w", err)
	}
	v, err = a.Verify(ctx, plan)
	if err != nil {
		return fmt.Errorf("verify after undo: %w", err)
	}
	if !v.Restored {
		return errors.New("not restored after undo")
	}
	return nil
}

// pflexGUID is node i's SDC GUID.
func pflexGUID(i int) string { return fmt.Sprintf("6A1B%04X-0000-4000-8000-%012X", i, i) }

// pflexManyNodes is a fixture with n nodes of vols volumes each.
func pflexManyNodes(n, vols int) string {
	var b strings.Builder
	b.WriteString("nodes:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - {name: node-%02d, ip: 127.0.%d.%d, sdcGUID: %s}\n", i, 10+i/200, 1+i%200, pflexGUID(i))
	}
	fmt.Fprintf(&b, "arrays:\n  - name: pflex-1\n    family: powerflex\n    spec:\n      systems: [{id: 1a2b3c4d5e6f7a8b}]\n      perNode: {volumes: %d, limitIops: 1000}\n", vols)
	return b.String()
}

func TestPowerFlexCheckAggregation(t *testing.T) {
	ctx := context.Background()
	e := startPowerFlex(t, pflexFixture, arrayclients.Options{}, time.Second)
	down := e.cfg
	down.Name = "pflex-down"
	down.Endpoint = "http://127.0.0.1:1"
	reg, err := arraytest.New(arrayclients.PowerFlex, powerflex.NewPowerFlex, []arrayclients.Config{e.cfg, down}, arrayclients.Options{Registry: prometheus.NewRegistry()})
	require.NoError(t, err)
	results := reg.Check(ctx)
	require.Len(t, results, 2)
	assert.True(t, results[0].Reachable, results[0].Error)
	assert.False(t, results[1].Reachable)
	s := arrayclients.Summarize(results)
	assert.False(t, s.Ready)
	assert.Equal(t, []string{"pflex-down"}, s.Unreachable)
	require.ErrorIs(t, s.Err(), arrayclients.ErrUnreachable)
	assert.Contains(t, s.Err().Error(), "pflex-down")
	assert.NotContains(t, s.Err().Error(), e.cfg.Password)
	assert.NoError(t, arrayclients.Summarize(results[:1]).Err())
}

func TestPowerFlexHTTPWithInsecure(t *testing.T) {
	// Plain HTTP endpoints work too (no CA involved).
	fx, err := fixture.Parse([]byte(pflexFixture))
	require.NoError(t, err)
	sim, err := powerflexsim.New(&fx.Arrays[0].Spec, fx.Nodes)
	require.NoError(t, err)
	l, err := simcore.Serve(simcore.New("p", sim, nil), "127.0.0.1:0", false, "")
	require.NoError(t, err)
	defer func() { assert.NoError(t, l.Close()) }()
	user, pass := sim.Credentials()
	reg, err := arraytest.New(arrayclients.PowerFlex, powerflex.NewPowerFlex, []arrayclients.Config{{
		Name: "p", Family: arrayclients.PowerFlex, Endpoint: l.URL, Username: user, Password: pass, Insecure: true,
	}}, arrayclients.Options{})
	require.NoError(t, err)
	a, _ := reg.Get("p")
	r := a.Check(context.Background())
	require.True(t, r.Reachable, r.Error)
	resp, err := http.Get(l.URL + "/_sim/state")
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	_, err = a.Resolve(context.Background(), pflexW2)
	require.NoError(t, err)
	require.NotErrorIs(t, err, arrayclients.ErrNoIdentity)
}

// pflexPoolSize is the adapter's client pool (powerFlexClients): the most
// calls it may have on one array at once.
const pflexPoolSize = 8

// TestPowerFlexUnmapsSideBySideWithinThePool: a node's volumes are
// unmapped by concurrent calls, and however many fences run together the
// array never sees more calls at once than the pool holds. The simulator
// counts the requests it serves at once; 30 ms of latency per request
// makes concurrent calls overlap.
func TestPowerFlexUnmapsSideBySideWithinThePool(t *testing.T) {
	ctx := context.Background()
	const nodes, vols = 12, 12
	e := startPowerFlex(t, pflexManyNodes(nodes, vols), arrayclients.Options{}, 10*time.Second)
	plans := make([]arrayclients.Plan, nodes)
	for i := range nodes {
		id, err := e.adapter.Resolve(ctx, pflexNode(fmt.Sprintf("node-%02d", i), pflexGUID(i)))
		require.NoError(t, err)
		plans[i], err = e.adapter.Plan(ctx, id, nil)
		require.NoError(t, err)
	}
	e.srv.AddFault(simcore.Fault{Kind: simcore.FaultLatency, Latency: 30 * time.Millisecond})

	// One fence: its twelve unmaps overlap.
	e.srv.ResetInFlightPeak()
	require.NoError(t, e.adapter.Apply(ctx, plans[0]))
	assert.Greater(t, e.srv.InFlightPeak(), 1, "one node's unmaps ran one at a time")
	assert.LessOrEqual(t, e.srv.InFlightPeak(), pflexPoolSize)
	v, err := e.adapter.Verify(ctx, plans[0])
	require.NoError(t, err)
	assert.True(t, v.Fenced, v.Remaining)
	assert.Empty(t, e.sim.MappedVolumes("node-00"))

	// Eleven fences at once: still no more calls than the pool.
	e.srv.ResetInFlightPeak()
	var wg sync.WaitGroup
	errs := make([]error, nodes)
	for i := 1; i < nodes; i++ {
		wg.Go(func() { errs[i] = e.adapter.Apply(ctx, plans[i]) })
	}
	wg.Wait()
	for i := 1; i < nodes; i++ {
		require.NoError(t, errs[i], "node-%02d", i)
		assert.Empty(t, e.sim.MappedVolumes(fmt.Sprintf("node-%02d", i)))
	}
	assert.LessOrEqual(t, e.srv.InFlightPeak(), pflexPoolSize, "the pool bounds the calls on the array")
	assert.Greater(t, e.srv.InFlightPeak(), 1)

	// The pipeline's spare call slots bound the side-by-side requests
	// too: none spare, one at a time; two spare, at most three at once.
	for _, spare := range []int{0, 2} {
		require.NoError(t, e.adapter.Undo(ctx, plans[0], arrayclients.RestoreScope{}))
		var mu sync.Mutex
		left := spare
		sctx := arrayclients.WithSpareCalls(ctx, func() (func(), bool) {
			mu.Lock()
			defer mu.Unlock()
			if left == 0 {
				return nil, false
			}
			left--
			return func() {
				mu.Lock()
				left++
				mu.Unlock()
			}, true
		})
		e.srv.ResetInFlightPeak()
		require.NoError(t, e.adapter.Apply(sctx, plans[0]))
		assert.LessOrEqual(t, e.srv.InFlightPeak(), spare+1, "%d spare calls", spare)
		if spare > 0 {
			assert.Greater(t, e.srv.InFlightPeak(), 1, "spare calls were used")
		}
		assert.Empty(t, e.sim.MappedVolumes("node-00"))
		assert.Equal(t, spare, left, "every spare call was given back")
	}
}
