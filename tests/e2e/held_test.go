package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fenced-project/fenced/cmd/fenced/status"
	"github.com/fenced-project/fenced/stonith"
	"github.com/fenced-project/fenced/tests/csidriver"
	"github.com/fenced-project/fenced/tests/invariants"
	"github.com/fenced-project/fenced/tests/testbed"
)

// heldPeriod is the held period of TestFenceHeldAgainstRegrant: short,
// so that a regrant fenced misses shows within the run.
const heldPeriod = 3 * time.Second

// driverOf returns the emulated controller of the harness's array of a
// family.
func driverOf[C csidriver.Controller](t *testing.T, h *Harness, family string) (C, string) {
	t.Helper()
	for _, a := range sortedArrays(h.Arrays) {
		if a.Family == family && a.Driver != nil {
			c, ok := a.Driver.Controller.(C)
			require.True(t, ok, "the %s array's driver is a %T", family, a.Driver.Controller)
			return c, a.Name
		}
	}
	var zero C
	t.Fatalf("no %s array with an emulated driver", family)
	return zero, ""
}

// requireVAGone waits until the volume's attachment to the node is gone.
func requireVAGone(t *testing.T, h *Harness, v podVolume, node string) {
	t.Helper()
	name := invariants.AttachmentName(v.Handle, v.Driver, node)
	h.wait(waitRecovery, "volume "+v.PV+" detached from "+node, func() (bool, string) {
		_, err := h.CP.Client.StorageV1().VolumeAttachments().Get(h.ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}

// scale sets a StatefulSet's replicas.
func scale(t *testing.T, h *Harness, namespace, name string, replicas int) {
	t.Helper()
	patch := []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas))
	_, err := h.CP.Client.AppsV1().StatefulSets(namespace).Patch(h.ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err)
}

// metricSum sums the samples of a metric whose labels include every one
// of want (`name="value"`).
func metricSum(text, metric string, want ...string) float64 {
	var sum float64
	for _, line := range strings.Split(text, "\n") {
		rest, ok := strings.CutPrefix(line, metric+"{")
		if !ok {
			continue
		}
		labels, value, ok := strings.Cut(rest, "} ")
		if !ok || slices.ContainsFunc(want, func(w string) bool { return !strings.Contains(labels, w) }) {
			continue
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(value), 64); err == nil {
			sum += v
		}
	}
	return sum
}

// TestFenceHeldAgainstRegrant: a node N dies holding an RWX NFS volume of
// csi-vxflexos with interfaceNames (every node plugin wrote its IP into the
// ConfigMap, so each publish of the file system lists every node) and an
// NFS volume of csi-powerstore with the health monitor on (the attacher's
// reconcile publishes every attached NFS volume again every second).
// fenced either named N unprotected for those volumes before the failure
// and does not fence it, or fences it. Then the pods move; the PowerFlex
// file system is published again from an empty export (its StatefulSet
// scaled to zero and back), which lists N's IP again, and fenced finds
// the regained access, cuts it and reads it back: the fence's regressions
// in /status, the fenced_fence_regressions_total metric and a
// FenceRegressed Event on N agree, and the invariant checker's held rule
// holds (every access N regained, the PowerStore reconcile's included,
// ended within one held period).
func TestFenceHeldAgainstRegrant(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts a control plane and three fenced processes")
	}
	timing := fastTiming()
	timing.HeldPeriod = heldPeriod
	h := Start(t, Options{Timing: timing, NodeLeaseDurationSeconds: 4})
	h.WaitLeader(waitLeader)
	nodes := h.NodesOf(ClusterName)
	victim := nodes[0]

	flex, flexArray := driverOf[*csidriver.PowerFlex](t, h, "powerflex")
	for _, n := range nodes {
		flex.SetInterfaceIPs(n, nodeIP(t, h, n))
	}
	store, _ := driverOf[*csidriver.PowerStore](t, h, "powerstore")
	store.SetHealthMonitor(true)
	h.CP.SetAttacherReconcileSync(time.Second)

	// Both pods start on the victim: every other node cordoned.
	for _, n := range nodes[1:] {
		cordon(t, h, n, true)
	}
	flexPod := deployWith(t, h, testbed.StatefulSetSpec{Namespace: "db", Name: "flexrwx", Driver: testbed.DriverPowerFlex,
		Replicas: 1, NFS: true, ReadWriteMany: true})[victim]
	storePod := deployWith(t, h, testbed.StatefulSetSpec{Namespace: "db", Name: "storenfs", Driver: testbed.DriverPowerStore,
		Replicas: 1, NFS: true})[victim]
	for _, n := range nodes[1:] {
		cordon(t, h, n, false)
	}
	require.Equal(t, victim, flexPod.Spec.NodeName)
	require.Equal(t, victim, storePod.Spec.NodeName)
	vf, vs := volumeOf(t, h, flexPod), volumeOf(t, h, storePod)
	victimIP := nodeIP(t, h, victim)
	victimFlexID := csiNodeID(t, h, victim, testbed.DriverPowerFlex)
	victimStoreID := csiNodeID(t, h, victim, testbed.DriverPowerStore)
	require.Contains(t, exportedTo(t, h, vf), victimFlexID)
	require.Len(t, exportedTo(t, h, vf), len(nodes), "csi-vxflexos with interfaceNames exports to every node of the map")
	require.Equal(t, []string{victimStoreID}, exportedTo(t, h, vs))

	// Before the failure, let the leader's own reading of the node settle:
	// when a plan read now finds a gap for one of these volumes, wait
	// until /status names the node unprotected for it (the out-of-turn
	// gap scan after the attachments), so the failure comes after
	// fenced could know.
	planner, lerr := h.Leader(h.ctx)
	require.NoError(t, lerr)
	// An unprotected node's plan exits 1 after printing it.
	planOut, _ := h.CLI(planner, "plan", victim, "--cluster", ClusterName, "-o", "json")
	var plan stonith.NodePlan
	require.NoError(t, json.NewDecoder(strings.NewReader(planOut)).Decode(&plan), planOut)
	if slices.ContainsFunc(plan.Gaps, func(g stonith.VolumeGap) bool { return g.Volume == vf.PV || g.Volume == vs.PV }) {
		h.wait(waitFence, victim+" named unprotected before the failure", func() (bool, string) {
			st, err := leaderStatus(h)
			if err != nil {
				return false, err.Error()
			}
			if c := clusterStatus(st); c != nil {
				for _, u := range c.Unprotected {
					if u.Name == victim {
						return true, ""
					}
				}
			}
			return false, "not listed yet"
		})
	}

	killed := time.Now()
	h.KillNode(victim)

	// fenced either named the node unprotected for one of these volumes
	// before the failure, or fences it.
	var fence *status.Fence
	var gap *status.UnprotectedNode
	h.wait(waitFence, "a fence of "+victim+" evicted, or "+victim+" unprotected for its NFS volumes", func() (bool, string) {
		st, err := leaderStatus(h)
		if err != nil {
			return false, err.Error()
		}
		for _, f := range st.Fences {
			if f.Node == victim && f.Cluster == ClusterName && f.Phase == "evicted" {
				fence = &f
				return true, ""
			}
		}
		if c := clusterStatus(st); c != nil {
			for _, u := range c.Unprotected {
				if u.Name == victim && slices.ContainsFunc(u.Gaps, func(g status.Gap) bool { return g.Volume == vf.PV || g.Volume == vs.PV }) {
					gap = &u
					return true, ""
				}
			}
		}
		return false, fmt.Sprintf("%d fences", len(st.Fences))
	})

	if gap != nil {
		t.Logf("%s named unprotected since %s: %+v", victim, gap.Since, gap.Gaps)
		assert.True(t, gap.Since.Before(killed), "the node was named unprotected only after it failed (%s, killed %s)", gap.Since, killed)
		holdNoFence(t, h, 20*time.Second, []string{victim}, func(st *status.Status) (bool, string) {
			if c := clusterStatus(st); c != nil {
				for _, u := range c.Unprotected {
					if u.Name == victim {
						return true, ""
					}
				}
			}
			return false, "the node is no longer listed unprotected"
		})
		assert.False(t, hasTaint(t, h, victim, outOfService), "an unprotected node was tainted")
		h.Check()
		return
	}

	requireVerified(t, h, *fence)
	movedFlex, movedStore := waitMoved(t, h, flexPod), waitMoved(t, h, storePod)
	waitVA(t, h, vf, movedFlex.Spec.NodeName)
	waitVA(t, h, vs, movedStore.Spec.NodeName)
	requireVAGone(t, h, vf, victim)
	requireVAGone(t, h, vs, victim)

	// Whatever the order of the publish to the new node and the
	// victim's unpublish was, the PowerFlex file system is now published
	// again from an export that lists no node: the StatefulSet is scaled
	// to zero (the unpublish strips every node of the map) and back to
	// one. The driver's publish lists every node of the map, the victim's
	// IP among them.
	// The scale-down detaches the volume from a healthy node: an
	// operator's doing, as a drain is, not a fence's.
	drained := ClusterName + "/" + movedFlex.Spec.NodeName
	h.Timeline.Record(invariants.DrainStart, drained)
	scale(t, h, "db", "flexrwx", 0)
	h.wait(waitRecovery, "the PowerFlex export empty", func() (bool, string) {
		got := exportedTo(t, h, vf)
		return len(got) == 0, fmt.Sprintf("exported to %v", got)
	})
	h.Timeline.Record(invariants.DrainEnd, drained)
	republished := time.Now()
	scale(t, h, "db", "flexrwx", 1)
	h.wait(waitRecovery, "the PowerFlex volume attached again", func() (bool, string) {
		vas, err := h.CP.Client.StorageV1().VolumeAttachments().List(h.ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, va := range vas.Items {
			if va.Spec.Source.PersistentVolumeName != nil && *va.Spec.Source.PersistentVolumeName == vf.PV && va.Status.Attached {
				return true, ""
			}
		}
		return false, "not attached"
	})
	regranted := false
	for _, e := range h.Arrays[flexArray].Server.Audit() {
		if e.Changed && csidriver.IsDriverRequest(e.Remote) && !e.Time.Before(republished) &&
			strings.Contains(e.Body, "add_read_write_root_hosts") && strings.Contains(e.Body, victimIP+"/") {
			regranted = true
		}
	}
	require.True(t, regranted, "the publish did not list %s on the PowerFlex export: the scenario did not happen", victimIP)

	// fenced finds it, cuts it again and reads it back.
	back := waitRegressionCut(h, fence.ID, flexArray, func() bool {
		return slices.Contains(exportedTo(t, h, vf), victimFlexID) || slices.Contains(exportedTo(t, h, vs), victimStoreID)
	})
	requireVerified(t, h, back)
	t.Logf("fence %s: %d regressions, last %q", back.ID, back.Regressions, back.LastRegression)

	// The metric and the Event agree with /status: every array a
	// regression named is counted and in an Event on the node.
	leader := h.WaitLeader(waitLeader)
	metrics := scrapeMetrics(t, h.Replicas[leader].client, h.Replicas[leader].HTTPURL)
	total := metricSum(metrics, "fenced_fence_regressions_total", `cluster="`+ClusterName+`"`)
	// A regression is counted once per array it was found on; one found
	// again unchanged while still being cut is not counted again.
	assert.LessOrEqual(t, total, float64(back.Regressions*len(h.Arrays)), "more regressions counted than /status shows")
	requireRegressionReported(t, h, metrics, victim, back.ID, flexArray)

	// The cut holds: further reconcile passes leave the victim off both
	// exports, and the pods' new nodes on them.
	after := h.CP.AttacherReconcilePasses() + 3
	h.wait(waitFence, "three more reconcile passes", func() (bool, string) {
		return h.CP.AttacherReconcilePasses() >= after, ""
	})
	assert.NotContains(t, exportedTo(t, h, vf), victimFlexID)
	assert.NotContains(t, exportedTo(t, h, vs), victimStoreID)
	assert.Contains(t, exportedTo(t, h, vs), csiNodeID(t, h, movedStore.Spec.NodeName, testbed.DriverPowerStore))

	rep := h.Check()
	require.Positive(t, rep.Checked[invariants.RuleHeld])
}

// TestFenceHeldAgainstRepublish: a node N dies holding an RWX NFS volume of
// csi-powerstore, is fenced and its pod moves. Then the volume is published
// to N again, as the external-attacher's ReconcileVA does for an attached
// VolumeAttachment of N that the driver's ListVolumes does not show (with
// the health monitor on csi-powerstore reports NFS volumes with no
// published nodes; external-attacher pkg/controller/csi_handler.go): the
// driver's own publish call, through the emulated controller, puts N's IP
// back on the export. fenced finds it within one held period, cuts it and
// reads it back; /status, fenced_fence_regressions_total and a
// FenceRegressed Event agree, and the checker's held rule holds.
func TestFenceHeldAgainstRepublish(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts a control plane and three fenced processes")
	}
	timing := fastTiming()
	timing.HeldPeriod = heldPeriod
	h := Start(t, Options{Timing: timing, NodeLeaseDurationSeconds: 4})
	h.WaitLeader(waitLeader)
	nodes := h.NodesOf(ClusterName)
	victim := nodes[0]
	store, storeArray := driverOf[*csidriver.PowerStore](t, h, "powerstore")

	for _, n := range nodes[1:] {
		cordon(t, h, n, true)
	}
	pod := deployWith(t, h, testbed.StatefulSetSpec{Namespace: "db", Name: "storerwx", Driver: testbed.DriverPowerStore,
		Replicas: 1, NFS: true, ReadWriteMany: true})[victim]
	for _, n := range nodes[1:] {
		cordon(t, h, n, false)
	}
	require.Equal(t, victim, pod.Spec.NodeName)
	v := volumeOf(t, h, pod)
	victimID := csiNodeID(t, h, victim, testbed.DriverPowerStore)
	require.Equal(t, []string{victimID}, exportedTo(t, h, v))

	h.KillNode(victim)
	fence := h.WaitFence(victim, waitFence, "evicted")
	requireVerified(t, h, fence)
	moved := waitMoved(t, h, pod)
	waitVA(t, h, v, moved.Spec.NodeName)
	require.NotContains(t, exportedTo(t, h, v), victimID)

	// The driver publishes the volume to the fenced node again.
	republished := time.Now()
	require.NoError(t, store.ControllerPublish(h.ctx, v.Handle, victimID, true))
	require.Contains(t, exportedTo(t, h, v), victimID, "the publish did not give the victim access: the scenario did not happen")

	back := waitRegressionCut(h, fence.ID, storeArray, func() bool { return slices.Contains(exportedTo(t, h, v), victimID) })
	requireVerified(t, h, back)
	t.Logf("fence %s: %d regressions %s after the republish, last %q", back.ID, back.Regressions,
		time.Since(republished).Round(time.Millisecond), back.LastRegression)
	assert.Contains(t, exportedTo(t, h, v), csiNodeID(t, h, moved.Spec.NodeName, testbed.DriverPowerStore),
		"the pod's new node keeps its access")

	leader := h.WaitLeader(waitLeader)
	metrics := scrapeMetrics(t, h.Replicas[leader].client, h.Replicas[leader].HTTPURL)
	requireRegressionReported(t, h, metrics, victim, back.ID, storeArray)
	rep := h.Check()
	require.Positive(t, rep.Checked[invariants.RuleHeld])
}

