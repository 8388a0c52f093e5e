package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fenced-project/fenced/tests/e2e"
	"github.com/fenced-project/fenced/tests/invariants"
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
	// Early is set when early verdicts were on; EarlyFences counts the
	// dying nodes' fences opened on an early verdict.
	Early       bool `json:"earlyVerdicts,omitempty"`
	EarlyFences int  `json:"earlyFences,omitempty"`
	// LastRenew is the last renewal of the dying nodes' Leases, the
	// reference of the figures above. PowerOff is when the harness began
	// stopping the dying nodes, PowerOffDone when it had stopped the last.
	LastRenew    time.Time `json:"lastRenew,omitzero"`
	PowerOff     time.Time `json:"powerOff,omitzero"`
	PowerOffDone time.Time `json:"powerOffDone,omitzero"`
	// At are the instants of the figures above; FromPowerOff the same
	// figures in seconds after PowerOff (absent in older runs).
	At           StormInstants `json:"at,omitzero"`
	FromPowerOff *StormSince   `json:"fromPowerOff,omitempty"`
	// DyingNodes are each dying node's power-off, last renewal and fence
	// steps from the ledger; Steps summarises them (first-to-last spread,
	// times after each node's own power-off and last renewal).
	DyingNodes []StormNode  `json:"dyingNodes,omitempty"`
	Steps      []StepSpread `json:"steps,omitempty"`
	// Families are where the time went per array family.
	Families []FamilyTime `json:"arrayFamilies,omitempty"`
	// Profiles are where each process's CPU time went during the storm
	// (-storm-profile).
	Profiles []ProcessProfile `json:"profiles,omitempty"`
	// ProcessCPU is the CPU time of this process and every process it
	// started, by command name, over the profiled window (/proc).
	ProcessCPU []ProcessCPU `json:"processCPU,omitempty"`
	// Unread is what the per-node and per-family figures could not read.
	Unread []string `json:"unread,omitempty"`
}

