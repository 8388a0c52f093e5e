package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fenced-project/fenced/tests/invariants"
	"github.com/fenced-project/fenced/tests/testbed"
)

// Bounds of the scenarios' waits (the fast timing fails a node within
// about 6 s of its last heartbeat).
const (
	waitLeader   = 30 * time.Second
	waitFence    = 90 * time.Second
	waitRecovery = 2 * time.Minute
)

// Fence phases as /status reports them.
var (
	phasesFencing = []string{"fencing", "fenced", "tainted", "evicted", "done"}
	phasesEvicted = []string{"evicted", "done"}
)

// deployStatefulSet creates a StatefulSet with a pod on every node and
// waits until they run; it returns the pods by node.
func deployStatefulSet(t *testing.T, h *Harness, name string) map[string]corev1.Pod {
	t.Helper()
	_, err := h.CP.CreateStatefulSet(h.ctx, testbed.StatefulSetSpec{Namespace: "db", Name: name,
		Replicas: int32(len(h.Nodes)), AntiAffinity: true})
	require.NoError(t, err)
	byNode := map[string]corev1.Pod{}
	h.wait(waitRecovery, "the StatefulSet's pods running", func() (bool, string) {
		pods, err := h.CP.Client.CoreV1().Pods("db").List(h.ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil {
			return false, err.Error()
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.Spec.NodeName != "" {
				running++
				byNode[p.Spec.NodeName] = p
			}
		}
		return running == len(h.Nodes), fmt.Sprintf("%d of %d running", running, len(h.Nodes))
	})
	return byNode
}

// waitReplaced waits until the pod named like old runs again, on another
// node, with a new UID.
func waitReplaced(t *testing.T, h *Harness, old corev1.Pod) {
	t.Helper()
	h.wait(waitRecovery, "pod "+old.Name+" recreated elsewhere", func() (bool, string) {
		p, err := h.CP.Client.CoreV1().Pods(old.Namespace).Get(h.ctx, old.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		ok := p.UID != old.UID && p.Spec.NodeName != old.Spec.NodeName && p.Status.Phase == corev1.PodRunning
		return ok, fmt.Sprintf("uid %s on %q phase %s", p.UID, p.Spec.NodeName, p.Status.Phase)
	})
}

// TestOneNodeDies: a worker powers off; fenced fences it on every array,
// taints it, force-deletes its StatefulSet pod, which runs again elsewhere.
func TestOneNodeDies(t *testing.T) {
	h := startFast(t)
	h.WaitLeader(waitLeader)
	pods := deployStatefulSet(t, h, "web")
	victim := "worker-2"
	h.KillNode(victim)
	f := h.WaitFence(victim, waitFence, phasesEvicted...)
	for _, a := range f.Arrays {
		require.Equal(t, "verified", a.Step, "array %s of %s", a.Array, f.ID)
	}
	waitReplaced(t, h, pods[victim])
	h.Check()
}

// TestLeaderKilledMidFence: the leader is killed with SIGKILL while it
// fences a node; the new leader resumes the fence from the ledger.
func TestLeaderKilledMidFence(t *testing.T) {
	h := startFast(t)
	leader := h.WaitLeader(waitLeader)
	pods := deployStatefulSet(t, h, "web")
	victim := "worker-3"
	// Slow the leader's array requests so the kill lands mid-fence.
	for name := range h.Arrays {
		require.NoError(t, h.Net.Latency(300*time.Millisecond, arrayProxy(leader, name)))
	}
	h.KillNode(victim)
	h.WaitFence(victim, waitFence, phasesFencing...)
	h.KillReplica(leader)
	next := h.WaitLeader(waitLeader)
	require.NotEqual(t, leader, next)
	h.WaitFence(victim, waitFence, phasesEvicted...)
	waitReplaced(t, h, pods[victim])
	h.StartReplica(leader)
	h.WaitLeader(waitLeader)
	h.Check()
}

// TestStormNothingFenced: the management network is cut from most nodes
// at once (more than the storm limit); fenced must fence none of them.
func TestStormNothingFenced(t *testing.T) {
	h := startFast(t)
	h.WaitLeader(waitLeader)
	deployStatefulSet(t, h, "web")
	storm := []string{"worker-1", "worker-2", "worker-3"}
	h.Timeline.Record(invariants.StormStart, ClusterName)
	for _, n := range storm {
		h.HangNode(n)
	}
	// The leader reports the storm; from then on, for twice the heartbeat
	// grace, no fence may appear.
	var since time.Time
	grace := fastTiming().HeartbeatGrace
	h.wait(waitFence, "the storm held for twice the heartbeat grace", func() (bool, string) {
		leader, err := h.Leader(context.Background())
		if err != nil {
			return false, err.Error()
		}
		st, err := h.Replicas[leader].Status(context.Background())
		if err != nil {
			return false, err.Error()
		}
		require.Empty(t, st.Fences, "fences during a storm")
		storming := false
		for _, c := range st.Clusters {
			storming = storming || (c.Name == ClusterName && c.Storm != nil)
		}
		if !storming {
			since = time.Time{}
			return false, "no storm reported"
		}
		if since.IsZero() {
			since = time.Now()
		}
		return time.Since(since) >= 2*grace, fmt.Sprintf("storm reported for %s", time.Since(since).Round(time.Second))
	})
	for _, n := range storm {
		h.ReturnNode(n)
	}
	h.Timeline.Record(invariants.StormEnd, ClusterName)
	rep := h.Check()
	require.Empty(t, rep.ByRule(invariants.RuleNoActionOnDoubt))
}
