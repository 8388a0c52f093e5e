package stonith

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/cluster/ledger"
	"github.com/fenced-project/fenced/detector"
)

// requireFenceBeforeWrites checks invariant 1 on the ordered op log: every
// taint and delete of node comes after the last array's apply and its
// verified read-back.
func requireFenceBeforeWrites(t *testing.T, ops []string, node string, arrays ...string) {
	t.Helper()
	firstWrite := -1
	for i, op := range ops {
		if strings.HasPrefix(op, "taint "+node) || strings.HasPrefix(op, "delete ") {
			firstWrite = i
			break
		}
	}
	require.NotEqual(t, -1, firstWrite, "no taint or delete at all: %v", ops)
	for _, a := range arrays {
		verified := slices.Index(ops, "verify "+a+" "+node+" fenced")
		require.NotEqual(t, -1, verified, "array %s never verified fenced: %v", a, ops)
		require.Less(t, verified, firstWrite, "a taint or delete came before %s was verified: %v", a, ops)
	}
}

func (w *world) reboot(bootID string) {
	w.kube.setNode("n1", func(n *corev1.Node) {
		n.Status.NodeInfo.BootID = bootID
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	})
	// After a reboot the node's old pods are gone (the taint manager
	// evicted them and the kubelet no longer runs them).
	w.kube.mu.Lock()
	delete(w.kube.pods, w.other)
	w.kube.mu.Unlock()
	w.verdict("n1", detector.Healthy)
}

func TestPipelineFencesVerifiesTaintsEvicts(t *testing.T) {
	w := newWorld(t)
	_, stop := w.lead()
	defer stop()
	w.verdict("n1", detector.Failed)
	w.waitState(ledger.StateEvicted)

	for name, a := range w.arrays {
		assert.False(t, a.hasAccess("n1"), "n1 still has access on %s", name)
		assert.True(t, a.hasAccess("n2"), "n2 lost access on %s", name)
	}
	assert.ElementsMatch(t, []string{"fenced.io/fenced=" + w.group.fence("c1", "n1").ID + ":NoSchedule",
		"node.kubernetes.io/out-of-service=nodeshutdown:NoExecute"}, w.kube.taints("n1"))
	pods, _ := w.kube.PodsOnNode(t.Context(), "n1")
	require.Len(t, pods, 1, "only the unprotected, non-StatefulSet pod stays")
	assert.Equal(t, "frontend", pods[0].Name)
	pods, _ = w.kube.PodsOnNode(t.Context(), "n2")
	require.Len(t, pods, 1, "pods of other nodes are untouched")
	requireFenceBeforeWrites(t, w.log.list(), "n1", "a1", "a2", "a3")

	f := w.group.fence("c1", "n1")
	var states []ledger.FenceState
	for _, s := range f.Steps {
		states = append(states, s.To)
	}
	assert.Equal(t, []ledger.FenceState{ledger.StateIntent, ledger.StateFencing, ledger.StateFenced,
		ledger.StateTainted, ledger.StateEvicted}, states)
	assert.Equal(t, "boot-1", f.BootID)
	assert.Len(t, f.PodUIDs, 4, "every pod on the node before the fence is recorded")
	assert.Len(t, f.Plans, 3)

	ev := w.kube.eventReasons()
	assert.Equal(t, 1, ev["NodeFenced"])
	assert.Equal(t, 3, ev["FencedPodDeleted"])
	assert.Equal(t, 1, ev["FencedPodsDeleted"])
	w.waitEvictionCounted()
	assert.InDelta(t, 1.0, value(w.ctrl.metrics.fences.WithLabelValues("c1", ResultEvicted)), 0)
	assert.InDelta(t, 3.0, value(w.ctrl.metrics.podsDeleted.WithLabelValues("c1")), 0)
	assert.Equal(t, uint64(1), histCount(w.ctrl.metrics.toEviction.WithLabelValues("c1").(histogram)))

	st := w.ctrl.Status()
	require.Len(t, st.Fences, 1)
	assert.Equal(t, "evicted", st.Fences[0].State)
	for _, a := range st.Fences[0].Arrays {
		assert.Equal(t, "verified", a.Step)
	}

	t.Run("reboot unfences and restores every array", func(t *testing.T) {
		w.reboot("boot-2")
		w.waitClosed()
		for name, a := range w.arrays {
			assert.True(t, a.hasAccess("n1"), "n1 not restored on %s", name)
		}
		assert.Empty(t, w.kube.taints("n1"))
		h := w.group.history("c1", "n1")
		assert.Equal(t, "boot-2", h[len(h)-1].UnfenceBootID)
		assert.InDelta(t, 1.0, value(w.ctrl.metrics.fences.WithLabelValues("c1", ResultRestored)), 0)
		assert.Equal(t, 1, w.kube.eventReasons()["NodeUnfenced"])
	})
}

// TestEvictionDeletesPodsSideBySide: a fenced node's pods are deleted by
// concurrent calls, never more than evictWorkers at once, and every one
// gets its Event and is counted.
func TestEvictionDeletesPodsSideBySide(t *testing.T) {
	w := newWorld(t)
	const extra = 12
	for i := range extra {
		w.kube.addPod("db", fmt.Sprintf("big-%d", i), "n1", true, nil)
	}
	w.kube.mu.Lock()
	w.kube.deleteDelay = 20 * time.Millisecond
	w.kube.mu.Unlock()
	_, stop := w.lead()
	defer stop()
	w.verdict("n1", detector.Failed)
	w.waitState(ledger.StateEvicted)

	pods, _ := w.kube.PodsOnNode(t.Context(), "n1")
	require.Len(t, pods, 1, "only the unprotected, non-StatefulSet pod stays")
	w.kube.mu.Lock()
	peak := w.kube.peakDeletes
	w.kube.mu.Unlock()
	assert.Greater(t, peak, 1, "the pods were deleted one at a time")
	assert.LessOrEqual(t, peak, evictWorkers)
	assert.Equal(t, extra+3, w.kube.eventReasons()["FencedPodDeleted"])
	assert.InDelta(t, float64(extra+3), value(w.ctrl.metrics.podsDeleted.WithLabelValues("c1")), 0)
	f := w.group.fence("c1", "n1")
	assert.Contains(t, f.Steps[len(f.Steps)-1].Note, fmt.Sprintf("force-deleted %d pods", extra+3))
}

