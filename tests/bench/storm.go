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
	// Times after the last renewal of the dying nodes' Leases, in seconds.
	AllFenced  float64 `json:"allFencedSeconds"`
	AllEvicted float64 `json:"allEvictedSeconds"`
	AllRunning float64 `json:"allReplacementsRunningSeconds"`
	Error      string  `json:"error,omitempty"`
}

func runStorm(t *e2e.Standalone, p params) (*StormResult, error) {
	fmt.Fprintf(os.Stderr, "storm: starting %d nodes\n", p.StormNodes)
	h := e2e.Start(t, e2e.Options{Nodes: p.StormNodes, Timing: e2e.ClusterTiming{StormLimit: strconv.Itoa(p.StormDying)}})
	h.WaitLeader(5 * time.Minute)
	h.WaitHealthy(p.StormNodes, 10*time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	// A node whose identities are not learned cannot be fenced: start
	// from a group that knows every node.
	if err := waitLearned(ctx, h, p.StormNodes); err != nil {
		return nil, fmt.Errorf("storm: %w", err)
	}
	res := &StormResult{Nodes: p.StormNodes, Dying: p.StormDying}
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
	fenced, evicted := map[string]bool{}, map[string]bool{}
	for res.AllRunning == 0 {
		if ctx.Err() != nil {
			res.Error = fmt.Sprintf("gave up: %d fenced, %d evicted", len(fenced), len(evicted))
			return res, nil
		}
		if st, err := leaderStatus(ctx, h); err == nil {
			for _, f := range st.Fences {
				switch f.Phase {
				case "fenced", "tainted":
					fenced[f.Node] = true
				case "evicted":
					fenced[f.Node], evicted[f.Node] = true, true
				}
			}
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
