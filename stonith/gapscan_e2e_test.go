package stonith_test

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/detector"
	"github.com/fenced-project/fenced/stonith"
	"github.com/fenced-project/fenced/tests/arraysim/powerflex"
	"github.com/fenced-project/fenced/tests/csidriver"
	"github.com/fenced-project/fenced/tests/testbed"
)

// TestArrayReadGapsShowWhileHealthy (PRODUCT.md invariant 7): the gaps
// only an array read finds — a PowerFlex volume mapped to another SDC, a
// Unity LUN granted to another host but not the node's, a volume its
// array does not have — are shown while every node is healthy: in
// /status, in fenced_nodes_unprotected, in a FenceUnprotected Event and
// in `fenced plan` alike, from the leader's periodic plans. Once fixed on
// the arrays and in Kubernetes, the nodes are shown protected again.
func TestArrayReadGapsShowWhileHealthy(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane, three array simulators and a Raft group")
	}
	b := startBed(t, 3)
	ctx := t.Context()
	b.learn()
	for _, s := range []testbed.StatefulSetSpec{
		{Namespace: "app", Name: "flex", Replicas: 1, Driver: testbed.DriverPowerFlex},
		{Namespace: "app", Name: "lun", Replicas: 1, Driver: testbed.DriverUnity},
	} {
		_, err := b.cp.CreateStatefulSet(ctx, s)
		require.NoError(t, err)
	}
	pods := waitPods(t, b, "flex-0", "lun-0")
	waitAttachedAll(t, b)

	p := b.startPipelineWith(false, nil, func(cfg *stonith.Config) { cfg.Clusters[0].GapScanPeriod = time.Second })
	require.Eventually(t, func() bool { return p.runner.Status().Counts[detector.Healthy] == 3 },
		time.Minute, 100*time.Millisecond, "detector never saw the three nodes healthy")
	for _, pod := range pods {
		plan, err := p.ctrl.PlanNode(ctx, stonith.PlanRequest{Cluster: clusterName, Node: pod.Spec.NodeName})
		require.NoError(t, err)
		require.True(t, plan.Protected, "%s before any change: %+v", pod.Spec.NodeName, plan.Gaps)
	}
	require.Empty(t, p.ctrl.Status().Unprotected)

	// Each volume is taken from its node and given to another, as a
	// driver's controller would: the VolumeAttachment still names the node.
	moved := map[string]string{} // pod -> node holding its volume now
	for _, name := range []string{"flex-0", "lun-0"} {
		pod := pods[name]
		node, other := pod.Spec.NodeName, otherNode(b, pod.Spec.NodeName)
		drv, handle := podVolume(t, b, pod)
		c, ok := b.cp.CSIControllers().Lookup(drv)
		require.True(t, ok, drv)
		require.NoError(t, c.ControllerUnpublish(ctx, handle, csiNodeID(t, b, node, drv)))
		require.NoError(t, c.ControllerPublish(ctx, handle, csiNodeID(t, b, other, drv), false))
		moved[name] = other
	}
	// A volume pflex-1 does not have: the attach never succeeds, but the
	// node's footprint holds it from the VolumeAttachment on.
	goneNode := pods["flex-0"].Spec.NodeName
	_, err := b.cp.CreateStatefulSet(ctx, testbed.StatefulSetSpec{Namespace: "app", Name: "gone", Replicas: 1,
		Driver: testbed.DriverPowerFlex, VolumeHandles: []string{"1a2b3c4d5e6f7a8b-00000000deadbeef"},
		NodeSelector: map[string]string{corev1.LabelHostname: goneNode}})
	require.NoError(t, err)

	type gapAt struct{ node, pv, array, reason string }
	want := []gapAt{
		{pods["flex-0"].Spec.NodeName, pvOf(t, b, pods["flex-0"]), "pflex-1", "other-identity"},
		{pods["lun-0"].Spec.NodeName, pvOf(t, b, pods["lun-0"]), "unity-1", "other-identity"},
		{goneNode, testbed.PVName("app", "gone", 0), "pflex-1", "volume-not-found"},
	}
	statusGaps := func() []gapAt {
		var out []gapAt
		for _, u := range p.ctrl.Status().Unprotected {
			for _, g := range u.Gaps {
				out = append(out, gapAt{u.Node, g.Volume, g.Array, string(g.Reason)})
			}
		}
		return out
	}
	require.Eventually(t, func() bool {
		got := statusGaps()
		return len(got) == len(want) && !slices.ContainsFunc(want, func(g gapAt) bool { return !slices.Contains(got, g) })
	}, time.Minute, 200*time.Millisecond, "the array-read gaps never all reached /status (want %v)", want)
	assert.Len(t, statusGaps(), len(want), "status gaps: %v", statusGaps())

	// The metric counts the nodes with a gap of each reason.
	nodesWith := func(reason string) float64 {
		nodes := map[string]bool{}
		for _, g := range want {
			if g.reason == reason {
				nodes[g.node] = true
			}
		}
		return float64(len(nodes))
	}
	for _, reason := range []string{"other-identity", "volume-not-found"} {
		assert.InDelta(t, nodesWith(reason), gauge(t, p, reason), 0, "fenced_nodes_unprotected{reason=%q}", reason)
	}
	// `fenced plan` names the same gaps.
	byNode := map[string][]gapAt{}
	for _, g := range want {
		byNode[g.node] = append(byNode[g.node], g)
	}
	for node, gaps := range byNode {
		plan, err := p.ctrl.PlanNode(ctx, stonith.PlanRequest{Cluster: clusterName, Node: node})
		require.NoError(t, err)
		assert.False(t, plan.Protected)
		var got []gapAt
		for _, g := range plan.Gaps {
			got = append(got, gapAt{node, g.Volume, g.Array, string(g.Reason)})
		}
		assert.ElementsMatch(t, gaps, got, "fenced plan of %s", node)
	}
	// An Event on each node names its volumes.
	for node, gaps := range byNode {
		require.Eventually(t, func() bool {
			list, err := b.cp.Client.CoreV1().Events("default").List(ctx, metav1.ListOptions{
				FieldSelector: "involvedObject.name=" + node + ",reason=FenceUnprotected"})
			if err != nil {
				return false
			}
			return slices.ContainsFunc(list.Items, func(e corev1.Event) bool {
				return !slices.ContainsFunc(gaps, func(g gapAt) bool { return !strings.Contains(e.Message, g.pv) })
			})
		}, 30*time.Second, 200*time.Millisecond, "no FenceUnprotected Event on %s naming %v", node, gaps)
	}

	// Fixed: the volumes go back to their nodes, the volume that does not
	// exist is no longer used.
	for _, name := range []string{"flex-0", "lun-0"} {
		pod := pods[name]
		drv, handle := podVolume(t, b, pod)
		c, _ := b.cp.CSIControllers().Lookup(drv)
		require.NoError(t, c.ControllerUnpublish(ctx, handle, csiNodeID(t, b, moved[name], drv)))
		require.NoError(t, c.ControllerPublish(ctx, handle, csiNodeID(t, b, pod.Spec.NodeName, drv), false))
	}
	require.NoError(t, b.cp.Client.AppsV1().StatefulSets("app").Delete(ctx, "gone", metav1.DeleteOptions{}))
	zero := int64(0)
	err = b.cp.Client.CoreV1().Pods("app").Delete(ctx, "gone-0", metav1.DeleteOptions{GracePeriodSeconds: &zero})
	if err != nil && !apierrors.IsNotFound(err) {
		require.NoError(t, err)
	}
	// The attach never succeeded, so the attach/detach controller has
	// nothing to detach and leaves the VolumeAttachment: remove it as an
	// operator would.
	require.Eventually(t, func() bool {
		vas, err := b.cp.Client.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		left := false
		for _, va := range vas.Items {
			if pv := va.Spec.Source.PersistentVolumeName; pv != nil && *pv == testbed.PVName("app", "gone", 0) {
				left = true
				_ = b.cp.Client.StorageV1().VolumeAttachments().Delete(ctx, va.Name, metav1.DeleteOptions{})
			}
		}
		return !left
	}, time.Minute, 200*time.Millisecond, "the VolumeAttachment of the missing volume stays")
	if !assert.Eventually(t, func() bool { return len(p.ctrl.Status().Unprotected) == 0 },
		2*time.Minute, 200*time.Millisecond) {
		t.Fatalf("nodes still unprotected after the fix: %v", statusGaps())
	}
	for _, reason := range []string{"other-identity", "volume-not-found"} {
		// The gauge follows /status right after (updateUnprotectedGauge).
		assert.Eventually(t, func() bool { return gauge(t, p, reason) == 0 }, 10*time.Second, 50*time.Millisecond,
			"fenced_nodes_unprotected{reason=%q} after the fix", reason)
	}
	for node := range byNode {
		plan, err := p.ctrl.PlanNode(ctx, stonith.PlanRequest{Cluster: clusterName, Node: node})
		require.NoError(t, err)
		assert.True(t, plan.Protected, "%s after the fix: %+v", node, plan.Gaps)
	}
}

