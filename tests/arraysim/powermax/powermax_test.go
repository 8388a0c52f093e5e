package powermax_test

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	pmax "github.com/dell/gopowermax/v2"
	types "github.com/dell/gopowermax/v2/types/v100"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/tests/arraysim/fixture"
	"github.com/fenced-project/fenced/tests/arraysim/powermax"
	"github.com/fenced-project/fenced/tests/arraysim/simcore"
)

const testFixture = `
nodes:
  - {name: worker-1, ip: 127.0.10.1, iqn: "iqn.1994-05.com.redhat:worker-1", wwpns: ["10000000c9a0b001"]}
  - {name: worker-2.lab.example, ip: 127.0.10.2, iqn: "iqn.1994-05.com.redhat:worker-2", wwpns: ["10000000c9a0b002"]}
arrays:
  - name: pmax-1
    family: powermax
    spec:
      symmetrixID: "000197900046"
      username: smc
      password: secret
      generate: {clusterPrefix: TST, volumesPerNode: 3}
      hosts:
        - id: legacy-fc-host
          type: Fibre
          initiators:
            - {id: 10000000c9a0b0ff, paths: ["FA-1D:4", "FA-2D:4"]}
          volumes: ["00200"]
`

const sym = "000197900046"

type env struct {
	srv    *simcore.Server
	sim    *powermax.Sim
	url    string
	caFile string
}

