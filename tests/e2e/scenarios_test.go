package e2e

import (
	"context"
	"fmt"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fenced-project/fenced/cmd/fenced/status"
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
	phasesFencing = []string{"fencing", "fenced", "tainted", "evicted"}
	phasesEvicted = []string{"evicted"}
	phasesClosed  = []string{"closed"}
)

// FullEnv selects the whole end-to-end suite: FENCED_E2E=full (make e2e).
// Without it only the representative scenarios run, to keep `go test ./...`
// within its budget.
const FullEnv = "FENCED_E2E"

// full skips a scenario of the full suite unless FENCED_E2E=full.
func full(t *testing.T) {
	t.Helper()
	if os.Getenv(FullEnv) != "full" {
		t.Skip("part of the full end-to-end suite: run with FENCED_E2E=full (make e2e)")
	}
}

// deployStatefulSet creates a StatefulSet with a pod on every node but
// spare ones (anti-affinity, so each pod is on its own node and a
// replacement has somewhere to go) and waits until they run; it returns
// the pods by node.
func deployStatefulSet(t *testing.T, h *Harness, name string, spare int) map[string]corev1.Pod {
	t.Helper()
	return deployWith(t, h, testbed.StatefulSetSpec{Namespace: "db", Name: name,
		Replicas: int32(len(h.NodesOf(ClusterName)) - spare), AntiAffinity: true})
}

// deployWith creates the StatefulSet (in namespace db) and waits until its
// pods run with their volumes attached; it returns the pods by node.
func deployWith(t *testing.T, h *Harness, spec testbed.StatefulSetSpec) map[string]corev1.Pod {
	t.Helper()
	name, replicas := spec.Name, int(spec.Replicas)
	_, err := h.CP.CreateStatefulSet(h.ctx, spec)
	require.NoError(t, err)
	byNode := map[string]corev1.Pod{}
	h.wait(waitRecovery, "the StatefulSet's pods running", func() (bool, string) {
		pods, err := h.CP.Client.CoreV1().Pods(spec.Namespace).List(h.ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil {
			return false, err.Error()
		}
		clear(byNode)
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.Spec.NodeName != "" {
				byNode[p.Spec.NodeName] = p
			}
		}
		return len(byNode) == replicas, fmt.Sprintf("%d of %d running", len(byNode), replicas)
	})
	waitAttached(t, h, byNode)
	h.SettleArrays()
	return byNode
}

