package stonith

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/cluster/ledger"
	"github.com/fenced-project/fenced/detector"
	"github.com/fenced-project/fenced/kube"
)

// heldPeriod sets the held period of the world's cluster.
func heldPeriod(d time.Duration) func(cfg *Config) {
	return func(cfg *Config) { cfg.Clusters[0].HeldPeriod = d }
}

// regrant gives n1 its access back on array a, as a driver's publish
// elsewhere would, and returns the count of its applies before.
func (w *world) regrant(a string) int {
	before := w.log.count("apply " + a + " n1")
	w.arrays[a].set(func(fa *fakeArray) { fa.access["n1"] = true })
	return before
}

// heldWorld is a world whose leader fenced n1 on a Failed verdict and
// evicted it: the fence is held, with a held period of an hour (longer
// than any test), so held checks come only when a test asks for one.
func heldWorld(t *testing.T, opts ...func(*Config)) *world {
	t.Helper()
	w := newWorld(t, append([]func(*Config){heldPeriod(time.Hour)}, opts...)...)
	_, stop := w.lead()
	t.Cleanup(stop)
	w.verdict("n1", detector.Failed)
	w.waitState(ledger.StateEvicted)
	return w
}

// waitRegressions waits until the fence went back to fencing on a held
// read-back n times and is evicted again.
func (w *world) waitRegressions(n int) *ledger.Fence {
	w.t.Helper()
	var f *ledger.Fence
	require.Eventually(w.t, func() bool {
		f = w.group.fence("c1", "n1")
		got, _ := Regressions(f)
		return f != nil && got == n && f.State == ledger.StateEvicted
	}, 10*time.Second, 2*time.Millisecond, "ops %v", w.log.list())
	return f
}

// waitHeldChecks waits for n more held read-backs (of any array).
func (w *world) waitHeldChecks(n uint64) {
	w.t.Helper()
	count := func() uint64 {
		return histCount(w.ctrl.metrics.stepSeconds.WithLabelValues("c1", "held-verify").(histogram))
	}
	from := count()
	require.Eventually(w.t, func() bool { return count() >= from+n }, 10*time.Second, 2*time.Millisecond)
}

// TestHeldFenceCutsRegainedAccess: after the eviction the leader reads the
// fence back on its period; access that reappeared on one array is cut
// again and read back, the fence returns to evicted, and the regression is
// counted, raised as an Event and shown in /status, once.
func TestHeldFenceCutsRegainedAccess(t *testing.T) {
	w := newWorld(t, heldPeriod(50*time.Millisecond))
	_, stop := w.lead()
	defer stop()
	w.verdict("n1", detector.Failed)
	w.waitState(ledger.StateEvicted)
	w.waitEvictionCounted()
	deletes := w.kube.eventReasons()["FencedPodDeleted"]

	applies := w.regrant("a2")
	f := w.waitRegressions(1)

	assert.False(t, w.arrays["a2"].hasAccess("n1"), "the regained access is cut again")
	assert.Greater(t, w.log.count("apply a2 n1"), applies, "a2 was cut again")
	assert.True(t, w.arrays["a2"].hasAccess("n2"), "other nodes keep their access")
	assert.Equal(t, []ledger.FenceState{ledger.StateIntent, ledger.StateFencing, ledger.StateFenced, ledger.StateTainted,
		ledger.StateEvicted, ledger.StateFencing, ledger.StateFenced, ledger.StateTainted, ledger.StateEvicted}, fenceSteps(f))
	back := f.Steps[5]
	assert.True(t, strings.HasPrefix(back.Note, RegressionNote), back.Note)
	assert.Contains(t, back.Note, "was evicted")
	assert.Contains(t, back.Note, "a2: v1")
	assert.NotContains(t, back.Note, "a1:", "only the regressed array is named")

	assert.InDelta(t, 1.0, value(w.ctrl.metrics.regressions.WithLabelValues("c1", "a2", RegressionVolume)), 0)
	assert.InDelta(t, 0.0, value(w.ctrl.metrics.regressions.WithLabelValues("c1", "a1", RegressionVolume)), 0)
	assert.Equal(t, 1, w.kube.eventReasons()["FenceRegressed"])
	assert.Equal(t, deletes, w.kube.eventReasons()["FencedPodDeleted"], "no pod is deleted again")
	assert.InDelta(t, 1.0, value(w.ctrl.metrics.fences.WithLabelValues("c1", ResultEvicted)), 0,
		"a regression is not a second fence")

	st := w.ctrl.Status()
	require.Len(t, st.Fences, 1)
	assert.Equal(t, 1, st.Fences[0].Regressions)
	assert.Equal(t, back.Note, st.Fences[0].LastRegression)

	t.Run("a second regression is counted again", func(t *testing.T) {
		w.regrant("a1")
		w.waitRegressions(2)
		assert.False(t, w.arrays["a1"].hasAccess("n1"))
		assert.InDelta(t, 1.0, value(w.ctrl.metrics.regressions.WithLabelValues("c1", "a1", RegressionVolume)), 0)
		assert.Equal(t, 2, w.kube.eventReasons()["FenceRegressed"])
	})

	t.Run("the unfence ends the held checks", func(t *testing.T) {
		w.reboot("boot-2")
		w.waitClosed()
		for name, a := range w.arrays {
			assert.True(t, a.hasAccess("n1"), "n1 not restored on %s", name)
		}
		w.ctrl.mu.Lock()
		assert.Empty(t, w.ctrl.held, "no schedule is kept for a closed fence")
		w.ctrl.mu.Unlock()
	})
}

