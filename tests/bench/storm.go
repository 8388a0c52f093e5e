package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fenced-project/fenced/tests/e2e"
	"github.com/fenced-project/fenced/tests/testbed"
)

// StormResult is many nodes dying at once.
type StormResult struct {
	Nodes int `json:"nodes"`
	Dying int `json:"dying"`
	// Limit is the storm limit the run used (0 in older runs: Dying).
	Limit int `json:"stormLimit,omitempty"`
	// Times after the last renewal of the dying nodes' Leases, in seconds.
	// Opened is when the leader's status first shows a fence of the node
	// (any phase): detection plus the decision to fence.
	FirstOpened float64 `json:"firstOpenedSeconds,omitempty"`
	AllOpened   float64 `json:"allOpenedSeconds,omitempty"`
	AllFenced   float64 `json:"allFencedSeconds"`
	AllEvicted  float64 `json:"allEvictedSeconds"`
	AllRunning  float64 `json:"allReplacementsRunningSeconds"`
	Error       string  `json:"error,omitempty"`
	// ControlPlaneNice is the nice value the control plane and kwok ran at.
	ControlPlaneNice int `json:"controlPlaneNice,omitempty"`
}

func runStorm(t *e2e.Standalone, p params) (*StormResult, error) {
	fmt.Fprintf(os.Stderr, "storm: starting %d nodes\n", p.StormNodes)
	// The limit leaves a fifth of headroom over the dying nodes: on a
	// loaded machine a live kwok node's renewal can lag past the grace for
	// a moment, and one more unhealthy node than the limit rightly trips
	// the storm guard, which would hold the last fences for its cooldown.
	limit := p.StormDying + max(1, p.StormDying/5)
	h := e2e.Start(t, e2e.Options{Nodes: p.StormNodes, Timing: e2e.ClusterTiming{StormLimit: strconv.Itoa(limit)},
		ControlPlaneNice: p.ControlPlaneNice})
	h.WaitLeader(5 * time.Minute)
	h.WaitHealthy(p.StormNodes, 10*time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	// A node whose identities are not learned cannot be fenced: start
	// from a group that knows every node.
	if err := waitLearned(ctx, h, p.StormNodes); err != nil {
		return nil, fmt.Errorf("storm: %w", err)
	}
	res := &StormResult{Nodes: p.StormNodes, Dying: p.StormDying, Limit: limit, ControlPlaneNice: p.ControlPlaneNice}
	var victims []string
	for i := 1; i <= p.StormDying; i++ {
		v := fmt.Sprintf("worker-%d", i)
		victims = append(victims, v)
		if err := labelNode(ctx, h.CP, v, "bench-storm"); err != nil {
			return nil, err
		}
	}
	_, err := h.CP.CreateStatefulSet(ctx, testbed.StatefulSetSpec{Namespace: "bench", Name: "storm", Replicas: int32(p.StormDying),
		NodeSelector: map[string]string{"bench-storm": "true"}, AntiAffinity: true})
	if err != nil {
		return nil, err
	}
	if err := waitRunning(ctx, h, "storm", p.StormDying, ""); err != nil {
		return nil, err
	}
	for i := p.StormDying + 1; i <= 2*p.StormDying && i <= p.StormNodes; i++ {
		if err := labelNode(ctx, h.CP, fmt.Sprintf("worker-%d", i), "bench-storm"); err != nil {
			return nil, err
		}
	}
	var last time.Time
	for _, v := range victims {
		h.KillNode(v)
	}
	for _, v := range victims {
		if r, err := h.CP.LeaseRenewTime(ctx, v); err == nil && r.After(last) {
			last = r
		}
	}
	opened, fenced, evicted := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for res.AllRunning == 0 {
		if ctx.Err() != nil {
			res.Error = fmt.Sprintf("gave up: %d fenced, %d evicted", len(fenced), len(evicted))
			return res, nil
		}
		if st, err := leaderStatus(ctx, h); err == nil {
			for _, f := range st.Fences {
				opened[f.Node] = true
				switch f.Phase {
				case "fenced", "tainted":
					fenced[f.Node] = true
				case "evicted":
					fenced[f.Node], evicted[f.Node] = true, true
				}
			}
		}
		if res.FirstOpened == 0 && len(opened) > 0 {
			res.FirstOpened = time.Since(last).Seconds()
		}
		if res.AllOpened == 0 && len(opened) >= p.StormDying {
			res.AllOpened = time.Since(last).Seconds()
		}
		if res.AllFenced == 0 && len(fenced) >= p.StormDying {
			res.AllFenced = time.Since(last).Seconds()
		}
		if res.AllEvicted == 0 && len(evicted) >= p.StormDying {
			res.AllEvicted = time.Since(last).Seconds()
		}
		if res.AllEvicted > 0 && waitRunning(ctx, h, "storm", p.StormDying, "worker-") == nil {
			res.AllRunning = time.Since(last).Seconds()
		}
		time.Sleep(200 * time.Millisecond) // polling interval
	}
	return res, nil
}

// waitRunning checks (avoid non-empty: once) or waits until n pods of the
// StatefulSet run, on nodes other than the dying ones when avoid is set.
func waitRunning(ctx context.Context, h *e2e.Harness, name string, n int, avoid string) error {
	for {
		pods, err := h.CP.Client.CoreV1().Pods("bench").List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err == nil {
			running := 0
			for _, p := range pods.Items {
				if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil && !h.Dead(p.Spec.NodeName) {
					running++
				}
			}
			if running == n {
				return nil
			}
		}
		if avoid != "" {
			return fmt.Errorf("not yet")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}
