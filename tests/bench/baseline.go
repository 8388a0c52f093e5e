package main

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fenced-project/fenced/tests/testbed"
)

// BaselineResult is what Kubernetes alone does with the pods of a dead
// node.
type BaselineResult struct {
	Nodes   int    `json:"nodes"`
	Pods    int    `json:"pods"`
	Node    string `json:"node"`
	Watched string `json:"watched"`
	// PowerOff is when the harness stopped the node (absent in older
	// runs, whose figures count from the same moment); LastRenew its
	// Lease's last renewal.
	PowerOff  time.Time `json:"powerOff,omitzero"`
	LastRenew time.Time `json:"lastRenew,omitzero"`
	// NotReadyAfter is when the node controller marked the node NotReady,
	// after the power-off (seconds; 0 if never).
	NotReadyAfter float64 `json:"notReadyAfterSeconds"`
	// TerminatingAfter is when the first pod got a deletion timestamp
	// (taint-based eviction), after the power-off (0 if never).
	TerminatingAfter float64 `json:"terminatingAfterSeconds"`
	// ReplacedAfter is when every pod ran again on another node, after the
	// power-off (0 if never while watched).
	ReplacedAfter float64 `json:"replacementsRunningAfterSeconds,omitempty"`
	// FromRenewal are the same figures after the last renewal.
	FromRenewal *BaselineSince `json:"fromLastRenewal,omitempty"`
	// Final counts the pods at the end by where they are.
	Final map[string]int `json:"final"`
	// Samples are the counts over time (every 30 s).
	Samples []BaselineSample `json:"samples"`
}

// BaselineSample is the pods' whereabouts at one time.
type BaselineSample struct {
	After  float64        `json:"afterSeconds"`
	Counts map[string]int `json:"counts"`
}

// runBaseline kills a node carrying p.Pods StatefulSet pods on a control
// plane without fenced and watches for p.BaselineWait.
func runBaseline(ctx context.Context, p params) (*BaselineResult, error) {
	fmt.Fprintf(os.Stderr, "baseline: starting %d nodes without fenced\n", p.Nodes)
	cp, err := testbed.StartControlPlane(ctx, testbed.Options{})
	if err != nil {
		return nil, err
	}
	defer cp.Stop()
	nodes, err := cp.AddNodes(ctx, testbed.NodeSpecs("worker", p.Nodes)...)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, n := range nodes {
		names = append(names, n.Name())
	}
	if err := cp.WaitNodesReady(ctx, names...); err != nil {
		return nil, err
	}
	victim, spare := names[0], names[len(names)-1]
	label := "bench-baseline"
	for _, n := range []string{victim} {
		if err := labelNode(ctx, cp, n, label); err != nil {
			return nil, err
		}
	}
	// Kubernetes alone has no array behind it: the test bed makes up the
	// volume handles and attaches them without a CSI controller.
	cp.AttachWithoutController(true)
	old, err := placePods(ctx, cp, "baseline", label, p.Pods)
	if err != nil {
		return nil, err
	}
	if err := labelNode(ctx, cp, spare, label); err != nil {
		return nil, err
	}
	res := &BaselineResult{Nodes: p.Nodes, Pods: p.Pods, Node: victim, Watched: p.BaselineWait.String()}
	killed := time.Now()
	res.PowerOff = killed
	if err := cp.Node(victim).Kill(ctx); err != nil {
		return nil, err
	}
	if renew, err := cp.LeaseRenewTime(ctx, victim); err == nil {
		res.LastRenew = renew
	}
	defer func() {
		r := res.fromRenewal()
		res.FromRenewal = &r
	}()
	nextSample := killed
	for time.Since(killed) < p.BaselineWait {
		counts, terminating, err := whereabouts(ctx, cp, old, victim)
		if err == nil {
			if terminating && res.TerminatingAfter == 0 {
				res.TerminatingAfter = time.Since(killed).Seconds()
			}
			res.Final = counts
			if res.ReplacedAfter == 0 && counts["Running elsewhere"] == len(old) {
				res.ReplacedAfter = time.Since(killed).Seconds()
			}
			if !time.Now().Before(nextSample) {
				res.Samples = append(res.Samples, BaselineSample{After: time.Since(killed).Round(time.Second).Seconds(), Counts: counts})
				nextSample = nextSample.Add(30 * time.Second)
			}
		}
		if res.NotReadyAfter == 0 {
			if n, err := cp.Client.CoreV1().Nodes().Get(ctx, victim, metav1.GetOptions{}); err == nil {
				for _, c := range n.Status.Conditions {
					if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
						res.NotReadyAfter = time.Since(killed).Seconds()
					}
				}
			}
		}
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
	fmt.Fprintf(os.Stderr, "baseline: after %s: %s\n", p.BaselineWait, countsString(res.Final))
	return res, nil
}

// whereabouts counts the StatefulSet's pods by where they are.
func whereabouts(ctx context.Context, cp *testbed.ControlPlane, old map[string]types.UID, victim string) (map[string]int, bool, error) {
	pods, err := cp.Client.CoreV1().Pods("bench").List(ctx, metav1.ListOptions{LabelSelector: "app=baseline"})
	if err != nil {
		return nil, false, err
	}
	counts := map[string]int{}
	terminating := false
	for _, p := range pods.Items {
		var k string
		switch {
		case p.UID == old[p.Name] && p.DeletionTimestamp != nil:
			k, terminating = "Terminating on the dead node", true
		case p.UID == old[p.Name]:
			k = "on the dead node, " + string(p.Status.Phase)
		case p.Status.Phase == corev1.PodRunning && p.Spec.NodeName != victim:
			k = "Running elsewhere"
		default:
			k = "replacement " + string(p.Status.Phase)
		}
		counts[k]++
	}
	if n := len(old) - len(pods.Items); n > 0 {
		counts["gone"] = n
	}
	return counts, terminating, nil
}

func countsString(c map[string]int) string {
	var parts []string
	for k, v := range c {
		parts = append(parts, fmt.Sprintf("%d %s", v, k))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

func labelNode(ctx context.Context, cp *testbed.ControlPlane, node, key string) error {
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:"true"}}}`, key)
	if _, err := cp.Client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("label node %s: %w", node, err)
	}
	return nil
}