// waitPods waits until the named pods of namespace app run and returns
// them by name.
func waitPods(t *testing.T, b *bed, names ...string) map[string]corev1.Pod {
	t.Helper()
	out := map[string]corev1.Pod{}
	require.Eventually(t, func() bool {
		for _, n := range names {
			p, err := b.cp.Client.CoreV1().Pods("app").Get(t.Context(), n, metav1.GetOptions{})
			if err != nil || p.Status.Phase != corev1.PodRunning || p.Spec.NodeName == "" {
				return false
			}
			out[n] = *p
		}
		return true
	}, 2*time.Minute, 200*time.Millisecond, "pods %v not running", names)
	return out
}

// otherNode returns a node of the bed other than node.
func otherNode(b *bed, node string) string {
	for _, n := range slices.Sorted(maps.Keys(b.nodes)) {
		if n != node {
			return n
		}
	}
	return ""
}

// pvOf returns the name of the pod's PersistentVolume.
func pvOf(t *testing.T, b *bed, pod corev1.Pod) string {
	t.Helper()
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			c, err := b.cp.Client.CoreV1().PersistentVolumeClaims(pod.Namespace).Get(t.Context(), v.PersistentVolumeClaim.ClaimName, metav1.GetOptions{})
			require.NoError(t, err)
			return c.Spec.VolumeName
		}
	}
	t.Fatalf("pod %s has no claim", pod.Name)
	return ""
}