// withPods returns n nodes that run a pod, by name.
func withPods(pods map[string]corev1.Pod, n int) []string {
	var out []string
	for node := range pods {
		out = append(out, node)
	}
	sort.Strings(out)
	return out[:n]
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

// requireVerified asserts that a fence was read back on every array.
func requireVerified(t *testing.T, h *Harness, f status.Fence) {
	t.Helper()
	require.Len(t, f.Arrays, len(h.Arrays), "arrays of %s", f.ID)
	for _, a := range f.Arrays {
		require.Equal(t, "verified", a.Step, "array %s of %s", a.Array, f.ID)
	}
}

// hasTaint reports whether a node carries a taint with the key.
func hasTaint(t *testing.T, h *Harness, node, key string) bool {
	t.Helper()
	n, err := h.CP.Client.CoreV1().Nodes().Get(h.ctx, node, metav1.GetOptions{})
	require.NoError(t, err)
	for _, taint := range n.Spec.Taints {
		if taint.Key == key {
			return true
		}
	}
	return false
}

const outOfService = "node.kubernetes.io/out-of-service"

// leaderStatus returns the leader's /status.
func leaderStatus(h *Harness) (*status.Status, error) {
	leader, err := h.Leader(h.ctx)
	if err != nil {
		return nil, err
	}
	return h.Replicas[leader].Status(h.ctx)
}

// clusterStatus returns the cluster's section of a status.
func clusterStatus(st *status.Status) *status.Cluster {
	for i := range st.Clusters {
		if st.Clusters[i].Name == ClusterName {
			return &st.Clusters[i]
		}
	}
	return nil
}

// holdNoFence fails the test if the leader reports any fence of the nodes
// (all nodes when none is named) during d; cond, if given, must hold all
// the while too (it says what else the leader must show).
func holdNoFence(t *testing.T, h *Harness, d time.Duration, nodes []string, cond func(*status.Status) (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(d)
	h.wait(d+waitLeader, fmt.Sprintf("no fence of %v for %s", nodes, d), func() (bool, string) {
		st, err := leaderStatus(h)
		if err != nil {
			return false, err.Error()
		}
		for _, f := range st.Fences {
			if len(nodes) == 0 || containsStr(nodes, f.Node) {
				require.Failf(t, "unexpected fence", "%s of %s in %s (%s)", f.ID, f.Node, f.Phase, f.Reason)
			}
		}
		if cond != nil {
			if ok, msg := cond(st); !ok {
				deadline = time.Now().Add(d)
				return false, msg
			}
		}
		return time.Now().After(deadline), "holding"
	})
}

func containsStr(xs []string, x string) bool {
	for _, s := range xs {
		if s == x {
			return true
		}
	}
	return false
}

// killOneNode starts the harness, deploys a StatefulSet with a spare node,
// kills the node of one of its pods and waits until that node's fence has
// evicted its pods.
func killOneNode(t *testing.T) (*Harness, map[string]corev1.Pod, string, status.Fence) {
	t.Helper()
	h := startFast(t)
	h.WaitLeader(waitLeader)
	pods := deployStatefulSet(t, h, "web", 1)
	victim := withPods(pods, 1)[0]
	h.KillNode(victim)
	return h, pods, victim, h.WaitFence(victim, waitFence, phasesEvicted...)
}

// TestOneNodeDies: a worker powers off; fenced fences it on every array,
// reads each back, taints it, force-deletes its StatefulSet pod, which
// runs again elsewhere.
func TestOneNodeDies(t *testing.T) {
	h, pods, victim, f := killOneNode(t)
	requireVerified(t, h, f)
	assert.True(t, hasTaint(t, h, victim, outOfService))
	waitReplaced(t, h, pods[victim])
	rep := h.Check()
	assert.Positive(t, rep.Checked[invariants.RuleFenceBeforeDelete])
}

// TestCheckerCatchesBrokenBuild runs a deliberately broken fenced (built
// with the tag fenced_broken_delete_before_fence: it force-deletes a failed
// node's pods before fencing any array) through the same scenario as
// TestOneNodeDies, and requires the invariant checker to report the early
// deletes. A checker that passed this run would pass anything.
func TestCheckerCatchesBrokenBuild(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	bin, err := BuildFenced(ctx, t.TempDir(), "fenced_broken_delete_before_fence")
	require.NoError(t, err)
	t.Setenv(BinaryEnv, bin)
	h, pods, victim, _ := killOneNode(t)
	waitReplaced(t, h, pods[victim])
	in, opts, err := h.Inputs()
	require.NoError(t, err)
	rep := invariants.Check(in, opts)
	t.Logf("invariants of the broken build: %s", rep)
	early := rep.ByRule(invariants.RuleFenceBeforeDelete)
	require.NotEmpty(t, early, "the checker missed pods deleted before the fence")
	assert.Contains(t, early[0].Message, "while no fence of the node was in force")
	assert.Contains(t, early[0].Message, "pod ")
}

// TestLeaderKilledMidFence: the leader is killed with SIGKILL while it
// fences a node; the new leader resumes the fence from the ledger.
func TestLeaderKilledMidFence(t *testing.T) {
	h := startFast(t)
	leader := h.WaitLeader(waitLeader)
	pods := deployStatefulSet(t, h, "web", 1)
	victim := withPods(pods, 1)[0]
	// Slow the leader's array requests so the kill lands mid-fence.
	for name := range h.Arrays {
		require.NoError(t, h.Net.Latency(150*time.Millisecond, arrayProxy(leader, name)))
	}
	h.KillNode(victim)
	h.WaitFence(victim, waitFence, phasesFencing...)
	h.KillReplica(leader)
	next := h.WaitLeader(waitLeader)
	require.NotEqual(t, leader, next)
	f := h.WaitFence(victim, waitFence, phasesEvicted...)
	requireVerified(t, h, f)
	waitReplaced(t, h, pods[victim])
	h.StartReplica(leader)
	h.WaitLeader(waitLeader)
	h.Check()
}

// TestStormNothingFenced: most nodes die at once (more than the storm
// limit; kubelets and array paths dead too, so each one alone would be
// fenced); fenced must fence none of them. The leader must have seen them
// all as unhealthy and report the storm, so the test proves the storm
// guard held, not that detection was slow.
func TestStormNothingFenced(t *testing.T) {
	h := startFast(t)
	h.WaitLeader(waitLeader)
	deployStatefulSet(t, h, "web", 1)
	storm := []string{"worker-1", "worker-2", "worker-3"}
	h.Timeline.Record(invariants.StormStart, ClusterName)
	for _, n := range storm {
		h.KillNode(n)
	}
	grace := fastTiming().HeartbeatGrace
	holdNoFence(t, h, 2*grace, nil, func(st *status.Status) (bool, string) {
		c := clusterStatus(st)
		if c == nil || c.Storm == nil {
			return false, "no storm reported"
		}
		if c.Storm.Unhealthy < len(storm) {
			return false, fmt.Sprintf("storm sees %d unhealthy nodes", c.Storm.Unhealthy)
		}
		seen := 0
		for _, u := range c.Unhealthy {
			if containsStr(storm, u.Name) {
				seen++
			}
		}
		return seen == len(storm), fmt.Sprintf("%d of the nodes listed unhealthy: %+v", seen, c.Unhealthy)
	})
	for _, n := range storm {
		h.ReturnNode(n)
	}
	h.Timeline.Record(invariants.StormEnd, ClusterName)
	// The nodes are back: still nothing may be fenced (the cooldown holds
	// while they recover).
	holdNoFence(t, h, grace, nil, nil)
	rep := h.Check()
	require.Empty(t, rep.ByRule(invariants.RuleNoActionOnDoubt))
}

// TestRebootUnfence: a fenced node reboots (new boot ID); once its
// heartbeat has been fresh for the settle period, fenced restores every
// array to its state before the fence, reads it back and removes the
// taints; the checker compares every array with the fixture.
func TestRebootUnfence(t *testing.T) {
	h, pods, victim, _ := killOneNode(t)
	waitReplaced(t, h, pods[victim])
	h.RebootNode(victim)
	h.WaitFence(victim, waitRecovery, phasesClosed...)
	assert.False(t, hasTaint(t, h, victim, outOfService), "out-of-service taint left after the unfence")
	assert.False(t, hasTaint(t, h, victim, "fenced.io/fenced"), "fenced taint left after the unfence")
	rep := h.Check()
	require.Positive(t, rep.Checked[invariants.RuleArrayRestored])
	require.Positive(t, rep.Checked[invariants.RuleUnfenceOnce])
	// Every array is exactly as the fixture and the drivers made it, but
	// for the volume that moved: it stays with its new node.
	moved := volumeOf(t, h, pods[victim])
	in, _, err := h.Inputs()
	require.NoError(t, err)
	for name, start := range in.ArrayStart {
		diffs, err := invariants.DiffStates(start, in.ArrayEnd[name], invariants.DefaultSignalKeys)
		require.NoError(t, err)
		for _, d := range diffs {
			assert.Contains(t, d.Path, "["+moved.Object+"]", "array %s differs from the fixture where no volume moved", name)
		}
	}
}