// TestNewLeaderChecksHeldFencesAtOnce: a leader schedules a held fence's
// first check one spread after the fence's last read-back in the ledger,
// by whichever leader: at once when that is longer ago (a leader that takes
// over does not know when the last one checked), never later than one
// spread from now (a previous leader's clock ahead of its own).
func TestNewLeaderChecksHeldFencesAtOnce(t *testing.T) {
	w := newWorld(t, heldPeriod(time.Hour))
	cl := w.ctrl.clusters["c1"]
	spread := heldSpread("fence-7", time.Hour)
	fence := func(last time.Duration) *ledger.Fence {
		w.ctrl.forgetHeld("fence-7")
		return &ledger.Fence{ID: "fence-7", State: ledger.StateEvicted, Results: map[string]*ledger.ArrayResult{
			"a1": {LastAt: time.Now().Add(-2 * time.Hour)}, "a2": {LastAt: time.Now().Add(last)}}}
	}
	assert.LessOrEqual(t, w.ctrl.heldDue(cl, fence(-time.Hour)), time.Duration(0),
		"read back a period ago: checked at once")
	due := w.ctrl.heldDue(cl, fence(-10*time.Minute))
	assert.InDelta(t, float64(spread-10*time.Minute), float64(due), float64(time.Minute),
		"read back 10 minutes ago: checked one spread after it")
	due = w.ctrl.heldDue(cl, fence(time.Hour))
	assert.LessOrEqual(t, due, spread, "a read-back timed in the future puts the check off by one spread at most")
	assert.Greater(t, due, spread-time.Minute)
	w.ctrl.forgetHeld("fence-7")
	assert.LessOrEqual(t, w.ctrl.heldDue(cl, &ledger.Fence{ID: "fence-7", State: ledger.StateEvicted}), time.Duration(0),
		"no read-back recorded: checked at once")
}

// TestHeldChecksComeTwiceAPeriod: every fence is read back between 37.5 %
// and 50 % of the held period after its last check, so that access
// regained just after a check is found within half a period and cut
// within the period.
func TestHeldChecksComeTwiceAPeriod(t *testing.T) {
	const period = 30 * time.Second
	for i := range 2000 {
		d := heldSpread("fence-"+strconv.Itoa(i), period)
		require.GreaterOrEqual(t, d, period*3/8)
		require.Less(t, d, period/2)
	}
}