func start(t testing.TB, doc string, useTLS bool) env {
	t.Helper()
	f, err := fixture.Parse([]byte(doc))
	require.NoError(t, err)
	sim, err := powermax.New(&f.Arrays[0].Spec, f.Nodes)
	require.NoError(t, err)
	srv := simcore.New("pmax-1", sim, nil)
	l, err := simcore.Serve(srv, "127.0.0.1:0", useTLS, t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return env{srv: srv, sim: sim, url: l.URL, caFile: l.CAFile}
}

func (e env) client(t testing.TB, password string, timeout time.Duration) pmax.Pmax {
	t.Helper()
	c, err := pmax.NewClientWithArgs(e.url, "fenced-test", e.caFile == "", true, e.caFile)
	require.NoError(t, err)
	c.(*pmax.Client).SetContextTimeout(timeout)
	err = c.Authenticate(context.Background(), &pmax.ConfigConnect{Endpoint: e.url, Username: "smc", Password: password})
	if password == "secret" {
		require.NoError(t, err)
	}
	return c.WithSymmetrixID(sym)
}

func dump(t *testing.T, sim *powermax.Sim) string {
	t.Helper()
	b, err := json.Marshal(sim.Snapshot())
	require.NoError(t, err)
	return string(b)
}

// TestFenceRoundTripWithRealClient drives the simulator with gopowermax the
// way the adapter will: find the node's host by csi-powermax's name, read
// its initiators and masking view, remove them, read back, add them back,
// and compare the dumps.
func TestFenceRoundTripWithRealClient(t *testing.T) {
	e := start(t, testFixture, true)
	c := e.client(t, "secret", 5*time.Second)
	ctx := context.Background()
	before := dump(t, e.sim)

	ids, err := c.GetSymmetrixIDList(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{sym}, ids.SymmetrixIDs)

	hostID := powermax.HostID("TST", "worker-2", "iSCSI")
	require.Equal(t, "csi-node-TST-worker-2", hostID)
	h, err := c.GetHostByID(ctx, sym, hostID)
	require.NoError(t, err)
	assert.Equal(t, []string{"iqn.1994-05.com.redhat:worker-2"}, h.Initiators)
	assert.Equal(t, "iSCSI", h.HostType)
	assert.Equal(t, []string{"csi-mv-TST-worker-2"}, h.MaskingviewIDs)
	assert.EqualValues(t, 1, h.NumberInitiators)

	list, err := c.GetInitiatorList(ctx, sym, "iqn.1994-05.com.redhat:worker-2", true, true)
	require.NoError(t, err)
	assert.Equal(t, []string{"SE-1E:000:iqn.1994-05.com.redhat:worker-2", "SE-2E:000:iqn.1994-05.com.redhat:worker-2"}, list.InitiatorIDs)
	in, err := c.GetInitiatorByID(ctx, sym, list.InitiatorIDs[0])
	require.NoError(t, err)
	assert.True(t, in.LoggedIn)
	assert.True(t, in.OnFabric)
	assert.Equal(t, hostID, in.Host)

	mv, err := c.GetMaskingViewByID(ctx, sym, "csi-mv-TST-worker-2")
	require.NoError(t, err)
	assert.Equal(t, hostID, mv.HostID)
	sg, err := c.GetStorageGroup(ctx, sym, mv.StorageGroupID)
	require.NoError(t, err)
	assert.Equal(t, 3, sg.NumOfVolumes)
	vols, err := c.GetVolumeIDListInStorageGroup(ctx, sym, mv.StorageGroupID)
	require.NoError(t, err)
	assert.Equal(t, []string{"00103", "00104", "00105"}, vols)

	// Fence: remove every initiator.
	_, err = c.UpdateHostInitiators(ctx, sym, h, nil)
	require.NoError(t, err)
	fenced, err := c.GetHostByID(ctx, sym, hostID)
	require.NoError(t, err)
	assert.Empty(t, fenced.Initiators)
	assert.EqualValues(t, 0, fenced.NumberInitiators)
	inHost, err := c.GetInitiatorList(ctx, sym, "iqn.1994-05.com.redhat:worker-2", true, true)
	require.NoError(t, err)
	assert.Empty(t, inHost.InitiatorIDs, "the node's initiators are in no host")
	notInHost, err := c.GetInitiatorList(ctx, sym, "iqn.1994-05.com.redhat:worker-2", true, false)
	require.NoError(t, err)
	assert.Len(t, notInHost.InitiatorIDs, 2, "the initiators are still logged in to the array")

	// Removing with a stale host struct: the array refuses an absent initiator.
	_, err = c.UpdateHostInitiators(ctx, sym, h, nil)
	require.Error(t, err)
	assert.True(t, types.IsBadRequestError(err), "%v", err)

	// Unfence.
	_, err = c.UpdateHostInitiators(ctx, sym, fenced, h.Initiators)
	require.NoError(t, err)
	assert.Equal(t, before, dump(t, e.sim))
	assert.Len(t, e.srv.AuditWrites(), 2, "one removal, one addition")
}

func TestAuthFailureIsUnauthorizedWithoutRetry(t *testing.T) {
	e := start(t, testFixture, false)
	c, err := pmax.NewClientWithArgs(e.url, "fenced-test", true, false, "")
	require.NoError(t, err)
	err = c.Authenticate(context.Background(), &pmax.ConfigConnect{Endpoint: e.url, Username: "smc", Password: "wrong"})
	require.Error(t, err)
	assert.True(t, types.IsUnauthorizedError(err), "%v", err)
	assert.Len(t, e.srv.Audit(), 1, "no retry")
}

func TestNotFoundAndAddInUse(t *testing.T) {
	e := start(t, testFixture, false)
	c := e.client(t, "secret", 5*time.Second)
	ctx := context.Background()
	_, err := c.GetHostByID(ctx, sym, "csi-node-TST-nosuch")
	assert.True(t, types.IsNotFoundError(err), "%v", err)
	_, err = c.GetInitiatorByID(ctx, sym, "SE-9E:000:iqn.nosuch")
	assert.True(t, types.IsNotFoundError(err), "%v", err)

	h, err := c.GetHostByID(ctx, sym, "csi-node-TST-worker-1")
	require.NoError(t, err)
	_, err = c.UpdateHostInitiators(ctx, sym, h, append(h.Initiators, "iqn.1994-05.com.redhat:worker-2"))
	require.Error(t, err)
	assert.True(t, types.IsBadRequestError(err), "an initiator in another host cannot be added: %v", err)
	assert.Empty(t, e.srv.AuditWrites())
}

func TestVolumeMetricsFollowSignals(t *testing.T) {
	e := start(t, testFixture, false)
	c := e.client(t, "secret", 5*time.Second)
	ctx := context.Background()
	keys, err := c.GetArrayPerfKeys(ctx)
	require.NoError(t, err)
	require.Len(t, keys.ArrayInfos, 1)
	last := keys.ArrayInfos[0].LastAvailableDate
	// Unisphere's 5-minute granularity: the newest sample is the last
	// completed 5-minute interval, on a boundary, 0 to 5 minutes old.
	fiveMin := (5 * time.Minute).Milliseconds()
	assert.Zero(t, last%fiveMin, "on a 5-minute boundary")
	assert.LessOrEqual(t, last, time.Now().UnixMilli())
	assert.Greater(t, last, time.Now().UnixMilli()-fiveMin)
	hour, err := c.GetVolumesMetricsByID(ctx, sym, "00100", []string{"IoRate"}, last-time.Hour.Milliseconds(), last)
	require.NoError(t, err)
	samples := hour.ResultList.Result[0].VolumeResult
	require.GreaterOrEqual(t, len(samples), 12, "an hour holds 12 intervals")
	for i := 1; i < len(samples); i++ {
		assert.Equal(t, fiveMin, samples[i].Timestamp-samples[i-1].Timestamp)
	}

	rate := func() float64 {
		m, err := c.GetVolumesMetricsByID(ctx, sym, "00100", []string{"IoRate"}, last-5*60*1000, last)
		require.NoError(t, err)
		require.Len(t, m.ResultList.Result, 1)
		samples := m.ResultList.Result[0].VolumeResult
		require.NotEmpty(t, samples)
		return samples[len(samples)-1].IoRate
	}
	assert.Zero(t, rate())
	require.NoError(t, e.sim.SetSignals("csi-node-TST-worker-1", simcore.Signals{IOActive: simcore.Bool(true)}))
	assert.Positive(t, rate())

	in, err := c.GetInitiatorByID(ctx, sym, "SE-1E:000:iqn.1994-05.com.redhat:worker-1")
	require.NoError(t, err)
	assert.True(t, in.LoggedIn)
	require.NoError(t, e.sim.SetSignals("csi-node-TST-worker-1", simcore.Signals{Connected: simcore.Bool(false)}))
	in, err = c.GetInitiatorByID(ctx, sym, "SE-1E:000:iqn.1994-05.com.redhat:worker-1")
	require.NoError(t, err)
	assert.False(t, in.LoggedIn)
	assert.Zero(t, rate(), "a disconnected host does no I/O")

	_, err = c.GetVolumesMetricsByID(ctx, sym, "0FFFF", []string{"IoRate"}, last-60000, last)
	require.Error(t, err, "an unknown volume is an error, never an empty result list")
}

// TestFaultsReachTheClient checks each simcore fault against gopowermax.
func TestFaultsReachTheClient(t *testing.T) {
	e := start(t, testFixture, false)
	c := e.client(t, "secret", 500*time.Millisecond)
	ctx := context.Background()
	hostPath := `/host/csi-node-TST-worker-1$`
	get := func() error {
		_, err := c.GetHostByID(ctx, sym, "csi-node-TST-worker-1")
		return err
	}

	e.srv.AddFault(simcore.Fault{Kind: simcore.FaultError, Path: hostPath, Status: http.StatusServiceUnavailable, Count: 1})
	err := get()
	require.Error(t, err)
	assert.True(t, types.IsServiceUnavailableError(err), "%v", err)
	require.NoError(t, get(), "a one-shot fault fires once")

	// Go's transport retries an idempotent request once when a reused
	// connection is reset before any response, so a reset must persist.
	e.srv.AddFault(simcore.Fault{Kind: simcore.FaultReset, Path: hostPath, Count: 2})
	require.Error(t, get())

	e.srv.AddFault(simcore.Fault{Kind: simcore.FaultMalformed, Path: hostPath, Count: 1})
	require.Error(t, get())

	e.srv.AddFault(simcore.Fault{Kind: simcore.FaultHang, Path: hostPath, Count: 1})
	began := time.Now()
	err = get()
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(began), 5*time.Second, "the client gives up at its own timeout")

	e.srv.AddFault(simcore.Fault{Kind: simcore.FaultLatency, Path: hostPath, Latency: 50 * time.Millisecond, Count: 1})
	began = time.Now()
	require.NoError(t, get())
	assert.GreaterOrEqual(t, time.Since(began), 50*time.Millisecond)
}