func TestArrayFaultBlocksTaintAndDelete(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault func(a *fakeArray)
		clear func(a *fakeArray)
	}{
		{"apply fails", func(a *fakeArray) { a.applyErr = errors.New("injected: 503") },
			func(a *fakeArray) { a.applyErr = nil }},
		{"verify fails", func(a *fakeArray) { a.verifyErr = errors.New("injected: reset") },
			func(a *fakeArray) { a.verifyErr = nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			w.arrays["a2"].set(tc.fault)
			_, stop := w.lead()
			defer stop()
			w.verdict("n1", detector.Failed)
			require.Eventually(t, func() bool {
				st := w.ctrl.Status()
				return len(st.Fences) == 1 && st.Fences[0].Blocked != ""
			}, 5*time.Second, 2*time.Millisecond)
			assert.Contains(t, w.ctrl.Status().Fences[0].Blocked, "a2")
			assert.InDelta(t, 1.0, value(w.ctrl.metrics.blocked.WithLabelValues("c1")), 0)
			// The Event is recorded after the status shows the block.
			require.Eventually(t, func() bool { return w.kube.eventReasons()["FenceBlocked"] > 0 }, 5*time.Second, 2*time.Millisecond)
			assert.Equal(t, 1, w.kube.eventReasons()["FenceBlocked"])
			require.Never(t, func() bool {
				for _, op := range w.log.list() {
					if strings.HasPrefix(op, "taint") || strings.HasPrefix(op, "delete") {
						return true
					}
				}
				return false
			}, 300*time.Millisecond, 5*time.Millisecond, "a taint or delete while an array is not fenced")
			assert.Equal(t, ledger.StateFencing, w.state())
			f := w.group.fence("c1", "n1")
			assert.Greater(t, f.Results["a2"].Failures, 1, "the fence keeps retrying")

			w.arrays["a2"].set(tc.clear)
			w.waitState(ledger.StateEvicted)
			requireFenceBeforeWrites(t, w.log.list(), "n1", "a1", "a2", "a3")
			require.Eventually(t, func() bool {
				return value(w.ctrl.metrics.blocked.WithLabelValues("c1")) == 0
			}, time.Second, time.Millisecond)
		})
	}
}

// An array that says yes but still shows access on read-back is not fenced.
func TestReadBackDecidesNotTheCall(t *testing.T) {
	w := newWorld(t)
	lying := &lyingArray{fakeArray: w.arrays["a3"]}
	w.cfg.Arrays["a3"] = lying
	w.rebuild()
	_, stop := w.lead()
	defer stop()
	w.verdict("n1", detector.Failed)
	require.Eventually(t, func() bool {
		f := w.group.fence("c1", "n1")
		return f != nil && f.Results["a3"] != nil && f.Results["a3"].Attempts >= 4
	}, 5*time.Second, 2*time.Millisecond)
	require.Never(t, func() bool { return w.state() != ledger.StateFencing }, 200*time.Millisecond, 5*time.Millisecond)
	assert.Zero(t, w.log.count("taint n1 "+TaintFenced))
	assert.Contains(t, w.ctrl.Status().Fences[0].Blocked, "access remaining")
}

type lyingArray struct{ *fakeArray }

func (a *lyingArray) Apply(context.Context, arrayclients.Plan) error { return nil }

func TestCrashBetweenStepsResumes(t *testing.T) {
	for _, p := range Points() {
		t.Run(string(p), func(t *testing.T) {
			var fired atomic.Bool
			var cur atomic.Pointer[fakeLead]
			w := newWorld(t, func(cfg *Config) {
				cfg.Hook = func(at Point) bool {
					if fired.Load() {
						return false
					}
					if at == p {
						fired.Store(true)
						cur.Load().cancel() // the process dies here: no further writes
						return false
					}
					return true
				}
			})
			l, stop := w.lead()
			cur.Store(l)
			w.verdict("n1", detector.Failed)
			rebooted := false
			require.Eventually(t, func() bool {
				if !fired.Load() && !rebooted && w.state() == ledger.StateEvicted {
					w.reboot("boot-2")
					rebooted = true
				}
				return fired.Load()
			}, 10*time.Second, 2*time.Millisecond, "hook %s never reached (state %q)", p, w.state())
			stop()

			// A new process (new controller, new term) resumes from the ledger.
			w.cfg.Hook = nil
			w.rebuild()
			_, stop = w.lead()
			defer stop()
			if rebooted {
				w.verdict("n1", detector.Healthy)
			} else {
				w.verdict("n1", detector.Failed)
				w.waitState(ledger.StateEvicted)
				w.reboot("boot-2")
			}
			w.waitClosed()

			requireFenceBeforeWrites(t, w.log.list(), "n1", "a1", "a2", "a3")
			assert.Len(t, w.group.history("c1", "n1"), 1, "one fence record, not two")
			assert.Equal(t, 3, w.kube.deletes, "each pod deleted once")
			for name, a := range w.arrays {
				assert.True(t, a.hasAccess("n1"), "n1 not restored on %s", name)
				assert.LessOrEqual(t, a.applies, 2, "array %s applied more than once per process", name)
				assert.LessOrEqual(t, a.undos, 2, "array %s undone more than once per process", name)
				assert.GreaterOrEqual(t, a.undos, 1)
			}
			assert.Empty(t, w.kube.taints("n1"))
			// Never an undo before the last fence write, never a taint after restore began.
			ops := w.log.list()
			firstUndo := slices.IndexFunc(ops, func(s string) bool { return strings.HasPrefix(s, "undo") })
			lastDelete := -1
			for i, op := range ops {
				if strings.HasPrefix(op, "delete") || strings.HasPrefix(op, "taint") {
					lastDelete = i
				}
			}
			require.Less(t, lastDelete, firstUndo, "fence writes after the restore began: %v", ops)
		})
	}
}