// podVolume returns the CSI driver and handle of the pod's volume.
func podVolume(t *testing.T, b *bed, pod corev1.Pod) (driver, handle string) {
	t.Helper()
	pv, err := b.cp.Client.CoreV1().PersistentVolumes().Get(t.Context(), pvOf(t, b, pod), metav1.GetOptions{})
	require.NoError(t, err)
	require.NotNil(t, pv.Spec.CSI)
	return pv.Spec.CSI.Driver, pv.Spec.CSI.VolumeHandle
}

// csiNodeID returns the node's ID for the driver, as its CSINode reports it.
func csiNodeID(t *testing.T, b *bed, node, driver string) string {
	t.Helper()
	cn, err := b.cp.Client.StorageV1().CSINodes().Get(t.Context(), node, metav1.GetOptions{})
	require.NoError(t, err)
	for _, d := range cn.Spec.Drivers {
		if d.Name == driver {
			return d.NodeID
		}
	}
	t.Fatalf("node %s has no %s node ID", node, driver)
	return ""
}

// gauge reads fenced_nodes_unprotected of the bed's cluster and a reason.
func gauge(t *testing.T, p *pipeline, reason string) float64 {
	t.Helper()
	mfs, err := p.reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "fenced_nodes_unprotected" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["cluster"] == clusterName && labels["reason"] == reason {
				return m.GetGauge().GetValue()
			}
		}
	}
	t.Fatalf("no fenced_nodes_unprotected series for reason %s", reason)
	return 0
}