// TestConcurrentClients runs readers and writers on distinct hosts at once
// (run with -race).
func TestConcurrentClients(t *testing.T) {
	e := start(t, testFixture, false)
	before := dump(t, e.sim)
	ctx := context.Background()
	var wg sync.WaitGroup
	for _, id := range []string{"csi-node-TST-worker-1", "csi-node-TST-worker-2", "legacy-fc-host"} {
		c := e.client(t, "secret", 5*time.Second)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				h, err := c.GetHostByID(ctx, sym, id)
				if !assert.NoError(t, err) {
					return
				}
				orig := h.Initiators
				_, err = c.UpdateHostInitiators(ctx, sym, h, nil)
				assert.NoError(t, err)
				h, err = c.GetHostByID(ctx, sym, id)
				if !assert.NoError(t, err) {
					return
				}
				_, err = c.UpdateHostInitiators(ctx, sym, h, orig)
				assert.NoError(t, err)
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, before, dump(t, e.sim))
}

func TestSpecErrorsNameTheField(t *testing.T) {
	for name, spec := range map[string]string{
		"symmetrixID":   `{symmetrixID: "12"}`,
		"clusterPrefix": `{generate: {clusterPrefix: TOOLONG}}`,
		"paths":         `{hosts: [{id: h, initiators: [{id: iqn.x, paths: ["bad"]}]}]}`,
		"unknownField":  `{bogus: 1}`,
	} {
		t.Run(name, func(t *testing.T) {
			f, err := fixture.Parse([]byte("nodes: []\narrays:\n  - {name: p, family: powermax, spec: " + spec + "}\n"))
			require.NoError(t, err)
			_, err = powermax.New(&f.Arrays[0].Spec, f.Nodes)
			require.Error(t, err)
			assert.Contains(t, err.Error(), map[string]string{"symmetrixID": "symmetrixID", "clusterPrefix": "clusterPrefix", "paths": "paths", "unknownField": "bogus"}[name])
		})
	}
}

