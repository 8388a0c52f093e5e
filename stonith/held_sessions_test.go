package stonith

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/arrayclients/all"
	"github.com/fenced-project/fenced/cluster/ledger"
	"github.com/fenced-project/fenced/detector"
	"github.com/fenced-project/fenced/tests/arraysim/fixture"
	"github.com/fenced-project/fenced/tests/arraysim/powerstore"
	"github.com/fenced-project/fenced/tests/arraysim/simcore"
)

// watchSessionsOn makes array a report n1's sessions and I/O (none yet).
func (w *world) watchSessionsOn(a string) {
	w.arrays[a].set(func(fa *fakeArray) {
		fa.sessions = map[string][]arrayclients.Session{}
		fa.io = map[string]arrayclients.IOWindow{}
	})
}

// evicted fences n1 and waits until it is evicted and two held checks
// have read the arrays since.
func (w *world) evicted() {
	w.t.Helper()
	w.verdict("n1", detector.Failed)
	w.waitState(ledger.StateEvicted)
	w.waitEvictionCounted()
	w.waitHeldChecks(2 * uint64(len(w.arrays)))
}

// requireSessionRegression checks that the fence went back to fencing
// once, on array a, with reason session and what naming the finding, and
// that the array was cut again and read back.
func (w *world) requireSessionRegression(a, what string, appliesBefore int) {
	w.t.Helper()
	t := w.t
	f := w.waitRegressions(1)
	back := f.Steps[5]
	require.True(t, strings.HasPrefix(back.Note, RegressionNote), back.Note)
	assert.Contains(t, back.Note, a+": "+sessionFinding+what)
	assert.Greater(t, w.log.count("apply "+a+" n1"), appliesBefore, "%s was cut again", a)
	r := f.Results[a]
	require.NotNil(t, r)
	assert.True(t, r.Verified, "%s was read back after the new cut", a)
	for _, reason := range []string{RegressionVolume, RegressionEntry} {
		assert.Zero(t, value(w.ctrl.metrics.regressions.WithLabelValues("c1", a, reason)), reason)
	}
	assert.InDelta(t, 1.0, value(w.ctrl.metrics.regressions.WithLabelValues("c1", a, RegressionSession)), 0)
	assert.Equal(t, 1, w.kube.eventReasons()["FenceRegressed"])
	st := w.ctrl.Status()
	require.Len(t, st.Fences, 1)
	assert.Equal(t, 1, st.Fences[0].Regressions)
}

// TestHeldFenceCutsASessionAfterTheCut: the node's initiator is registered
// again and logs in after the verified cut (a PowerStore initiator's
// active_sessions): a regression with reason session, cut again (which
// ends the session) and read back, once.
func TestHeldFenceCutsASessionAfterTheCut(t *testing.T) {
	w := newWorld(t, heldPeriod(50*time.Millisecond))
	w.watchSessionsOn("a2")
	_, stop := w.lead()
	defer stop()
	w.evicted()

	applies := w.log.count("apply a2 n1")
	w.arrays["a2"].set(func(fa *fakeArray) {
		fa.sessions["n1"] = []arrayclients.Session{{Key: "iqn.n1>t1", What: "initiator iqn.n1 on host h1 logged in to t1"}}
	})
	w.requireSessionRegression("a2", "active session: initiator iqn.n1 on host h1 logged in to t1", applies)
	w.arrays["a2"].set(func(fa *fakeArray) { assert.Empty(t, fa.sessions["n1"], "the cut ended the session") })

	w.waitHeldChecks(6)
	got, _ := Regressions(w.group.fence("c1", "n1"))
	assert.Equal(t, 1, got, "a session that is gone is not found again")
	assert.Equal(t, ledger.StateEvicted, w.state())
}