// TestDriverRegrantShowsWhileHealthy: csi-vxflexos with interfaceNames
// (the emulated driver given every node's IP) publishes an NFS volume to
// one node and lists every node's IP on the export. While the node is
// healthy, the leader's plan names it unprotected with driver-regrant (a
// fence would be undone by the next publish anywhere), in /status, the
// metric, an Event and `fenced plan`. With the driver publishing the
// node's own IPs only, it is protected again.
func TestDriverRegrantShowsWhileHealthy(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane, three array simulators and a Raft group")
	}
	b := startBed(t, 3)
	ctx := t.Context()
	b.learn()
	s := b.sims["pflex-1"]
	sim, ok := s.srv.Family().(*powerflex.Sim)
	require.True(t, ok)
	ips := map[string]string{}
	for name, n := range b.nodes {
		ips[name] = n.Spec.IP
	}
	plain, ok := b.cp.CSIControllers().Lookup(testbed.DriverPowerFlex)
	require.True(t, ok)
	regrant, err := csidriver.NewPowerFlex(ctx, csidriver.PowerFlexConfig{Endpoint: s.cfg.Endpoint, CAFile: s.cfg.CAFile,
		Username: s.cfg.Username, Password: s.cfg.Password, SystemID: "1a2b3c4d5e6f7a8b", Version: sim.State().Version,
		InterfaceIPs: ips})
	require.NoError(t, err)
	b.cp.RegisterCSIController(regrant)
	_, err = b.cp.CreateStatefulSet(ctx, testbed.StatefulSetSpec{Namespace: "app", Name: "files", Replicas: 1,
		Driver: testbed.DriverPowerFlex, NFS: true})
	require.NoError(t, err)
	pod := waitPods(t, b, "files-0")["files-0"]
	waitAttachedAll(t, b)
	node, pv := pod.Spec.NodeName, pvOf(t, b, pod)

	p := b.startPipelineWith(false, nil, func(cfg *stonith.Config) { cfg.Clusters[0].GapScanPeriod = time.Second })
	var gap stonith.VolumeGap
	require.Eventually(t, func() bool {
		for _, u := range p.ctrl.Status().Unprotected {
			for _, g := range u.Gaps {
				if u.Node == node && g.Volume == pv {
					gap = g
					return true
				}
			}
		}
		return false
	}, time.Minute, 200*time.Millisecond, "%s never reported unprotected for %s", node, pv)
	assert.Equal(t, arrayclients.GapDriverRegrant, gap.Reason)
	assert.Equal(t, "pflex-1", gap.Array)
	for other := range b.nodes {
		if other != node {
			assert.Contains(t, gap.Detail, "(node "+other+")")
		}
	}
	assert.InDelta(t, 1.0, gauge(t, p, string(arrayclients.GapDriverRegrant)), 0)
	plan, err := p.ctrl.PlanNode(ctx, stonith.PlanRequest{Cluster: clusterName, Node: node})
	require.NoError(t, err)
	assert.False(t, plan.Protected)
	assert.Contains(t, plan.Gaps, gap)
	require.Eventually(t, func() bool {
		list, err := b.cp.Client.CoreV1().Events("default").List(ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.name=" + node + ",reason=FenceUnprotected"})
		return err == nil && slices.ContainsFunc(list.Items, func(e corev1.Event) bool {
			return strings.Contains(e.Message, pv) && strings.Contains(e.Message, "driver-regrant")
		})
	}, 30*time.Second, 200*time.Millisecond, "no FenceUnprotected Event on %s naming %s", node, pv)

	// The driver without interfaceNames: the volume published again lists
	// the node's own IPs only.
	_, handle := podVolume(t, b, pod)
	require.NoError(t, regrant.ControllerUnpublish(ctx, handle, csiNodeID(t, b, node, testbed.DriverPowerFlex)))
	b.cp.RegisterCSIController(plain)
	require.NoError(t, plain.ControllerPublish(ctx, handle, csiNodeID(t, b, node, testbed.DriverPowerFlex), false))
	// /status changes first, the gauge right after it (updateUnprotectedGauge).
	require.Eventually(t, func() bool {
		return len(p.ctrl.Status().Unprotected) == 0 && gauge(t, p, string(arrayclients.GapDriverRegrant)) == 0
	}, time.Minute, 200*time.Millisecond, "%s still unprotected with the driver fixed", node)
}