// TestRecoveryWaitsForDetaches: a rebooted node gets its array access back
// only once the attach/detach controller has detached the volumes of its
// evicted pods, so no detach of the node happens after the restore.
func TestRecoveryWaitsForDetaches(t *testing.T) {
	w := newWorld(t)
	_, stop := w.lead()
	defer stop()
	w.verdict("n1", detector.Failed)
	w.waitState(ledger.StateEvicted)
	w.kube.setDetaching("n1", "csi-1 (pv-a)")
	w.reboot("boot-2")
	require.Eventually(t, func() bool {
		st := w.ctrl.Status()
		return len(st.Fences) == 1 && strings.Contains(st.Fences[0].Recovery, "detach csi-1 (pv-a)")
	}, 10*time.Second, 2*time.Millisecond, "status never named the pending detach: %+v", w.ctrl.Status())
	assert.Equal(t, ledger.StateEvicted, w.state(), "restore began while a detach was pending")
	for name, a := range w.arrays {
		assert.False(t, a.hasAccess("n1"), "n1 restored on %s while a detach was pending", name)
	}
	w.kube.setDetaching("n1")
	w.waitClosed()
	for name, a := range w.arrays {
		assert.True(t, a.hasAccess("n1"), "n1 not restored on %s", name)
	}
}

// While a fenced node's verdict is not Healthy, the resync of its fence
// reads nothing from the API server (only a Healthy verdict can lead to an
// unfence, and its arrival enqueues the node), yet the status says why.
func TestRecoveryReadsNothingWhileNodeIsDown(t *testing.T) {
	w := newWorld(t)
	_, stop := w.lead()
	defer stop()
	w.verdict("n1", detector.Failed)
	w.waitState(ledger.StateEvicted)
	require.Eventually(t, func() bool {
		st := w.ctrl.Status()
		return len(st.Fences) == 1 && st.Fences[0].Recovery == "node is still down (verdict failed)"
	}, 10*time.Second, 2*time.Millisecond, "%+v", w.ctrl.Status())
	reads := w.kube.readCount()
	// Many resyncs (Resync is 20ms here) and a verdict that stays down.
	w.verdict("n1", detector.Blocked)
	time.Sleep(200 * time.Millisecond)
	assert.Equal(t, reads, w.kube.readCount(), "recovery checks read the API server while the node was down")
	assert.Equal(t, "node is still down (verdict blocked)", w.ctrl.Status().Fences[0].Recovery)

	w.reboot("boot-2")
	w.waitClosed()
	assert.Greater(t, w.kube.readCount(), reads, "a Healthy verdict reads the node")
}

func TestReturnWithoutRebootStaysFenced(t *testing.T) {
	w := newWorld(t)
	_, stop := w.lead()
	defer stop()
	w.verdict("n1", detector.Failed)
	w.waitState(ledger.StateEvicted)
	w.kube.setNode("n1", func(n *corev1.Node) {
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	})
	w.verdict("n1", detector.Healthy)
	require.Eventually(t, func() bool { return len(w.ctrl.Status().NeedsReboot) == 1 }, 5*time.Second, 2*time.Millisecond)
	st := w.ctrl.Status()
	assert.Contains(t, st.NeedsReboot[0].Note, "needs reboot")
	assert.Contains(t, st.NeedsReboot[0].Note, "boot-1")
	assert.Contains(t, st.Fences[0].NeedsReboot, "without a reboot")
	assert.InDelta(t, 1.0, value(w.ctrl.metrics.needsReboot.WithLabelValues("c1")), 0)
	require.Never(t, func() bool { return w.state() != ledger.StateEvicted }, 300*time.Millisecond, 5*time.Millisecond)
	assert.Equal(t, 1, w.kube.eventReasons()["FencedNodeNeedsReboot"], "one Event, not one per reconcile")
	for _, a := range w.arrays {
		assert.False(t, a.hasAccess("n1"))
	}

	w.reboot("boot-2")
	w.waitClosed()
	assert.Empty(t, w.ctrl.Status().NeedsReboot)
	assert.InDelta(t, 0.0, value(w.ctrl.metrics.needsReboot.WithLabelValues("c1")), 0)
}

func TestDryRunWritesNothing(t *testing.T) {
	w := newWorld(t, func(cfg *Config) { cfg.Clusters[0].DryRun = true })
	_, stop := w.lead()
	defer stop()
	before := w.group.fsm.AppliedIndex()
	w.verdict("n1", detector.Failed)
	require.Eventually(t, func() bool { return len(w.ctrl.Status().DryRun) == 1 }, 5*time.Second, 2*time.Millisecond)
	rep := w.ctrl.Status().DryRun[0].Report
	assert.Len(t, rep.Plans, 3)
	assert.ElementsMatch(t, []string{"db/db-0", "db/db-1", "web/cache"}, rep.WouldDelete)
	require.Never(t, func() bool {
		return len(w.log.list()) > 0 || len(w.kube.eventReasons()) > 0 || w.group.fsm.AppliedIndex() != before
	}, 300*time.Millisecond, 5*time.Millisecond, "dry-run wrote something: %v", w.log.list())
	assert.InDelta(t, 1.0, value(w.ctrl.metrics.fences.WithLabelValues("c1", ResultDryRun)), 0)
}

// TestDoubtHoldsAFenceInIntent: a fence whose intent was committed before
// the replica lost its view of the cluster does not enter fencing while
// the detector doubts; it goes on once the doubt is over.
func TestDoubtHoldsAFenceInIntent(t *testing.T) {
	w := newWorld(t)
	w.group.must(t, &ledger.OpenFence{Meta: w.group.meta(), Cluster: "c1", Node: "n1", Origin: ledger.OriginVerdict,
		Reason: "verdict failed before the doubt", BootID: "boot-1"})
	w.det.set(func(st *detector.Status) { st.Doubt = detector.ReasonAPIServerUnreachable })
	w.verdict("n1", detector.Failed)
	_, stop := w.lead()
	defer stop()
	require.Eventually(t, func() bool {
		st := w.ctrl.Status()
		return len(st.Fences) == 1 && strings.Contains(st.Fences[0].Blocked, "doubts")
	}, 5*time.Second, 2*time.Millisecond, "fences: %+v", w.ctrl.Status().Fences)
	require.Never(t, func() bool { return w.state() != ledger.StateIntent || len(w.log.list()) > 0 },
		200*time.Millisecond, 5*time.Millisecond, "the fence went on while the replica doubted")
	w.det.set(func(st *detector.Status) { st.Doubt = detector.ReasonNone })
	w.waitState(ledger.StateEvicted)
}