// TestHeldFenceCountsIOAfterTheCut: I/O the array counts in a window that
// began after a read-back showed the cut (PowerFlex SDC statistics) is a
// regression with reason session; I/O in a window that may reach back
// before the cut is not.
func TestHeldFenceCountsIOAfterTheCut(t *testing.T) {
	t.Run("a window reaching back before the cut", func(t *testing.T) {
		w := newWorld(t, heldPeriod(50*time.Millisecond))
		w.watchSessionsOn("a2")
		w.arrays["a2"].set(func(fa *fakeArray) {
			fa.keepIO = true
			fa.io["n1"] = arrayclients.IOWindow{Ops: 40, Window: time.Hour, What: "SDC s1: 40 writes in the last 3600s"}
		})
		_, stop := w.lead()
		defer stop()
		w.evicted()
		w.waitHeldChecks(6)
		got, _ := Regressions(w.group.fence("c1", "n1"))
		assert.Zero(t, got, "I/O that may predate the cut is no regression")
	})

	t.Run("a window after the cut", func(t *testing.T) {
		w := newWorld(t, heldPeriod(50*time.Millisecond))
		w.watchSessionsOn("a2")
		w.arrays["a2"].set(func(fa *fakeArray) {
			fa.io["n1"] = arrayclients.IOWindow{Ops: 40, Window: time.Millisecond, What: "SDC s1: 40 writes in the last 0s"}
		})
		_, stop := w.lead()
		defer stop()
		w.evicted()
		got, _ := Regressions(w.group.fence("c1", "n1"))
		require.Zero(t, got, "the cut ended the node's I/O")

		applies := w.log.count("apply a2 n1")
		w.arrays["a2"].set(func(fa *fakeArray) {
			fa.io["n1"] = arrayclients.IOWindow{Ops: 3, Window: time.Millisecond, What: "SDC s1: 3 writes in the last 0s"}
		})
		w.requireSessionRegression("a2", "I/O: SDC s1: 3 writes in the last 0s", applies)
		w.waitHeldChecks(6)
		got, _ = Regressions(w.group.fence("c1", "n1"))
		assert.Equal(t, 1, got)
	})
}

// TestHeldSessionReadFailureIsNoRegression: a session read that fails
// proves nothing either way; the read-back alone holds the fence.
func TestHeldSessionReadFailureIsNoRegression(t *testing.T) {
	w := newWorld(t, heldPeriod(50*time.Millisecond))
	w.watchSessionsOn("a2")
	w.arrays["a2"].set(func(fa *fakeArray) { fa.sessionsErr = assert.AnError })
	_, stop := w.lead()
	defer stop()
	w.evicted()
	w.waitHeldChecks(6)
	got, _ := Regressions(w.group.fence("c1", "n1"))
	assert.Zero(t, got)
	assert.Equal(t, ledger.StateEvicted, w.state())

	// Access regained is still found by the read-back.
	applies := w.regrant("a2")
	w.waitRegressions(1)
	assert.Greater(t, w.log.count("apply a2 n1"), applies)
	assert.InDelta(t, 1.0, value(w.ctrl.metrics.regressions.WithLabelValues("c1", "a2", RegressionVolume)), 0)
}

