package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fenced-project/fenced/cmd/fenced/status"
	"github.com/fenced-project/fenced/tests/invariants"
	"github.com/fenced-project/fenced/tests/testbed"
)

// cordon marks a node (un)schedulable.
func cordon(t *testing.T, h *Harness, node string, on bool) {
	t.Helper()
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"unschedulable": on}})
	require.NoError(t, err)
	_, err = h.CP.Client.CoreV1().Nodes().Patch(h.ctx, node, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err)
}

// waitMoved waits until the pod named like old runs again on another node
// and returns it.
func waitMoved(t *testing.T, h *Harness, old corev1.Pod) corev1.Pod {
	t.Helper()
	var p *corev1.Pod
	h.wait(waitRecovery, "pod "+old.Name+" running elsewhere", func() (bool, string) {
		var err error
		p, err = h.CP.Client.CoreV1().Pods(old.Namespace).Get(h.ctx, old.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		ok := p.UID != old.UID && p.Spec.NodeName != "" && p.Spec.NodeName != old.Spec.NodeName && p.Status.Phase == corev1.PodRunning
		return ok, fmt.Sprintf("uid %s on %q phase %s", p.UID, p.Spec.NodeName, p.Status.Phase)
	})
	return *p
}

// TestUnfenceNeverRegrantsMovedVolumes (invariant 5): a node dies with a
// volume of each Dell family (PowerFlex, PowerStore, Unity, PowerMax,
// PowerScale); fenced cuts them, the pods move and the emulated drivers
// publish the volumes to their new nodes. The old node reboots and is
// unfenced: the arrays give each moved volume only to its new node. Each
// pod is then moved back to the old node, and the drivers' publish to it
// succeeds (a re-grant would have made the array refuse it: "already
// published").
func TestUnfenceNeverRegrantsMovedVolumes(t *testing.T) {
	moveAndReturn(t, []setOf{
		{"flex", testbed.DriverPowerFlex, false}, {"store", testbed.DriverPowerStore, false}, {"unity", testbed.DriverUnity, false},
		{"pmax", testbed.DriverPowerMax, false}, {"scale", testbed.DriverPowerScale, false},
	})
}

// setOf names a StatefulSet of moveAndReturn: its name, its volumes'
// driver, and whether they are NFS file systems.
type setOf struct {
	name, driver string
	nfs          bool
}

// moveAndReturn deploys a StatefulSet per entry of sets with a pod on
// every node but a spare one, kills a node running a pod of each, and
// checks that fenced cut every volume and read it back before the
// eviction; that the pods move and their volumes are given only to the
// new nodes, also after the old node rebooted and was unfenced; and that
// each pod, moved back to the old node, gets its volume there (the
// drivers' publish succeeds: nothing was re-granted). The invariant
// checker then runs over the whole scenario.
func moveAndReturn(t *testing.T, sets []setOf) {
	t.Helper()
	h := startFast(t)
	h.WaitLeader(waitLeader)
	nodes := h.NodesOf(ClusterName)
	// Every StatefulSet is deployed while one node is cordoned, so that
	// the others each run a pod of all of them and the spare node can
	// take the victim's pods (anti-affinity).
	spare := nodes[len(nodes)-1]
	cordon(t, h, spare, true)
	var pods []map[string]corev1.Pod
	for _, d := range sets {
		pods = append(pods, deployWith(t, h, testbed.StatefulSetSpec{Namespace: "db", Name: d.name, Driver: d.driver,
			Replicas: int32(len(nodes) - 1), AntiAffinity: true, NFS: d.nfs}))
	}
	cordon(t, h, spare, false)
	victim := withPods(pods[0], 1)[0]
	var olds []corev1.Pod
	for _, set := range pods {
		p, ok := set[victim]
		require.True(t, ok, "node %s runs no pod of a StatefulSet", victim)
		olds = append(olds, p)
	}
	var vols []podVolume
	for _, p := range olds {
		v := volumeOf(t, h, p)
		requireGivenOnlyTo(t, h, v, victim)
		vols = append(vols, v)
	}

	h.KillNode(victim)
	f := h.WaitFence(victim, waitFence, phasesEvicted...)
	requireVerified(t, h, f)
	moved := make([]corev1.Pod, len(olds))
	for i, p := range olds {
		moved[i] = waitMoved(t, h, p)
		waitVA(t, h, vols[i], moved[i].Spec.NodeName)
		requireGivenOnlyTo(t, h, vols[i], moved[i].Spec.NodeName)
	}

	h.RebootNode(victim)
	h.WaitFence(victim, waitRecovery, phasesClosed...)
	for i := range vols {
		requireGivenOnlyTo(t, h, vols[i], moved[i].Spec.NodeName)
	}

	// Move each pod back to the rebooted node: every other node cordoned
	// and drained of the pods moved.
	for _, n := range h.NodesOf(ClusterName) {
		if n != victim {
			cordon(t, h, n, true)
		}
	}
	for _, p := range moved {
		h.Timeline.Record(invariants.DrainStart, ClusterName+"/"+p.Spec.NodeName)
	}
	for i, p := range moved {
		require.NoError(t, h.CP.Client.CoreV1().Pods(p.Namespace).Delete(h.ctx, p.Name, metav1.DeleteOptions{}))
		back := waitMoved(t, h, p)
		require.Equal(t, victim, back.Spec.NodeName)
		waitVA(t, h, vols[i], victim)
		requireGivenOnlyTo(t, h, vols[i], victim)
	}
	for _, n := range h.NodesOf(ClusterName) {
		cordon(t, h, n, false)
	}
	for _, p := range moved {
		h.Timeline.Record(invariants.DrainEnd, ClusterName+"/"+p.Spec.NodeName)
	}
	rep := h.Check()
	require.Positive(t, rep.Checked[invariants.RuleNoRegrant])
	require.Positive(t, rep.Checked[invariants.RuleFootprintCovered])
}

// TestUncoveredVolumeBlocksEviction (invariant 7): a node uses a volume on
// an array no configuration names (a site that forgot one). Healthy, it is
// reported unprotected in /status, the metric, an Event and the log; when
// it dies it is not fenced, tainted or evicted.
func TestUncoveredVolumeBlocksEviction(t *testing.T) {
	h := startFast(t)
	h.WaitLeader(waitLeader)
	victim := h.NodesOf(ClusterName)[0]
	// PowerMax volumes on an array fenced is not configured for: the
	// handle names symmetrix 000197900123, the fixture's array is another.
	// No emulated driver publishes them (the harness' csi-powermax serves
	// the fixture's array only); the attacher marks them attached.
	h.CP.CSIControllers().Unregister(testbed.DriverPowerMax)
	h.CP.AttachWithoutController(true)
	handle, err := testbed.VolumeHandle(testbed.DriverPowerMax, 0)
	require.NoError(t, err)
	pods := deployWith(t, h, testbed.StatefulSetSpec{Namespace: "db", Name: "far", Driver: testbed.DriverPowerMax,
		Replicas: 1, VolumeHandles: []string{handle}, NodeSelector: map[string]string{corev1.LabelHostname: victim}})
	pv := volumeOf(t, h, pods[victim]).PV

	gapOf := func(st *status.Status) (status.Gap, bool) {
		if c := clusterStatus(st); c != nil {
			for _, u := range c.Unprotected {
				if u.Name == victim {
					for _, g := range u.Gaps {
						if g.Volume == pv {
							return g, true
						}
					}
				}
			}
		}
		return status.Gap{}, false
	}
	var gap status.Gap
	h.wait(waitFence, "node "+victim+" reported unprotected", func() (bool, string) {
		st, err := leaderStatus(h)
		if err != nil {
			return false, err.Error()
		}
		g, ok := gapOf(st)
		gap = g
		return ok, "not listed"
	})
	assert.Equal(t, "array-not-configured", gap.Reason)
	assert.Contains(t, gap.Detail, "000197900123")

	leader := h.WaitLeader(waitLeader)
	metrics := scrapeMetrics(t, h.Replicas[leader].client, h.Replicas[leader].HTTPURL)
	assert.Contains(t, metrics, `fenced_nodes_unprotected{cluster="`+ClusterName+`",reason="array-not-configured"} 1`)
	h.wait(waitFence, "a FenceUnprotected Event on "+victim, func() (bool, string) {
		evs, err := h.CP.Client.CoreV1().Events("").List(h.ctx, metav1.ListOptions{FieldSelector: "reason=FenceUnprotected"})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range evs.Items {
			if e.InvolvedObject.Name == victim && strings.Contains(e.Message, pv) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events", len(evs.Items))
	})
	logs, err := os.ReadFile(h.Replicas[leader].LogPath)
	require.NoError(t, err)
	assert.Contains(t, string(logs), "node is unprotected")
	assert.Contains(t, string(logs), pv)

	h.KillNode(victim)
	holdNoFence(t, h, 20*time.Second, []string{victim}, func(st *status.Status) (bool, string) {
		_, ok := gapOf(st)
		return ok, "the node is no longer listed unprotected"
	})
	assert.False(t, hasTaint(t, h, victim, outOfService), "an unprotected node was tainted")
	p, err := h.CP.Client.CoreV1().Pods("db").Get(h.ctx, pods[victim].Name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, pods[victim].UID, p.UID, "the pod of an unprotected node was deleted")
	h.Check()
}

// scrapeMetrics reads a replica's /metrics in the text format.
func scrapeMetrics(t *testing.T, hc *http.Client, base string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	require.NoError(t, err)
	resp, err := hc.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	require.NoError(t, err)
	return string(b)
}

// brokenBuild builds fenced with a tag that breaks it on purpose and makes
// the harness run it.
func brokenBuild(t *testing.T, tag string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	bin, err := BuildFenced(ctx, t.TempDir(), tag)
	require.NoError(t, err)
	t.Setenv(BinaryEnv, bin)
}

// TestCheckerCatchesSkippedVolumes runs a fenced built to see no volume of
// any node (fenced_broken_skip_volumes: the silent skip of issue-era
// fenced) through TestOneNodeDies's scenario, and requires the checker's
// footprint-covered rule to report the fence that left the node's
// VolumeAttachments out.
func TestCheckerCatchesSkippedVolumes(t *testing.T) {
	brokenBuild(t, "fenced_broken_skip_volumes")
	h, pods, victim, _ := killOneNode(t)
	waitReplaced(t, h, pods[victim])
	in, opts, err := h.Inputs()
	require.NoError(t, err)
	rep := invariants.Check(in, opts)
	t.Logf("invariants of the broken build: %s", rep)
	v := rep.ByRule(invariants.RuleFootprintCovered)
	require.NotEmpty(t, v, "the checker missed a fence without the node's volumes")
	assert.Contains(t, v[0].Message, "was not in its footprint")
}

// TestCheckerCatchesRegrant runs a fenced built to replay every removal on
// unfence, with multiple mappings allowed (fenced_broken_regrant: what
// unfence did before footprints), through TestRebootUnfence's scenario, and
// requires the checker's no-regrant rule to report the moved volume given
// back to the rebooted node.
func TestCheckerCatchesRegrant(t *testing.T) {
	brokenBuild(t, "fenced_broken_regrant")
	h, pods, victim, _ := killOneNode(t)
	moved := waitMoved(t, h, pods[victim])
	v := volumeOf(t, h, pods[victim])
	waitVA(t, h, v, moved.Spec.NodeName)
	h.RebootNode(victim)
	h.WaitFence(victim, waitRecovery, phasesClosed...)
	holders, _ := givenTo(t, h, v, victim)
	assert.Len(t, holders, 2, "the broken build should have mapped %s to both nodes", v.PV)
	in, opts, err := h.Inputs()
	require.NoError(t, err)
	rep := invariants.Check(in, opts)
	t.Logf("invariants of the broken build: %s", rep)
	got := rep.ByRule(invariants.RuleNoRegrant)
	require.NotEmpty(t, got, "the checker missed a moved volume given back")
	assert.Contains(t, got[0].Message, v.PV)
}