func TestGuardsHoldNewFences(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(w *world)
		want  string
	}{
		{"paused cluster", func(w *world) {
			w.group.must(w.t, &ledger.SetPause{Meta: w.group.meta(), Cluster: "c1", Paused: true, Operator: "op", Reason: "array upgrade"})
		}, "paused"},
		{"paused globally", func(w *world) {
			w.group.must(w.t, &ledger.SetPause{Meta: w.group.meta(), Paused: true, Operator: "op", Reason: "upgrade"})
		}, "paused"},
		{"api server unreachable", func(w *world) { w.kube.apiErr = errors.New("connection refused") }, "API server"},
		{"detector doubt", func(w *world) {
			w.det.set(func(st *detector.Status) { st.Doubt = detector.ReasonWatchStale })
		}, "doubts"},
		{"storm", func(w *world) {
			w.det.set(func(st *detector.Status) {
				st.Storm = detector.StormState{Active: true, Unhealthy: 5, Limit: 2, Total: 6}
			})
		}, "storm"},
		{"no quorum", func(w *world) { w.group.verifyErr = errors.New("no quorum") }, "quorum"},
		{"returning node", func(w *world) { w.det.set(settling("n1", time.Now())) }, "heartbeat is fresh again"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			tc.setup(w)
			_, stop := w.lead()
			defer stop()
			w.verdict("n1", detector.Failed)
			require.Eventually(t, func() bool { return len(w.ctrl.Status().Held) == 1 }, 5*time.Second, 2*time.Millisecond)
			assert.Contains(t, w.ctrl.Status().Held[0].Note, tc.want)
			require.Never(t, func() bool { return w.group.fence("c1", "n1") != nil || len(w.log.list()) > 0 },
				200*time.Millisecond, 5*time.Millisecond)
		})
	}

	t.Run("identities never learned", func(t *testing.T) {
		w := newWorld(t)
		_, stop := w.lead()
		defer stop()
		w.verdict("n2", detector.Failed)
		require.Eventually(t, func() bool { return len(w.ctrl.Status().Held) == 1 }, 5*time.Second, 2*time.Millisecond)
		assert.Contains(t, w.ctrl.Status().Held[0].Note, "never learned")
	})

	t.Run("a returning node whose heartbeat goes stale again is fenced", func(t *testing.T) {
		w := newWorld(t)
		w.det.set(settling("n1", time.Now()))
		_, stop := w.lead()
		defer stop()
		w.verdict("n1", detector.Failed)
		require.Never(t, func() bool { return w.group.fence("c1", "n1") != nil }, 200*time.Millisecond, 5*time.Millisecond)
		// The heartbeat stale again: the detector's evidence no longer
		// shows the node settling, and the Failed verdict (unchanged,
		// re-read on the resync) opens the fence.
		w.det.set(settling("n1", time.Time{}))
		w.waitState(ledger.StateEvicted)
	})

	t.Run("resume lets the held fence go on", func(t *testing.T) {
		w := newWorld(t)
		w.group.must(t, &ledger.SetPause{Meta: w.group.meta(), Cluster: "c1", Paused: true, Operator: "op", Reason: "upgrade"})
		_, stop := w.lead()
		defer stop()
		w.verdict("n1", detector.Failed)
		require.Never(t, func() bool { return w.group.fence("c1", "n1") != nil }, 200*time.Millisecond, 5*time.Millisecond)
		// The pause of an earlier ledger version is op's: alice ends it by
		// ending every pause of c1.
		_, err := w.ctrl.SetPause(t.Context(), "alice", PauseRequest{Cluster: "c1", All: true, Reason: "upgrade done"}, false)
		require.NoError(t, err)
		w.waitState(ledger.StateEvicted)
	})
}

// A replica that lost leadership between two steps writes nothing more.
func TestDeposedLeaderStopsWriting(t *testing.T) {
	var cur atomic.Pointer[fakeLead]
	w := newWorld(t, func(cfg *Config) {
		cfg.Hook = func(p Point) bool {
			if p == PointFenced {
				// Another replica wins an election: this leadership is stale
				// but its context is not cancelled yet.
				w := cur.Load()
				w.g.mu.Lock()
				w.g.term++
				w.g.mu.Unlock()
			}
			return true
		}
	})
	l, stop := w.lead()
	cur.Store(l)
	defer stop()
	w.verdict("n1", detector.Failed)
	w.waitState(ledger.StateFenced)
	require.Never(t, func() bool { return w.log.count("taint n1 "+TaintFenced) > 0 || w.kube.deletes > 0 },
		300*time.Millisecond, 5*time.Millisecond, "a deposed leader tainted or deleted")
}

// A new leader taking the other direction than the last one waits out the
// old lease plus the array timeout before its first array write: the
// longer of its own and the one the other replicas advertised (the old
// leader's configuration may allow its requests longer).
func TestConflictingStepWaitsOutPreviousLeader(t *testing.T) {
	for _, tc := range []struct {
		name   string
		longer time.Duration // than this replica's array timeout
	}{{"own timeout", 0}, {"previous leader's longer timeout", 500 * time.Millisecond}} {
		t.Run(tc.name, func(t *testing.T) { conflictingStepWaitsOut(t, tc.longer) })
	}
}