// TestAttachmentChangeChecksAHeldFenceAtOnce: with a held period far
// longer than the test, a change of an attachment of one of the fenced
// node's volumes (its publish to another node) reads the fence back at once.
func TestAttachmentChangeChecksAHeldFenceAtOnce(t *testing.T) {
	w := heldWorld(t)

	w.regrant("a3")
	f := w.group.fence("c1", "n1")
	due := w.ctrl.heldDue(w.ctrl.clusters["c1"], f)
	w.ctrl.AttachmentChanged("c1", kube.AttachmentChange{PV: "pv-unrelated", Driver: arrayclients.DriverPowerFlex, Handle: "a3-pvunrelated"})
	require.Greater(t, w.ctrl.heldDue(w.ctrl.clusters["c1"], f), due-time.Second,
		"a volume outside the footprint moves no held check")

	w.ctrl.AttachmentChanged("c1", kube.AttachmentChange{PV: "pv-a3"})
	w.waitRegressions(1)
	assert.False(t, w.arrays["a3"].hasAccess("n1"))
}

// TestAttachmentChangeReadsTheVolumesArray: a change of a footprint
// volume's attachment reads back the array that holds the volume, not the
// node's other arrays (a publish can re-add the node only where the
// volume is; the others wait for the period): access regained on a2 and
// a3 at once, a change of pv-a3's attachment finds a3's only.
func TestAttachmentChangeReadsTheVolumesArray(t *testing.T) {
	w := heldWorld(t)

	w.regrant("a2")
	w.regrant("a3")
	w.ctrl.AttachmentChanged("c1", kube.AttachmentChange{PV: "pv-a3", Node: "n2"})
	f := w.waitRegressions(1)
	var notes []string
	for _, st := range f.Steps {
		if strings.HasPrefix(st.Note, RegressionNote) {
			notes = append(notes, st.Note)
		}
	}
	require.Len(t, notes, 1)
	assert.Contains(t, notes[0], "a3: ")
	assert.NotContains(t, notes[0], "a2: ", "a2 holds no volume whose attachment changed")
	assert.False(t, w.arrays["a3"].hasAccess("n1"))
}

// TestReadNodeIdentities: the identities-only view of a fenced node has
// what the full view has but the copy of the record, and says the node has
// one.
func TestReadNodeIdentities(t *testing.T) {
	w := heldWorld(t)

	full := w.ctrl.readNode("c1", "n1")
	lite := w.ctrl.readNodeIdentities("c1", "n1")
	require.NotNil(t, full.Fence)
	assert.True(t, full.Fenced)
	assert.True(t, lite.Fenced)
	assert.Nil(t, lite.Fence)
	assert.NotEmpty(t, lite.Identities)
	full.Fence = nil
	assert.Equal(t, full, lite)

	none := w.ctrl.readNodeIdentities("c1", "n2")
	assert.False(t, none.Fenced)
}