// TestHeldFenceSessionOnPowerStore: the same with the real PowerStore
// adapter on the array simulator. n1 dies and is fenced (its initiator
// removed from its host); after the eviction the initiator is registered
// with the host again and the node's iscsid logs in: the held check finds
// the session (reason session), cuts the initiator again, which ends the
// session, and reads it back.
func TestHeldFenceSessionOnPowerStore(t *testing.T) {
	const doc = `
nodes:
  - {name: n1, ip: 127.0.40.1, machineID: 5a1b2c3d4e5f60718293a4b5c6d7e8f9, iqn: "iqn.1994-05.com.redhat:n1"}
arrays:
  - name: a2
    family: powerstore
    spec:
      perNode: {nodes: [n1], volumes: 1}
`
	fx, err := fixture.Parse([]byte(doc))
	require.NoError(t, err)
	arr, ok := fx.Array("a2")
	require.True(t, ok)
	sim, err := powerstore.New(&arr.Spec, fx.Nodes)
	require.NoError(t, err)
	srv := simcore.New("a2", sim, nil)
	l, err := simcore.Serve(srv, "127.0.0.1:0", true, t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	reg, err := all.New([]arrayclients.Config{{Name: "a2", Family: arrayclients.PowerStore, Endpoint: l.URL,
		CAFile: l.CAFile, Username: powerstore.DefaultUsername, Password: powerstore.DefaultPassword,
		RequestTimeout: 2 * time.Second, ArrayIDs: []string{"PS0A2"}}}, arrayclients.Options{Registry: prometheus.NewRegistry()})
	require.NoError(t, err)
	a2, ok := reg.Get("a2")
	require.True(t, ok)

	// n1's identity and its footprint volume on the real array.
	ctx := t.Context()
	n := fx.Nodes[0]
	id, err := a2.Resolve(ctx, arrayclients.Node{Cluster: "c1", Name: "n1", Addresses: []string{n.IP}, CSINodeIDs: n.CSINodeIDs("")})
	require.NoError(t, err)
	snap := sim.State()
	var vol string
	for _, m := range snap.Mappings {
		if m.HostID == id.ObjectID {
			vol = m.VolumeID
		}
	}
	require.NotEmpty(t, vol)

	w := newWorld(t, heldPeriod(50*time.Millisecond), func(cfg *Config) { cfg.Arrays["a2"] = a2 })
	w.fp.mu.Lock()
	w.fp.vols["n1"] = slices.DeleteFunc(w.fp.vols["n1"], func(v arrayclients.KubeVolume) bool { return v.PV == "pv-a2" })
	w.fp.mu.Unlock()
	w.fp.add("n1", arrayclients.KubeVolume{PV: "pv-a2", Attachment: "va-pv-a2", Driver: arrayclients.DriverPowerStore,
		Handle: vol + "/PS0A2/scsi", Attached: true})
	ids := map[string]arrayclients.Identity{"a2": id}
	for _, a := range []string{"a1", "a3"} {
		ids[a] = arrayclients.Identity{Array: a, Family: arrayclients.PowerFlex, Node: "n1", ObjectID: "sdc-n1"}
	}
	w.group.must(t, &ledger.SetIdentities{Meta: w.group.meta(), Cluster: "c1", Node: "n1", BootID: "boot-1", Identities: ids})
	require.NoError(t, sim.SetSignals(id.ObjectID, simcore.Signals{Connected: simcore.Bool(false)}), "n1 is dead")

	_, stop := w.lead()
	defer stop()
	w.verdict("n1", detector.Failed)
	w.waitState(ledger.StateEvicted)
	w.waitHeldChecks(6)
	got, _ := Regressions(w.group.fence("c1", "n1"))
	require.Zero(t, got)
	f := w.group.fence("c1", "n1")
	plan, ok := planOf(f, "a2")
	require.True(t, ok)

	// The initiator is registered again (as a person, or a node plugin,
	// would) and n1's iscsid logs in.
	require.NoError(t, a2.Undo(ctx, plan, arrayclients.RestoreScope{}))
	sim.LogIn(n.IQN)
	f = w.waitRegressions(1)
	back := f.Steps[5]
	assert.Contains(t, back.Note, "a2: ")
	assert.Contains(t, back.Note, sessionFinding+"active session: initiator "+n.IQN+" on host "+id.ObjectName+" logged in to")
	assert.InDelta(t, 1.0, value(w.ctrl.metrics.regressions.WithLabelValues("c1", "a2", RegressionSession)), 0)
	assert.Zero(t, value(w.ctrl.metrics.regressions.WithLabelValues("c1", "a2", RegressionEntry)))
	assert.True(t, f.Results["a2"].Verified, "a2 was cut again and read back")

	// The cut removed the initiator, which ended the session.
	sr, ok := a2.(arrayclients.SessionReporter)
	require.True(t, ok)
	rep, err := sr.Sessions(ctx, plan)
	require.NoError(t, err)
	assert.Empty(t, rep.Sessions)
	v, err := a2.Verify(ctx, plan)
	require.NoError(t, err)
	assert.True(t, v.Fenced, "%v", v.Remaining)
	w.waitHeldChecks(6)
	got, _ = Regressions(w.group.fence("c1", "n1"))
	assert.Equal(t, 1, got)
}