func conflictingStepWaitsOut(t *testing.T, longer time.Duration) {
	w := newWorld(t)
	_, stop := w.lead()
	w.verdict("n1", detector.Failed)
	w.waitState(ledger.StateEvicted)
	stop()

	w.rebuild()
	l := w.group.lead(t)
	l.safeAt = time.Now().Add(200 * time.Millisecond)
	if longer > 0 {
		l.peerTimeout = w.cfg.ArrayTimeout + longer
	}
	deadline := l.safeAt.Add(max(w.cfg.ArrayTimeout, l.peerTimeout))
	errc := make(chan error, 1)
	go func() { errc <- w.ctrl.Lead(l) }()
	defer func() { l.cancel(); require.NoError(t, <-errc) }()
	w.reboot("boot-2")
	var undoAt time.Time
	require.Eventually(t, func() bool {
		if undoAt.IsZero() && slices.ContainsFunc(w.log.list(), func(s string) bool { return strings.HasPrefix(s, "undo") }) {
			undoAt = time.Now()
		}
		return !undoAt.IsZero()
	}, 10*time.Second, time.Millisecond)
	assert.False(t, undoAt.Before(deadline), "undo at %s, before the old leader's lease and request timeout ran out at %s",
		undoAt.Format(time.StampMicro), deadline.Format(time.StampMicro))
	w.waitClosed()
}

func TestRecoveryDecision(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	node := func(boot string, ready corev1.ConditionStatus) *corev1.Node {
		n := &corev1.Node{}
		n.Status.NodeInfo.BootID = boot
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}
		return n
	}
	old := corev1.Pod{}
	old.UID, old.Name, old.Namespace, old.Status.Phase = "old-1", "frontend", "web", corev1.PodRunning
	done := old
	done.Status.Phase = corev1.PodSucceeded
	base := recoveryInput{FenceBootID: "b1", Node: node("b2", corev1.ConditionTrue), Verdict: detector.Healthy,
		HealthySince: now.Add(-time.Minute), PodUIDs: []string{"old-1"}, Now: now, Settle: 30 * time.Second}
	tcs := []struct {
		name        string
		mod         func(in *recoveryInput)
		unfence     bool
		needsReboot bool
		why         string
	}{
		{"rebooted, settled, no old pods", func(*recoveryInput) {}, true, false, "b1 -> b2"},
		{"still down", func(in *recoveryInput) {
			in.Verdict, in.Node = detector.Failed, node("b1", corev1.ConditionUnknown)
		}, false, false, "still down"},
		{"back with the same boot ID", func(in *recoveryInput) { in.Node = node("b1", corev1.ConditionTrue) }, false, true, "without a reboot"},
		{"dead, Ready not yet updated by the node controller", func(in *recoveryInput) {
			in.Verdict, in.Node = detector.Failed, node("b1", corev1.ConditionTrue)
		}, false, false, "still down"},
		{"back, boot ID unknown at fence time", func(in *recoveryInput) { in.FenceBootID = "" }, false, true, "unknown"},
		{"rebooted but settling", func(in *recoveryInput) { in.HealthySince = now.Add(-10 * time.Second) }, false, false, "settling"},
		{"rebooted, verdict not healthy yet", func(in *recoveryInput) { in.Verdict = detector.Failed }, false, false, "waiting for a healthy verdict"},
		{"rebooted, not Ready", func(in *recoveryInput) { in.Node = node("b2", corev1.ConditionFalse) }, false, false, "Ready"},
		{"rebooted, old pod still runs", func(in *recoveryInput) { in.Pods = []corev1.Pod{old} }, false, false, "web/frontend"},
		{"rebooted, old pod finished", func(in *recoveryInput) { in.Pods = []corev1.Pod{done} }, true, false, ""},
		{"rebooted, a volume still waits for its detach", func(in *recoveryInput) { in.Detaching = []string{"csi-1 (pv-a)"} },
			false, false, "detach csi-1 (pv-a)"},
	}
	for _, tc := range tcs {
		t.Run(tc.name, func(t *testing.T) {
			in := base
			tc.mod(&in)
			d := decideRecovery(in)
			assert.Equal(t, tc.unfence, d.Unfence, d.Why)
			assert.Equal(t, tc.needsReboot, d.NeedsReboot, d.Why)
			assert.Contains(t, d.Why, tc.why)
		})
	}
}

// An out-of-service taint an administrator put on the node before the
// fence stays on it after the unfence; fenced lifts only its own.
func TestUnfenceKeepsAnAdministratorsOutOfServiceTaint(t *testing.T) {
	w := newWorld(t)
	admin := corev1.Taint{Key: TaintOutOfService, Value: "maintenance", Effect: corev1.TaintEffectNoExecute}
	w.kube.setNode("n1", func(n *corev1.Node) { n.Spec.Taints = append(n.Spec.Taints, admin) })
	_, stop := w.lead()
	defer stop()
	w.verdict("n1", detector.Failed)
	w.waitState(ledger.StateEvicted)
	f := w.group.fence("c1", "n1")
	require.NotNil(t, f.OutOfServiceBefore)
	assert.True(t, *f.OutOfServiceBefore)
	assert.ElementsMatch(t, []string{"node.kubernetes.io/out-of-service=maintenance:NoExecute",
		"fenced.io/fenced=" + f.ID + ":NoSchedule"}, w.kube.taints("n1"), "the administrator's taint is left as it was")

	w.reboot("boot-2")
	w.waitClosed()
	assert.Equal(t, []string{"node.kubernetes.io/out-of-service=maintenance:NoExecute"}, w.kube.taints("n1"))
}

// Without one, the record says so and unfence lifts both taints (the
// pipeline test above); a re-fence after fenced tainted the node does not
// mistake fenced's own taint for an administrator's.
func TestForeignOutOfService(t *testing.T) {
	node := func(taints ...corev1.Taint) *corev1.Node {
		return &corev1.Node{Spec: corev1.NodeSpec{Taints: taints}}
	}
	oos := corev1.Taint{Key: TaintOutOfService, Value: OutOfServiceValue, Effect: corev1.TaintEffectNoExecute}
	ours := corev1.Taint{Key: TaintFenced, Value: "fence-7", Effect: corev1.TaintEffectNoSchedule}
	other := corev1.Taint{Key: TaintFenced, Value: "fence-3", Effect: corev1.TaintEffectNoSchedule}
	assert.False(t, foreignOutOfService(node(), "fence-7"))
	assert.True(t, foreignOutOfService(node(oos), "fence-7"))
	assert.False(t, foreignOutOfService(node(oos, ours), "fence-7"))
	assert.True(t, foreignOutOfService(node(oos, other), "fence-7"), "another fence's taint left behind is not this fence's")
}