func runStorm(t *e2e.Standalone, p params) (*StormResult, error) {
	fmt.Fprintf(os.Stderr, "storm: starting %d nodes\n", p.StormNodes)
	// The limit leaves a fifth of headroom over the dying nodes: on a
	// loaded machine a live node's renewal can lag past the grace for
	// a moment, and one more unhealthy node than the limit rightly trips
	// the storm guard, which would hold the last fences for its cooldown.
	limit := p.StormDying + max(1, p.StormDying/5)
	h := e2e.Start(t, e2e.Options{Nodes: p.StormNodes, Timing: e2e.ClusterTiming{StormLimit: strconv.Itoa(limit), EarlyVerdict: earlyMode(p.Early)},
		ControlPlaneNice: p.ControlPlaneNice, NoArrayAuditFiles: true, Pprof: p.StormProfile != ""})
	h.WaitLeader(5 * time.Minute)
	h.WaitHealthy(p.StormNodes, 10*time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	// A node whose identities are not learned cannot be fenced: start
	// from a group that knows every node.
	if err := waitLearned(ctx, h, map[string]int{e2e.ClusterName: p.StormNodes}); err != nil {
		return nil, fmt.Errorf("storm: %w", err)
	}
	res := &StormResult{Nodes: p.StormNodes, Dying: p.StormDying, Limit: limit, ControlPlaneNice: p.ControlPlaneNice, Early: p.Early}
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
	before := scrapeRequests(ctx, h)
	var prof *stormProfiler
	type profiledResult struct {
		profiles []ProcessProfile
		cpu      []ProcessCPU
	}
	profiled := make(chan profiledResult, 1)
	if p.StormProfile != "" {
		var err error
		if prof, err = newStormProfiler(h, p.StormProfile); err != nil {
			return nil, err
		}
		prof.Start(ctx)
	}
	nodes := make([]StormNode, len(victims))
	res.PowerOff = time.Now()
	for i, v := range victims {
		nodes[i] = StormNode{Node: v, PowerOff: time.Now()}
		h.KillNode(v)
	}
	res.PowerOffDone = time.Now()
	for i, v := range victims {
		if r, err := h.CP.LeaseRenewTime(ctx, v); err == nil {
			nodes[i].LastRenew = r
			if r.After(res.LastRenew) {
				res.LastRenew = r
			}
		}
	}
	opened, fenced, evicted := map[string]bool{}, map[string]bool{}, map[string]bool{}
	seen := func(at *time.Time, ok bool) {
		if at.IsZero() && ok {
			*at = time.Now()
		}
	}
	for res.At.AllRunning.IsZero() {
		if ctx.Err() != nil {
			res.Error = fmt.Sprintf("gave up: %d fenced, %d evicted", len(fenced), len(evicted))
			break
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
		seen(&res.At.FirstOpened, len(opened) > 0)
		seen(&res.At.AllOpened, len(opened) >= p.StormDying)
		seen(&res.At.AllFenced, len(fenced) >= p.StormDying)
		seen(&res.At.AllEvicted, len(evicted) >= p.StormDying)
		if prof != nil && !res.At.AllEvicted.IsZero() {
			// The profiles end with the segment under way, beside
			// the wait for the replacements.
			go func(sp *stormProfiler) {
				ps, cpu := sp.Stop()
				profiled <- profiledResult{ps, cpu}
			}(prof)
			prof = nil
		}
		if !res.At.AllEvicted.IsZero() && waitRunning(ctx, h, "storm", p.StormDying, "worker-") == nil {
			res.At.AllRunning = time.Now()
		}
		time.Sleep(200 * time.Millisecond) // polling interval
	}
	if p.StormProfile != "" {
		if prof != nil {
			res.Profiles, res.ProcessCPU = prof.Stop()
		} else {
			r := <-profiled
			res.Profiles, res.ProcessCPU = r.profiles, r.cpu
		}
	}
	fromRenewal, fromPowerOff := res.At.since(res.LastRenew), res.At.since(res.PowerOff)
	res.FirstOpened, res.AllOpened, res.AllFenced, res.AllEvicted, res.AllRunning =
		fromRenewal.FirstOpened, fromRenewal.AllOpened, fromRenewal.AllFenced, fromRenewal.AllEvicted, fromRenewal.AllRunning
	res.FromPowerOff = &fromPowerOff
	stormLedger(context.WithoutCancel(ctx), h, res, nodes, before)
	return res, nil
}

// stormLedger fills the storm's per-node steps and per-family times: it
// scrapes the replicas' array request figures, then stops the replicas
// and reads their ledgers. What it cannot read goes into the result's
// error.
func stormLedger(ctx context.Context, h *e2e.Harness, res *StormResult, nodes []StormNode, before []map[arrayOp]OpTime) {
	after := scrapeRequests(ctx, h)
	var calls map[arrayOp]OpTime
	if before != nil && after != nil {
		calls = requestsDelta(before, after)
	} else {
		res.Unread = append(res.Unread, "the array requests (a replica's /metrics could not be read)")
	}
	var hs []*invariants.History
	for _, id := range h.IDs {
		_ = h.Replicas[id].Stop()
		hist, err := invariants.ReplayDataDir(h.Replicas[id].DataDir, 10*time.Second)
		if err != nil {
			res.Unread = append(res.Unread, "ledger of replica "+id+": "+err.Error())
			continue
		}
		hs = append(hs, hist)
	}
	fences := invariants.Merge(hs...).Fences
	stormNodeSteps(nodes, fences)
	family := map[string]string{}
	for name, a := range h.Arrays {
		family[name] = a.Family
	}
	res.DyingNodes, res.Steps, res.Families = nodes, stepSpreads(nodes), familyTimes(nodes, fences, family, calls)
	for _, n := range nodes {
		if n.Early {
			res.EarlyFences++
		}
	}
}

// scrapeRequests reads every replica's array request figures; nil when a
// replica cannot be read.
func scrapeRequests(ctx context.Context, h *e2e.Harness) []map[arrayOp]OpTime {
	hc := &http.Client{Timeout: 10 * time.Second}
	var out []map[arrayOp]OpTime
	for _, id := range h.IDs {
		m, err := scrapeReplica(ctx, hc, h.Replicas[id].HTTPURL)
		if err != nil {
			fmt.Fprintf(os.Stderr, "storm: replica %s: %v\n", id, err)
			return nil
		}
		out = append(out, m)
	}
	return out
}

// scrapeReplica reads one replica's /metrics.
func scrapeReplica(ctx context.Context, hc *http.Client, base string) (map[arrayOp]OpTime, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return nil, fmt.Errorf("scrape metrics: %w", err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape metrics: %s", resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return nil, fmt.Errorf("scrape metrics: %w", err)
	}
	return parseArrayRequests(string(b))
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