// TestHeldRegressionDoesNotWaitForASilentArray: a held check that finds
// the node's access again on one array acts on it at once, while another
// array's read-back is still waiting for an answer (an array API outage:
// each attempt runs into the call timeout): the access is cut without
// waiting for the silent array, which the fencing step reads back again.
func TestHeldRegressionDoesNotWaitForASilentArray(t *testing.T) {
	// Calls that would wait for the silent array as long as the test runs.
	w := heldWorld(t, func(cfg *Config) { cfg.ArrayTimeout = time.Hour })
	f := w.group.fence("c1", "n1")

	answer := make(chan struct{})
	w.arrays["a1"].set(func(fa *fakeArray) {
		fa.verifyHook = func(ctx context.Context) error {
			select {
			case <-answer:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	})
	w.regrant("a3")
	w.ctrl.mu.Lock()
	e := w.ctrl.held[f.ID]
	e.next, e.full = time.Now().Add(-time.Second), time.Now().Add(-time.Second) // the period is due: every array
	w.ctrl.mu.Unlock()
	w.ctrl.Enqueue("c1", "n1")
	require.Eventually(t, func() bool {
		n, _ := Regressions(w.group.fence("c1", "n1"))
		return n == 1
	}, 10*time.Second, 2*time.Millisecond, "the regression on a3 is acted on while a1 does not answer; ops %v", w.log.list())

	// a1 answers again: the fencing step reads every array back and the
	// fence is evicted again, a3 cut.
	close(answer)
	w.waitRegressions(1)
	assert.False(t, w.arrays["a3"].hasAccess("n1"))
}

// TestHeldArrays: a held check due on its period, or with no schedule
// known, reads every planned array; one asked for by attachment changes
// before the period reads the changed volumes' arrays, every planned
// array when one's array is not known or none is planned.
func TestHeldArrays(t *testing.T) {
	now := time.Now()
	f := &ledger.Fence{Plans: []arrayclients.Plan{{Array: "a1"}, {Array: "a2"}, {Array: "a3"}}}
	for _, c := range []struct {
		name string
		e    heldEntry
		want []string
		all  bool
	}{
		{"period due", heldEntry{full: now, kicked: map[string]bool{"a2": true}}, []string{"a1", "a2", "a3"}, true},
		{"schedule unknown", heldEntry{kicked: map[string]bool{"a2": true}}, []string{"a1", "a2", "a3"}, true},
		{"kicked", heldEntry{full: now.Add(time.Minute), kicked: map[string]bool{"a2": true, "a3": true}}, []string{"a2", "a3"}, false},
		{"kicked, array not known", heldEntry{full: now.Add(time.Minute), kicked: map[string]bool{"a2": true}, kickAll: true}, []string{"a1", "a2", "a3"}, true},
		{"kicked, array without a plan", heldEntry{full: now.Add(time.Minute), kicked: map[string]bool{"a9": true}}, []string{"a1", "a2", "a3"}, true},
		{"not kicked", heldEntry{full: now.Add(time.Minute)}, []string{"a1", "a2", "a3"}, true},
	} {
		e := c.e
		got, all := heldArrays(&e, f, now)
		assert.Equal(t, c.want, got, c.name)
		assert.Equal(t, c.all, all, c.name)
		assert.Empty(t, e.kicked, "%s: the kicks are used up", c.name)
		assert.False(t, e.kickAll, c.name)
	}
}

// TestOwnDetachChecksNoHeldFence: the fenced node's own attachment going
// away (the attach-detach controller's detach after the out-of-service
// taint) takes access and gives none: it moves no held check. The same
// volume's detach from another node still does.
func TestOwnDetachChecksNoHeldFence(t *testing.T) {
	w := heldWorld(t)

	w.regrant("a3")
	f := w.group.fence("c1", "n1")
	due := w.ctrl.heldDue(w.ctrl.clusters["c1"], f)
	w.ctrl.AttachmentChanged("c1", kube.AttachmentChange{PV: "pv-a3", Node: "n1", Detaching: true})
	require.Greater(t, w.ctrl.heldDue(w.ctrl.clusters["c1"], f), due-time.Second,
		"the fenced node's own detach moves no held check")

	w.ctrl.AttachmentChanged("c1", kube.AttachmentChange{PV: "pv-a3", Node: "n2", Detaching: true})
	w.waitRegressions(1)
	assert.False(t, w.arrays["a3"].hasAccess("n1"))
}

// TestHeldChecksLeaveWorkersFree: when as many held checks of evicted
// fences run as may (a quarter of the workers), an evicted fence whose
// check is due takes no step and holds no worker: it comes back shortly,
// and its check runs once a checker is free, before its next step. The
// check of a fence not yet evicted is not bounded (TestHeldCheckBeforeTheEvictionIsNotBounded).
func TestHeldChecksLeaveWorkersFree(t *testing.T) {
	w := heldWorld(t)
	cl := w.ctrl.clusters["c1"]
	f := w.group.fence("c1", "n1")

	for range cap(w.ctrl.heldRunning) {
		w.ctrl.heldRunning <- struct{}{}
	}
	w.ctrl.mu.Lock()
	w.ctrl.held[f.ID].next = time.Now().Add(-time.Second) // due now
	w.ctrl.mu.Unlock()
	w.regrant("a3")
	regressed, retry, err := w.ctrl.holdFence(context.Background(), nil, cl, f, w.ctrl.readNode("c1", "n1"))
	require.ErrorIs(t, err, errHeldBusy)
	assert.False(t, regressed)
	assert.Equal(t, heldBusyRetry, retry)
	assert.LessOrEqual(t, w.ctrl.heldDue(cl, f), time.Duration(0), "the check is still due")
	assert.True(t, w.arrays["a3"].hasAccess("n1"), "no array was read, nothing cut")

	for range cap(w.ctrl.heldRunning) {
		<-w.ctrl.heldRunning
	}
	w.ctrl.Enqueue("c1", "n1")
	w.waitRegressions(1)
	assert.False(t, w.arrays["a3"].hasAccess("n1"))
}

// TestHeldCheckBeforeTheEvictionIsNotBounded: the held check of a fence
// still to be evicted runs even when every checker is taken by evicted
// fences' checks; bounding it too would keep its eviction waiting behind
// all of them.
func TestHeldCheckBeforeTheEvictionIsNotBounded(t *testing.T) {
	w := heldWorld(t)
	cl := w.ctrl.clusters["c1"]
	f := *w.group.fence("c1", "n1")
	f.State = ledger.StateTainted // as it was before its eviction
	w.ctrl.mu.Lock()
	w.ctrl.held[f.ID].next = time.Now().Add(-time.Second) // due now
	w.ctrl.mu.Unlock()
	for range cap(w.ctrl.heldRunning) {
		w.ctrl.heldRunning <- struct{}{}
	}
	defer func() {
		for range cap(w.ctrl.heldRunning) {
			<-w.ctrl.heldRunning
		}
	}()
	regressed, _, err := w.ctrl.holdFence(context.Background(), nil, cl, &f, w.ctrl.readNode("c1", "n1"))
	require.NoError(t, err)
	assert.False(t, regressed, "nothing was regained")
	assert.Greater(t, w.ctrl.heldDue(cl, &f), time.Duration(0), "the check ran: the next is scheduled")
}

// TestAttachmentOfAnotherPVOfAFootprintVolumeChecksAtOnce: a second
// PersistentVolume naming the same array volume (static provisioning of
// the same handle), or an inline volume, published to another node can
// give the fenced node its access back as well (csi-vxflexos adds every
// interfaceNames IP on each publish): its attachment reads the fence back
// at once, matched by driver and handle.
func TestAttachmentOfAnotherPVOfAFootprintVolumeChecksAtOnce(t *testing.T) {
	w := heldWorld(t)
	f := w.group.fence("c1", "n1")
	var handle string
	for _, v := range f.Footprint {
		if v.PV == "pv-a2" {
			handle = v.Handle
		}
	}
	require.NotEmpty(t, handle)

	w.regrant("a2")
	due := w.ctrl.heldDue(w.ctrl.clusters["c1"], f)
	w.ctrl.AttachmentChanged("c1", kube.AttachmentChange{PV: "pv-static-copy", Driver: "other.csi.example.com", Handle: handle})
	require.Greater(t, w.ctrl.heldDue(w.ctrl.clusters["c1"], f), due-time.Second, "another driver's handle is another volume")

	w.ctrl.AttachmentChanged("c1", kube.AttachmentChange{PV: "pv-static-copy", Driver: arrayclients.DriverPowerFlex, Handle: handle})
	w.waitRegressions(1)
	assert.False(t, w.arrays["a2"].hasAccess("n1"))
}

// TestHeldChecksContinueForANodeBackWithoutReboot: a node that comes back
// healthy with the boot ID of the fence (a partition healed, no reboot)
// may still run what it ran before: its fence stays held, and access
// regained is cut again. Only a reboot ends the held checks.
func TestHeldChecksContinueForANodeBackWithoutReboot(t *testing.T) {
	w := newWorld(t, heldPeriod(20*time.Millisecond))
	_, stop := w.lead()
	defer stop()
	w.verdict("n1", detector.Failed)
	w.waitState(ledger.StateEvicted)
	f := w.group.fence("c1", "n1")
	require.NotEmpty(t, f.BootID)
	w.kube.setNode("n1", func(n *corev1.Node) {
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	})
	w.verdict("n1", detector.Healthy)
	w.waitHeldChecks(3)

	applies := w.regrant("a1")
	w.waitRegressions(1)
	assert.False(t, w.arrays["a1"].hasAccess("n1"), "cut again: the node never rebooted")
	assert.Greater(t, w.log.count("apply a1 n1"), applies)
}

// TestHeldRegressionWhilePausedTakesNoStep: while fencing is paused the
// ledger refuses to take a fence on a verdict back to fencing, so the
// regression is reported and the fence takes no step (no pod deleted)
// until fencing resumes; then the access is cut.
func TestHeldRegressionWhilePausedTakesNoStep(t *testing.T) {
	w := newWorld(t, heldPeriod(20*time.Millisecond))
	_, stop := w.lead()
	defer stop()
	w.verdict("n1", detector.Failed)
	w.waitState(ledger.StateEvicted)
	w.group.must(t, &ledger.SetPause{Meta: w.group.meta(), Cluster: "c1", Paused: true, Operator: "op", Reason: "array upgrade"})

	w.regrant("a1")
	require.Eventually(t, func() bool {
		st := w.ctrl.Status()
		return len(st.Fences) == 1 && strings.Contains(st.Fences[0].Blocked, "found the node's access again")
	}, 10*time.Second, 2*time.Millisecond)
	w.waitHeldChecks(3) // several held checks: still one report
	assert.Equal(t, 1, w.kube.eventReasons()["FenceRegressed"], "reported once while paused")
	assert.InDelta(t, 1.0, value(w.ctrl.metrics.regressions.WithLabelValues("c1", "a1", RegressionVolume)), 0)
	f := w.group.fence("c1", "n1")
	assert.Equal(t, ledger.StateEvicted, f.State, "no step while paused")
	assert.True(t, w.arrays["a1"].hasAccess("n1"), "not cut while paused")

	w.group.must(t, &ledger.SetPause{Meta: w.group.meta(), Cluster: "c1", Paused: false, Operator: "op", Reason: "done"})
	w.waitRegressions(1)
	assert.False(t, w.arrays["a1"].hasAccess("n1"), "cut once fencing resumed")
	assert.Equal(t, 1, w.kube.eventReasons()["FenceRegressed"], "the same regression is not reported twice")
}

// TestHeldRegressionWaitsForTheGroupLedgerVersion: in a group that does
// not run ledger version 3 (a voter's older build refuses the step back to
// fencing from evicted), a regression is reported and the fence held where
// it is, saying why, until the group runs version 3; then it is cut.
func TestHeldRegressionWaitsForTheGroupLedgerVersion(t *testing.T) {
	w := newWorldOn(t, newLegacyGroup(), heldPeriod(20*time.Millisecond))
	_, stop := w.lead()
	defer stop()
	w.verdict("n1", detector.Failed)
	w.waitState(ledger.StateEvicted)

	w.regrant("a1")
	require.Eventually(t, func() bool {
		st := w.ctrl.Status()
		return len(st.Fences) == 1 && strings.Contains(st.Fences[0].Blocked, "needs ledger version 3 and the group runs 2")
	}, 10*time.Second, 2*time.Millisecond)
	w.waitHeldChecks(3)
	assert.Equal(t, 1, w.kube.eventReasons()["FenceRegressed"], "reported once")
	f := w.group.fence("c1", "n1")
	assert.Equal(t, ledger.StateEvicted, f.State, "no step the older voters would refuse")

	w.group.must(t, &ledger.SetLedgerVersion{Meta: w.group.meta(), LedgerVersion: ledger.Version})
	w.waitRegressions(1)
	assert.False(t, w.arrays["a1"].hasAccess("n1"), "cut once the group runs version 3")
}

// TestHeldReadFailureIsNoRegression: a held read-back that fails proves
// nothing: the fence stays where it is and the next period reads again.
func TestHeldReadFailureIsNoRegression(t *testing.T) {
	w := newWorld(t, heldPeriod(20*time.Millisecond))
	_, stop := w.lead()
	defer stop()
	w.verdict("n1", detector.Failed)
	w.waitState(ledger.StateEvicted)
	verifies := w.log.count("verify a2 n1 fenced")
	w.arrays["a2"].set(func(fa *fakeArray) { fa.verifyErr = assert.AnError })
	w.waitHeldChecks(3)
	f := w.group.fence("c1", "n1")
	assert.Equal(t, ledger.StateEvicted, f.State)
	n, _ := Regressions(f)
	assert.Equal(t, 0, n)
	w.arrays["a2"].set(func(fa *fakeArray) { fa.verifyErr = nil })
	require.Eventually(t, func() bool { return w.log.count("verify a2 n1 fenced") > verifies }, 5*time.Second, 2*time.Millisecond,
		"the held checks read the array again once it answers")
}

// TestRegressionStaleRedrivesVerifiedArrays: a fence sent back to fencing
// by a held read-back drives again every array not read back since that
// step, even if its result still says verified (the read-back that found
// the access was not recorded before a crash); a refence for a grown
// footprint does not.
func TestRegressionStaleRedrivesVerifiedArrays(t *testing.T) {
	at := time.Date(2026, 11, 28, 6, 0, 0, 0, time.UTC)
	f := &ledger.Fence{
		Plans: plansFor("a1", "a2", "a3"),
		Results: map[string]*ledger.ArrayResult{
			"a1": {Array: "a1", Verified: true, LastAt: at.Add(-time.Minute)},
			"a2": {Array: "a2", Verified: true, LastAt: at.Add(time.Second)},
			"a3": {Array: "a3", Verified: false, LastAt: at.Add(time.Second)},
		},
		Steps: []ledger.Step{{To: ledger.StateEvicted, At: at.Add(-time.Minute)},
			{From: ledger.StateEvicted, To: ledger.StateFencing, At: at, Note: RegressionNote + " (was evicted): a1: v1"}},
	}
	assert.Equal(t, []string{"a1"}, regressionStale(f), "a1 was verified before the step; a2 after; a3 is driven anyway")

	// A later leader whose clock is behind: its read-back of a1 comes
	// after the step (a later term) though its time is earlier; a2's,
	// recorded by an earlier leader with a clock ahead, came before.
	f.Steps[1].Term = 5
	f.Results["a1"].LastTerm, f.Results["a1"].LastAt = 6, at.Add(-time.Hour)
	f.Results["a2"].LastTerm, f.Results["a2"].LastAt = 4, at.Add(time.Hour)
	assert.Equal(t, []string{"a2"}, regressionStale(f), "terms order the records, not the leaders' clocks")
	f.Steps[1].Note = "footprint grew after the eviction: pv-late"
	assert.Empty(t, regressionStale(f))
}

func plansFor(arrays ...string) []arrayclients.Plan {
	out := make([]arrayclients.Plan, len(arrays))
	for i, a := range arrays {
		out[i] = arrayclients.Plan{Array: a}
	}
	return out
}

// TestTaintRemovalOrder: an unfence takes the out-of-service taint off
// first and waits OutOfServiceSettle before any array access is given back
// (Kubernetes' controllers may still act on the taint from their caches,
// kubernetes#142331); fenced's own NoSchedule taint comes off last, after
// every array is restored and read back. A new leader waits the settle
// again.
func TestTaintRemovalOrder(t *testing.T) {
	const settle = 300 * time.Millisecond
	w := newWorld(t, func(cfg *Config) { cfg.OutOfServiceSettle = settle })
	_, stop := w.lead()
	w.verdict("n1", detector.Failed)
	w.waitState(ledger.StateEvicted)
	w.reboot("boot-2")
	w.waitState(ledger.StateUnfenceIntent)
	// A leader change while the unfence waits for the settle.
	require.Eventually(t, func() bool {
		_, i := w.log.when("untaint n1 " + TaintOutOfService)
		return i >= 0
	}, 10*time.Second, time.Millisecond)
	stop()
	_, stop = w.lead()
	defer stop()
	w.waitClosed()

	ops := w.log.list()
	oosAt, oos := w.log.when("untaint n1 " + TaintOutOfService)
	fencedAt, fenced := w.log.when("untaint n1 " + TaintFenced)
	require.GreaterOrEqual(t, oos, 0, "ops %v", ops)
	require.GreaterOrEqual(t, fenced, 0, "ops %v", ops)
	for _, a := range []string{"a1", "a2", "a3"} {
		undoAt, undo := w.log.when("undo " + a + " n1")
		require.GreaterOrEqual(t, undo, 0, "ops %v", ops)
		assert.Less(t, oos, undo, "out-of-service taint off before access returns on %s: %v", a, ops)
		assert.GreaterOrEqual(t, undoAt.Sub(oosAt), settle, "access on %s returned before the settle", a)
		assert.Less(t, undo, fenced, "fenced's taint stays until %s is restored: %v", a, ops)
		assert.True(t, fencedAt.After(undoAt))
	}
}