// The guards during fencing (the documented rule, docs/operations.md): a
// fence that changed no array yet holds when this replica starts to doubt
// its view; one that changed an array finishes cutting the node, then
// holds its taints and evictions until the doubt clears.
func TestGuardsDuringFencing(t *testing.T) {
	doubt := func(w *world, on bool) {
		w.det.set(func(st *detector.Status) {
			st.Doubt = detector.ReasonNone
			if on {
				st.Doubt = detector.ReasonAPIServerUnreachable
			}
		})
	}
	t.Run("nothing changed yet: hold", func(t *testing.T) {
		var w *world
		w = newWorld(t, func(cfg *Config) {
			cfg.Hook = func(p Point) bool {
				if p == PointFencing {
					doubt(w, true)
				}
				return true
			}
		})
		_, stop := w.lead()
		defer stop()
		w.verdict("n1", detector.Failed)
		w.waitState(ledger.StateFencing)
		require.Never(t, func() bool {
			for _, a := range w.arrays {
				if !a.hasAccess("n1") {
					return true
				}
			}
			return w.state() != ledger.StateFencing
		}, 300*time.Millisecond, 5*time.Millisecond, "an array was changed while the replica doubted")
		assert.Contains(t, w.ctrl.Status().Fences[0].Blocked, "holds before changing any array")
		doubt(w, false)
		w.waitState(ledger.StateEvicted)
	})
	t.Run("half applied: finish the cut, hold the taints", func(t *testing.T) {
		w := newWorld(t)
		w.arrays["a2"].set(func(a *fakeArray) { a.applyErr = errors.New("injected: busy") })
		_, stop := w.lead()
		defer stop()
		w.verdict("n1", detector.Failed)
		require.Eventually(t, func() bool { return !w.arrays["a1"].hasAccess("n1") }, 5*time.Second, 2*time.Millisecond)
		doubt(w, true)
		w.arrays["a2"].set(func(a *fakeArray) { a.applyErr = nil })
		w.waitState(ledger.StateFenced)
		for name, a := range w.arrays {
			assert.False(t, a.hasAccess("n1"), "n1 still has access on %s", name)
		}
		require.Never(t, func() bool { return w.state() != ledger.StateFenced || len(w.kube.taints("n1")) > 0 },
			300*time.Millisecond, 5*time.Millisecond, "tainted while the replica doubted")
		require.Eventually(t, func() bool {
			st := w.ctrl.Status()
			return len(st.Fences) == 1 && strings.Contains(st.Fences[0].Blocked, "holds its taints and evictions")
		}, 5*time.Second, 2*time.Millisecond)
		doubt(w, false)
		w.waitState(ledger.StateEvicted)
	})
}

// TestTaintWaitsForAnAttachmentTheCacheLacks: a volume attached to the node
// after the fence read its footprint, which the API server shows but the
// footprint's informers have not delivered yet, holds the taint (the
// out-of-service taint would let Kubernetes detach it while the node may
// still reach it). Once the informers have it, the fence goes back to
// cut it, reads it back, and only then taints and evicts.
func TestTaintWaitsForAnAttachmentTheCacheLacks(t *testing.T) {
	w := newWorld(t)
	w.kube.setAttached("n1", "pv-a1", "pv-a2", "pv-a3", "pv-late")
	_, stop := w.lead()
	defer stop()
	w.verdict("n1", detector.Failed)
	w.waitState(ledger.StateFenced)
	require.Never(t, func() bool { return len(w.kube.taints("n1")) > 0 || w.state() != ledger.StateFenced },
		200*time.Millisecond, 5*time.Millisecond, "tainted with an attachment the footprint has not seen")

	w.fp.attach("n1", "pv-late", "a1")
	w.waitState(ledger.StateEvicted)
	f := w.group.fence("c1", "n1")
	assert.True(t, slices.ContainsFunc(f.Footprint, func(v arrayclients.FootprintVolume) bool { return v.PV == "pv-late" }),
		"the late volume is in the record's footprint")
	var states []ledger.FenceState
	for _, s := range f.Steps {
		states = append(states, s.To)
	}
	assert.Equal(t, []ledger.FenceState{ledger.StateIntent, ledger.StateFencing, ledger.StateFenced,
		ledger.StateFencing, ledger.StateFenced, ledger.StateTainted, ledger.StateEvicted}, states)
}

// fenceSteps lists the states a record entered, oldest first.
func fenceSteps(f *ledger.Fence) []ledger.FenceState {
	var states []ledger.FenceState
	for _, s := range f.Steps {
		states = append(states, s.To)
	}
	return states
}

// TestEvictionWaitsForAVolumeAttachedAfterTheTaint: a pod bound to the node
// before the taint gets its volume attached after it (the attach-detach
// controller still attaches a bound pod's volume on a tainted node). No pod
// is deleted until that volume is cut and read back: the fence goes back
// from tainted to fencing, and evicts only then (invariant 1).
func TestEvictionWaitsForAVolumeAttachedAfterTheTaint(t *testing.T) {
	var once sync.Once
	var w *world
	w = newWorld(t, func(cfg *Config) {
		cfg.Hook = func(p Point) bool {
			if p == PointTainted {
				once.Do(func() {
					w.kube.setAttached("n1", "pv-a1", "pv-a2", "pv-a3", "pv-late")
					w.fp.attach("n1", "pv-late", "a1")
				})
			}
			return true
		}
	})
	_, stop := w.lead()
	defer stop()
	w.verdict("n1", detector.Failed)
	w.waitState(ledger.StateEvicted)
	f := w.group.fence("c1", "n1")
	assert.True(t, slices.ContainsFunc(f.Footprint, func(v arrayclients.FootprintVolume) bool { return v.PV == "pv-late" }),
		"the late volume is in the record's footprint")
	assert.Equal(t, []ledger.FenceState{ledger.StateIntent, ledger.StateFencing, ledger.StateFenced, ledger.StateTainted,
		ledger.StateFencing, ledger.StateFenced, ledger.StateTainted, ledger.StateEvicted}, fenceSteps(f))
	ops := w.log.list()
	firstDelete := slices.IndexFunc(ops, func(op string) bool { return strings.HasPrefix(op, "delete ") })
	require.GreaterOrEqual(t, firstDelete, 0, "pods deleted: %v", ops)
	readBacks := 0
	for _, op := range ops[:firstDelete] {
		if op == "verify a1 n1 fenced" {
			readBacks++
		}
	}
	assert.GreaterOrEqual(t, readBacks, 2, "a pod was deleted before a1 was read back again with the late volume: %v", ops)
	w.waitEvictionCounted()
	assert.InDelta(t, 1.0, value(w.ctrl.metrics.fences.WithLabelValues("c1", ResultEvicted)), 0)
}

