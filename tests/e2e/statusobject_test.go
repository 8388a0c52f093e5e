package e2e

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/fenced-project/fenced/cmd/fenced/status"
	"github.com/fenced-project/fenced/tests/testbed"
)

var statusObjectResource = schema.GroupVersionResource{Group: "fenced.io", Version: "v1alpha1", Resource: "fencedstatuses"}

// statusObjectMismatch compares the cluster's FencedStatus with the
// leader's /status: "" when they agree on the leader, pause, dry-run,
// node counts, unprotected nodes and every fence's phase.
func statusObjectMismatch(obj *unstructured.Unstructured, st *status.Status) string {
	c := clusterStatus(st)
	if c == nil {
		return "no cluster in /status"
	}
	get := func(path ...string) any {
		v, _, _ := unstructured.NestedFieldNoCopy(obj.Object, append([]string{"status"}, path...)...)
		return v
	}
	var diffs []string
	want := func(what string, got, exp any) {
		if fmt.Sprint(got) != fmt.Sprint(exp) {
			diffs = append(diffs, fmt.Sprintf("%s: object %v, /status %v", what, got, exp))
		}
	}
	want("leader", get("leader"), st.ReplicaID)
	want("paused", get("paused"), c.Paused)
	want("dryRun", get("dryRun"), c.DryRun)
	if c.Pause != nil {
		want("pause.reason", get("pause", "reason"), c.Pause.Reason)
	}
	if c.Nodes != nil {
		want("unprotectedNodes", get("unprotectedNodes"), c.Nodes.Unprotected)
		want("protectedNodes", get("protectedNodes"), c.Nodes.Total-c.Nodes.Unprotected)
	}
	var exp, got []string
	for _, f := range st.Fences {
		if f.Cluster == ClusterName {
			exp = append(exp, f.ID+":"+f.Phase)
		}
	}
	fences, _ := get("fences").([]any)
	for _, f := range fences {
		m, _ := f.(map[string]any)
		got = append(got, fmt.Sprint(m["id"])+":"+fmt.Sprint(m["phase"]))
	}
	slices.Sort(exp)
	slices.Sort(got)
	want("fences", got, exp)
	return strings.Join(diffs, "; ")
}

// TestStatusObjectMatchesStatus: with clusters[].statusObject the leader
// keeps the cluster's FencedStatus (deploy/kubernetes/status.yaml) in step
// with its /status: before any fault, through a fence of a dead node (the
// fence and its phase), and through a pause of fencing (paused, with its
// reason).
func TestStatusObjectMatchesStatus(t *testing.T) {
	full(t) // the full suite: the default run keeps the remediation and escalation scenarios
	if testing.Short() {
		t.Skip("end-to-end: starts a control plane and three fenced processes")
	}
	timing := fastTiming()
	timing.StatusObject = true
	h := Start(t, Options{Timing: timing, NodeLeaseDurationSeconds: 4})
	leader := h.WaitLeader(waitLeader)
	root, err := testbed.RepoRoot()
	require.NoError(t, err)
	require.NoError(t, h.CP.ApplyManifests(h.ctx, filepath.Join(root, "deploy", "kubernetes", "status.yaml")))
	require.NoError(t, h.CP.WaitCRDs(h.ctx, "fencedstatuses.fenced.io"))
	dyn, err := dynamic.NewForConfig(h.CP.RESTConfig)
	require.NoError(t, err)
	objects := dyn.Resource(statusObjectResource)
	matches := func(what string, extra func(*unstructured.Unstructured) (bool, string)) {
		t.Helper()
		h.wait(time.Minute, "the FencedStatus to match /status "+what, func() (bool, string) {
			obj, err := objects.Get(h.ctx, "fenced", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			st, err := leaderStatus(h)
			if err != nil {
				return false, err.Error()
			}
			if d := statusObjectMismatch(obj, st); d != "" {
				return false, d
			}
			return extra(obj)
		})
	}
	matches("at start", func(obj *unstructured.Unstructured) (bool, string) {
		l, _, _ := unstructured.NestedString(obj.Object, "status", "leader")
		return l == leader, "leader " + l
	})

	pods := deployStatefulSet(t, h, "web", 1)
	victim := withPods(pods, 1)[0]
	h.KillNode(victim)
	f := h.WaitFence(victim, waitFence, phasesEvicted...)
	matches("through a fence", func(obj *unstructured.Unstructured) (bool, string) {
		fences, _, _ := unstructured.NestedSlice(obj.Object, "status", "fences")
		for _, x := range fences {
			if m, _ := x.(map[string]any); m["id"] == f.ID && m["node"] == victim {
				return m["phase"] == "evicted", fmt.Sprint(m["phase"])
			}
		}
		return false, "fence " + f.ID + " not shown"
	})

	_, err = h.CLI(leader, "pause", "--reason", "e2e: array upgrade", "--operator", "e2e")
	require.NoError(t, err)
	matches("through a pause", func(obj *unstructured.Unstructured) (bool, string) {
		p, _, _ := unstructured.NestedBool(obj.Object, "status", "paused")
		r, _, _ := unstructured.NestedString(obj.Object, "status", "pause", "reason")
		return p && r == "e2e: array upgrade", fmt.Sprintf("paused %v reason %q", p, r)
	})
	_, err = h.CLI(leader, "resume", "--reason", "e2e: done", "--operator", "e2e")
	require.NoError(t, err)
	matches("after the resume", func(obj *unstructured.Unstructured) (bool, string) {
		p, _, _ := unstructured.NestedBool(obj.Object, "status", "paused")
		return !p, "still paused"
	})
}