// waitRegressionCut waits until a held check found the fence's node's
// access again on array, cut it and read it back: stillListed says the
// node is still on an array's export, the fence is evicted again with a
// regression naming the array.
func waitRegressionCut(h *Harness, fenceID, array string, stillListed func() bool) status.Fence {
	var back status.Fence
	h.wait(waitRecovery, "the regained access cut and read back", func() (bool, string) {
		if stillListed() {
			return false, "the victim is still listed on an export"
		}
		fences, err := h.Fences(h.ctx)
		if err != nil {
			return false, err.Error()
		}
		for _, f := range fences {
			if f.ID == fenceID {
				back = f
				return f.Regressions >= 1 && f.Phase == "evicted" && strings.Contains(f.LastRegression, array),
					fmt.Sprintf("phase %s, %d regressions, last %q", f.Phase, f.Regressions, f.LastRegression)
			}
		}
		return false, "fence " + fenceID + " not listed"
	})
	return back
}

// requireRegressionReported checks that the metric and an Event agree with
// /status on a regression of the fence on array: counted in
// fenced_fence_regressions_total (volume access) and a Warning
// FenceRegressed Event on the victim naming the fence and the array.
func requireRegressionReported(t *testing.T, h *Harness, metrics, victim, fenceID, array string) {
	assert.GreaterOrEqual(t, metricSum(metrics, "fenced_fence_regressions_total", `cluster="`+ClusterName+`"`,
		`array="`+array+`"`, `reason="volume-access"`), 1.0, "fenced_fence_regressions_total:\n%s", metrics)
	h.wait(waitFence, "a FenceRegressed Event on "+victim+" naming "+array, func() (bool, string) {
		evs, err := h.CP.Client.CoreV1().Events("").List(h.ctx, metav1.ListOptions{FieldSelector: "reason=FenceRegressed"})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range evs.Items {
			if e.InvolvedObject.Name == victim && e.Type == "Warning" && strings.Contains(e.Message, fenceID) &&
				strings.Contains(e.Message, array) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events", len(evs.Items))
	})
}