// TestEvictedFenceCutsAVolumeAttachedAfterEviction: a volume Kubernetes
// attaches to the fenced node after its eviction is cut and read back
// while the node stays fenced; the record returns to evicted, and the
// fence is counted once.
func TestEvictedFenceCutsAVolumeAttachedAfterEviction(t *testing.T) {
	w := newWorld(t)
	_, stop := w.lead()
	defer stop()
	w.verdict("n1", detector.Failed)
	w.waitState(ledger.StateEvicted)
	applies := w.log.count("apply a1 n1")
	w.fp.attach("n1", "pv-late", "a1")
	w.ctrl.FootprintChanged("c1", "n1")
	require.Eventually(t, func() bool {
		f := w.group.fence("c1", "n1")
		return f != nil && f.State == ledger.StateEvicted && len(f.Steps) > 5
	}, 10*time.Second, 2*time.Millisecond, "ops %v", w.log.list())
	f := w.group.fence("c1", "n1")
	assert.Equal(t, []ledger.FenceState{ledger.StateIntent, ledger.StateFencing, ledger.StateFenced, ledger.StateTainted,
		ledger.StateEvicted, ledger.StateFencing, ledger.StateFenced, ledger.StateTainted, ledger.StateEvicted}, fenceSteps(f))
	assert.Contains(t, f.Steps[5].Note, "footprint grew after the eviction: pv-late")
	assert.Greater(t, w.log.count("apply a1 n1"), applies, "the array was cut again")
	assert.False(t, w.arrays["a1"].hasAccess("n1"))
	assert.InDelta(t, 1.0, value(w.ctrl.metrics.fences.WithLabelValues("c1", ResultEvicted)), 0,
		"a refence is not a second fence")
}

// TestRefenceWaitsForTheGroupLedgerVersion: in a group that does not run
// ledger version 3 (a voter runs an older build, which refuses the step),
// a tainted fence whose footprint grew is held, neither evicted nor taken
// back to fencing, until the group runs version 3.
func TestRefenceWaitsForTheGroupLedgerVersion(t *testing.T) {
	var once sync.Once
	var w *world
	w = newWorldOn(t, newLegacyGroup(), func(cfg *Config) {
		cfg.Hook = func(p Point) bool {
			if p == PointTainted {
				once.Do(func() {
					w.kube.setAttached("n1", "pv-a1", "pv-a2", "pv-a3", "pv-late")
					w.fp.attach("n1", "pv-late", "a1")
				})
			}
			return true
		}
	})
	_, stop := w.lead()
	defer stop()
	w.verdict("n1", detector.Failed)
	w.waitState(ledger.StateTainted)
	require.Never(t, func() bool {
		f := w.group.fence("c1", "n1")
		return f == nil || f.State != ledger.StateTainted
	}, time.Second, 5*time.Millisecond, "ops %v", w.log.list())
	assert.False(t, slices.ContainsFunc(w.log.list(), func(op string) bool { return strings.HasPrefix(op, "delete ") }),
		"no pod deleted while the new volume is uncut: %v", w.log.list())
}

// WitnessArrays names the arrays holding the node's footprint (the early
// verdict's array witnesses), and says the footprint cannot be witnessed
// whole when a volume has a gap, the node's identities were never learned
// or the informers cannot be read.
func TestWitnessArraysAreTheFootprintArrays(t *testing.T) {
	w := newWorld(t)
	got, ok := w.ctrl.WitnessArrays("c1", "n1")
	assert.True(t, ok)
	assert.Equal(t, []string{"a1", "a2", "a3"}, got)

	w.fp.detach("n1")
	w.fp.attach("n1", "pv-x", "a2")
	got, ok = w.ctrl.WitnessArrays("c1", "n1")
	assert.True(t, ok)
	assert.Equal(t, []string{"a2"}, got, "only the array holding a volume")

	w.fp.attach("n1", "pv-y", "a9")
	_, ok = w.ctrl.WitnessArrays("c1", "n1")
	assert.False(t, ok, "a volume on an array not configured")

	w.fp.detach("n1")
	got, ok = w.ctrl.WitnessArrays("c1", "n1")
	assert.True(t, ok)
	assert.Empty(t, got, "no volumes: the detector falls back to the identity arrays")

	w.fp.attach("n2", "pv-z", "a1")
	_, ok = w.ctrl.WitnessArrays("c1", "n2")
	assert.False(t, ok, "identities never learned")

	w.fp.broken = errors.New("informers not synced")
	_, ok = w.ctrl.WitnessArrays("c1", "n1")
	assert.False(t, ok)
	_, ok = w.ctrl.WitnessArrays("c9", "n1")
	assert.False(t, ok, "unknown cluster")
}

