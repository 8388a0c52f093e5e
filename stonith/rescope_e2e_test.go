package stonith_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/cluster"
	"github.com/fenced-project/fenced/cluster/ledger"
	"github.com/fenced-project/fenced/detector"
	"github.com/fenced-project/fenced/tests/arraysim/simcore"
	"github.com/fenced-project/fenced/tests/testbed"
)

// TestUnfenceScopeRecomputedOnRetry (PRODUCT.md invariant 5): a fenced
// node holds two PowerFlex volumes its pods still use when it reboots.
// The first restore attempt fails on the array (the simulator refuses
// every mapping). Meanwhile one volume's pod is deleted and started on
// another node: its VolumeAttachment moves there, its attach waiting for
// the array too. The retry computes the scope again and records it before
// it writes, and gives back only the volume Kubernetes still wants on the
// node: both computed scopes are in the ledger, and the moved volume's
// mapping is never given back to the node, so its attach to the other
// node succeeds once the array accepts mappings again.
func TestUnfenceScopeRecomputedOnRetry(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane, three array simulators and a Raft group")
	}
	b := startBed(t, 3)
	b.runNewestLedger()
	ctx := t.Context()
	ids := b.learn()
	victim := slices.Sorted(func(yield func(string) bool) {
		for n := range b.nodes {
			if !yield(n) {
				return
			}
		}
	})[0]
	other := otherNode(b, victim)
	all := []corev1.Toleration{{Operator: corev1.TolerationOpExists}}

	// Two volumes used by pods on the victim that fenced does not delete
	// (no StatefulSet owns them, none is protected): made by a
	// StatefulSet, whose pods are then orphaned. They tolerate every
	// taint, so the fence's out-of-service taint does not evict them.
	_, err := b.cp.CreateStatefulSet(ctx, testbed.StatefulSetSpec{Namespace: "app", Name: "keep", Replicas: 2,
		Driver: testbed.DriverPowerFlex, NodeSelector: map[string]string{corev1.LabelHostname: victim}, Tolerations: all})
	require.NoError(t, err)
	pods := waitPods(t, b, "keep-0", "keep-1")
	waitAttachedAll(t, b)
	orphan := metav1.DeletePropagationOrphan
	require.NoError(t, b.cp.Client.AppsV1().StatefulSets("app").Delete(ctx, "keep", metav1.DeleteOptions{PropagationPolicy: &orphan}))
	require.Eventually(t, func() bool {
		for _, name := range []string{"keep-0", "keep-1"} {
			p, err := b.cp.Client.CoreV1().Pods("app").Get(ctx, name, metav1.GetOptions{})
			if err != nil || len(p.OwnerReferences) > 0 {
				return false
			}
		}
		return true
	}, time.Minute, 200*time.Millisecond, "the pods were never orphaned")
	pvKeep, pvMove := pvOf(t, b, pods["keep-0"]), pvOf(t, b, pods["keep-1"])
	_, hKeep := podVolume(t, b, pods["keep-0"])
	_, hMove := podVolume(t, b, pods["keep-1"])
	volKeep, volMove := hKeep[strings.LastIndexByte(hKeep, '-')+1:], hMove[strings.LastIndexByte(hMove, '-')+1:]
	sdcVictim, sdcOther := ids[victim]["pflex-1"].ObjectID, ids[other]["pflex-1"].ObjectID
	pflex := b.sims["pflex-1"]
	mapped := func(vol string) []string {
		return kubeMappings(t, pflex.snapshot(t))[vol]
	}
	require.Equal(t, []string{sdcVictim}, mapped(volKeep))
	require.Equal(t, []string{sdcVictim}, mapped(volMove))

	p := b.startPipeline(false)
	require.Eventually(t, func() bool { return p.runner.Status().Counts[detector.Healthy] == 3 },
		time.Minute, 100*time.Millisecond, "detector never saw the three nodes healthy")

	require.NoError(t, b.nodes[victim].Kill(ctx))
	b.waitState(victim, ledger.StateEvicted, 2*time.Minute)
	f := b.fence(victim)
	require.ElementsMatch(t, []string{pvKeep, pvMove}, footprintPVs(f))
	assert.Empty(t, mapped(volKeep))
	assert.Empty(t, mapped(volMove))

	// The pods from before the fence are replaced on the node by new ones
	// using the same claims (new first, so the volumes stay wanted there):
	// an unfence waits for the old ones to be gone.
	replacement := func(name, claim, node string) {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "app"},
			Spec: corev1.PodSpec{NodeName: node, Tolerations: all,
				Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/keep:1",
					VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}},
				Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
					PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}},
			},
		}
		_, err := b.cp.Client.CoreV1().Pods("app").Create(ctx, pod, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	deletePod := func(name string) {
		zero := int64(0)
		err := b.cp.Client.CoreV1().Pods("app").Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		if !apierrors.IsNotFound(err) {
			require.NoError(t, err)
		}
		require.Eventually(t, func() bool {
			_, err := b.cp.Client.CoreV1().Pods("app").Get(ctx, name, metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}, time.Minute, 100*time.Millisecond, "pod %s never went", name)
	}
	replacement("keep-0-b", testbed.ClaimName("keep", 0), victim)
	replacement("keep-1-b", testbed.ClaimName("keep", 1), victim)
	deletePod("keep-0")
	deletePod("keep-1")

	// Every mapping fails on pflex-1 from now on, fenced's and the driver's.
	faultID := pflex.srv.AddFault(simcore.Fault{Kind: simcore.FaultError, Method: http.MethodPost, Path: "addMappedSdc",
		Status: http.StatusServiceUnavailable, Message: "injected: MDM busy"})
	seq := pflex.srv.LastSeq()
	_, err = b.nodes[victim].Reboot(ctx)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		f := b.fence(victim)
		if f == nil || f.State != ledger.StateUnfenceIntent {
			return false
		}
		for _, st := range p.ctrl.Status().Fences {
			if st.Node == victim && strings.Contains(st.Blocked, "pflex-1") {
				return true
			}
		}
		return false
	}, 2*time.Minute, 200*time.Millisecond, "the unfence of %s never reported blocked on pflex-1 (record %+v)", victim, b.fence(victim))
	f = b.fence(victim)
	require.Len(t, f.Scopes, 1, "%+v", f.Scopes)
	assert.Equal(t, map[string]arrayclients.RestoreScope{"pflex-1": {Wanted: sorted(pvKeep, pvMove)}}, f.Scopes[0].Restore)

	// One pod moves: its volume's attachment goes from the node to another.
	deletePod("keep-1-b")
	require.Eventually(t, func() bool {
		vas, err := b.cp.VolumeAttachmentsOfNode(ctx, victim)
		if err != nil {
			return false
		}
		return !slices.ContainsFunc(vas, func(va storagev1.VolumeAttachment) bool {
			return va.Spec.Source.PersistentVolumeName != nil && *va.Spec.Source.PersistentVolumeName == pvMove
		})
	}, 2*time.Minute, 200*time.Millisecond, "the attachment of %s to %s never went", pvMove, victim)
	replacement("keep-1-c", testbed.ClaimName("keep", 1), other)

	require.Eventually(t, func() bool {
		f := b.fence(victim)
		return f != nil && len(f.Scopes) >= 2
	}, 2*time.Minute, 200*time.Millisecond, "the retry never recorded a new scope (record %+v)", b.fence(victim))
	require.True(t, pflex.srv.RemoveFault(faultID))
	require.Eventually(t, func() bool {
		c := b.lastClosed(victim)
		return b.fence(victim) == nil && c != nil && c.State == ledger.StateClosed
	}, 2*time.Minute, 200*time.Millisecond, "the unfence of %s never closed (record %+v)", victim, b.fence(victim))
	require.Eventually(t, func() bool {
		return slices.Equal(mapped(volMove), []string{sdcOther})
	}, 2*time.Minute, 200*time.Millisecond, "%s never attached to %s (mapped to %v)", pvMove, other, mapped(volMove))

	closed := b.lastClosed(victim)
	require.Len(t, closed.Scopes, 2, "%+v", closed.Scopes)
	assert.Equal(t, map[string]arrayclients.RestoreScope{"pflex-1": {Wanted: sorted(pvKeep, pvMove)}}, closed.Scopes[0].Restore)
	assert.Equal(t, map[string]arrayclients.RestoreScope{"pflex-1": {Wanted: []string{pvKeep}}}, closed.Scopes[1].Restore)
	assert.Contains(t, closed.Scopes[1].Note, "no longer wanted on the node: "+pvMove+" (pflex-1)")
	assert.Equal(t, []string{sdcVictim}, mapped(volKeep), "the volume still wanted is given back")
	assert.Equal(t, []string{sdcOther}, mapped(volMove), "the volume that moved stays with its new node only")
	// From the reboot on, pflex-1 never mapped the moved volume to the node.
	var mappings int
	for _, e := range pflex.srv.AuditSince(seq) {
		if !strings.Contains(e.Path, "addMappedSdc") {
			continue
		}
		mappings++
		assert.False(t, strings.Contains(e.Path, volMove) && strings.Contains(e.Body, sdcVictim) && e.Status < 300,
			"the moved volume was mapped to %s again: %+v", victim, e)
	}
	assert.Positive(t, mappings, "the audit shows pflex-1's mappings")
}

// runNewestLedger has the bed's group run this build's newest ledger
// version, as the daemon's group does once every voter runs this build: it
// gives the replica a version probe (it has no other voter to ask) and
// waits for the version the leader then commits.
func (b *bed) runNewestLedger() {
	b.t.Helper()
	b.raft.SetVersionProbe(cluster.HTTPVersionProbe(http.DefaultClient))
	require.NoError(b.t, b.raft.SetPeers(b.raft.Peers())) // the leader checks its voters at once
	require.Eventually(b.t, func() bool { return b.raft.Ledger().Copy().GroupVersion() == ledger.Version },
		30*time.Second, 20*time.Millisecond, "the group never ran ledger version %d", ledger.Version)
}

// footprintPVs names a record's footprint volumes.
func footprintPVs(f *ledger.Fence) []string {
	var out []string
	for _, v := range f.Footprint {
		out = append(out, v.PV)
	}
	return out
}

// sorted returns its arguments in order.
func sorted(s ...string) []string {
	slices.Sort(s)
	return s
}