// Storage group edits as csi-powermax makes them through gopowermax
// (dell/csi-powermax service/storage_group_svc.go).
func TestStorageGroupEdits(t *testing.T) {
	e := start(t, testFixture, true)
	c := e.client(t, "secret", 5*time.Second)
	ctx := context.Background()
	sg1, sg2 := "csi-no-srp-sg-TST-worker-1", "csi-no-srp-sg-TST-worker-2"

	_, err := c.RemoveVolumesFromStorageGroup(ctx, sym, sg1, true, "00100")
	require.NoError(t, err)
	v, err := c.GetVolumeByID(ctx, sym, "00100")
	require.NoError(t, err)
	assert.Empty(t, v.StorageGroupIDList)
	_, err = c.RemoveVolumesFromStorageGroup(ctx, sym, sg1, true, "00100")
	require.Error(t, err, "a volume not in the group")

	require.NoError(t, c.AddVolumesToStorageGroupS(ctx, sym, sg2, true, "00100"))
	v, err = c.GetVolumeByID(ctx, sym, "00100")
	require.NoError(t, err)
	assert.Equal(t, []string{sg2}, v.StorageGroupIDList)
	require.Error(t, c.AddVolumesToStorageGroupS(ctx, sym, sg2, true, "0FFFF"), "no such volume")

	// The last volumes of a masked group leave only after its view.
	_, err = c.RemoveVolumesFromStorageGroup(ctx, sym, sg1, true, "00101", "00102")
	require.ErrorContains(t, err, "masking view")
	require.NoError(t, c.DeleteMaskingView(ctx, sym, "csi-mv-TST-worker-1"))
	_, err = c.RemoveVolumesFromStorageGroup(ctx, sym, sg1, true, "00101", "00102")
	require.NoError(t, err)
	g, err := c.GetStorageGroup(ctx, sym, sg1)
	require.NoError(t, err)
	assert.Zero(t, g.NumOfVolumes)
	assert.Empty(t, g.MaskingView)
	h, err := c.GetHostByID(ctx, sym, "csi-node-TST-worker-1")
	require.NoError(t, err)
	assert.Empty(t, h.MaskingviewIDs)
}