// TestEvictionWaitsForTheTaintEvictionController: after the out-of-service
// taint, fenced force-deletes a pod only once Kubernetes' taint-eviction
// controller has deleted it (it deletes by name and retries, and could
// otherwise delete the replacement pod of the same name); a pod that
// tolerates the taint is not waited for; and every pod is deleted after
// TaintEvictionWait when the controller never acts.
func TestEvictionWaitsForTheTaintEvictionController(t *testing.T) {
	podsLeft := func(w *world) []string {
		pods, err := w.kube.PodsOnNode(t.Context(), "n1")
		require.NoError(t, err)
		var names []string
		for _, p := range pods {
			names = append(names, p.Name)
		}
		slices.Sort(names)
		return names
	}
	t.Run("waits for the controller's delete", func(t *testing.T) {
		w := newWorld(t, func(cfg *Config) { cfg.TaintEvictionWait = time.Hour })
		w.kube.noTaintEviction = true
		tolerant := w.kube.addPod("db", "tolerant", "n1", true, nil)
		w.kube.mu.Lock()
		p := w.kube.pods[tolerant]
		p.Spec.Tolerations = []corev1.Toleration{{Key: TaintOutOfService, Operator: corev1.TolerationOpExists,
			Effect: corev1.TaintEffectNoExecute}}
		w.kube.pods[tolerant] = p
		w.kube.mu.Unlock()
		_, stop := w.lead()
		defer stop()
		w.verdict("n1", detector.Failed)
		w.waitState(ledger.StateTainted)
		require.Never(t, func() bool { return w.state() != ledger.StateTainted }, 300*time.Millisecond, 10*time.Millisecond,
			"the eviction went on before the taint-eviction controller deleted the pods")
		assert.Equal(t, []string{"cache", "db-0", "db-1", "frontend", "tolerant"}, podsLeft(w), "no pod deleted yet")

		// The controller acts late: fenced's deletes follow.
		w.kube.mu.Lock()
		w.kube.taintEvict("n1", corev1.Taint{Key: TaintOutOfService, Value: OutOfServiceValue, Effect: corev1.TaintEffectNoExecute})
		w.kube.mu.Unlock()
		w.waitState(ledger.StateEvicted)
		assert.Equal(t, []string{"frontend"}, podsLeft(w))
		ops := w.log.list()
		assert.Less(t, slices.Index(ops, "taint n1 "+TaintOutOfService), slices.Index(ops, "delete db/db-0"), "%v", ops)
	})
	t.Run("bounded when the controller never acts", func(t *testing.T) {
		w := newWorld(t, func(cfg *Config) { cfg.TaintEvictionWait = 50 * time.Millisecond })
		w.kube.noTaintEviction = true
		_, stop := w.lead()
		defer stop()
		w.verdict("n1", detector.Failed)
		w.waitState(ledger.StateEvicted)
		assert.Equal(t, []string{"frontend"}, podsLeft(w))
	})
}

// TestEvictionPollsShareARate: one fence waiting for the taint-eviction
// controller looks again every taintEvictionPoll; a hundred waiting at
// once (a storm) space their looks so that together they list pods at
// most taintEvictionPolls times a second, leaving the pipeline client's
// rate to the taints and deletes; a fence done waiting no longer counts.
func TestEvictionPollsShareARate(t *testing.T) {
	w := newWorld(t)
	assert.Equal(t, taintEvictionPoll, w.ctrl.evictionPoll("fence-0"))
	var last time.Duration
	for i := 1; i < 100; i++ {
		last = w.ctrl.evictionPoll("fence-" + strconv.Itoa(i))
	}
	assert.Equal(t, 100*time.Second/taintEvictionPolls, last, "100 waiting fences")
	assert.InDelta(t, float64(taintEvictionPolls), 100/last.Seconds(), 0.01, "their polls together")
	for i := 1; i < 100; i++ {
		w.ctrl.evictionWaitOver("fence-" + strconv.Itoa(i))
	}
	assert.Equal(t, taintEvictionPoll, w.ctrl.evictionPoll("fence-0"), "the others are done waiting")
}

// settling sets the detector's evidence for a Failed node: its heartbeat
// fresh again since since (zero: stale).
func settling(node string, since time.Time) func(st *detector.Status) {
	return func(st *detector.Status) {
		st.Nodes = []detector.Verdict{{Cluster: "c1", Node: node, State: detector.Failed, Reason: detector.ReasonHeartbeatStale,
			Evidence: detector.Evidence{SettlingSince: since}}}
	}
}

// TestSettleCountsFromTheReboot: a node fenced while its verdict stayed
// Healthy (an operator's fence; NodeHealthCheck's is the same) settles
// for the settle period after the leader first saw its new boot ID, not
// from the older Healthy verdict.
func TestSettleCountsFromTheReboot(t *testing.T) {
	const settle = 400 * time.Millisecond
	w := newWorld(t, func(cfg *Config) { cfg.Clusters[0].SettlePeriod = settle })
	_, stop := w.lead()
	defer stop()
	w.verdict("n1", detector.Healthy)
	time.Sleep(2 * settle) // the Healthy verdict is older than a settle period
	_, err := w.ctrl.Fence(t.Context(), "alice", FenceRequest{Cluster: "c1", Node: "n1", Reason: "disk controller errors"})
	require.NoError(t, err)
	w.waitState(ledger.StateEvicted)

	w.kube.setNode("n1", func(n *corev1.Node) {
		n.Status.NodeInfo.BootID = "boot-2"
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	})
	w.kube.mu.Lock()
	delete(w.kube.pods, w.other)
	w.kube.mu.Unlock()
	rebooted := time.Now()
	w.ctrl.Enqueue("c1", "n1")
	require.Eventually(t, func() bool {
		st := w.ctrl.Status()
		for _, f := range st.Fences {
			if strings.Contains(f.Recovery, "settling until") {
				return true
			}
		}
		return false
	}, 5*time.Second, 2*time.Millisecond, "the fence never waited for the node to settle after its reboot")
	w.waitClosed()
	h := w.group.history("c1", "n1")
	last := h[len(h)-1]
	var unfenceAt time.Time
	for _, s := range last.Steps {
		if s.To == ledger.StateUnfenceIntent {
			unfenceAt = s.At
		}
	}
	require.False(t, unfenceAt.IsZero())
	assert.GreaterOrEqual(t, unfenceAt.Sub(rebooted), settle, "unfence-intent came less than a settle period after the reboot")
}
