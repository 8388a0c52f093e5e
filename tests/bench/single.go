package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/fenced-project/fenced/cluster/ledger"
	"github.com/fenced-project/fenced/stonith"
	"github.com/fenced-project/fenced/tests/e2e"
	"github.com/fenced-project/fenced/tests/testbed"
)

// Trial is one node death.
type Trial struct {
	Node string `json:"node"`
	// LastRenew is the victim's last Lease renewal; Killed its power-off,
	// the moment the harness stopped it (its kubelet port closes and its
	// Lease is no longer renewed).
	LastRenew time.Time `json:"lastRenew"`
	Killed    time.Time `json:"killed"`
	// KillPhase is when in the renewal cycle the power-off was aimed,
	// in seconds after a renewal (killPhase).
	KillPhase float64 `json:"killPhaseSeconds,omitempty"`
	// Verdict is when the acting leader logged the Failed verdict; Intent,
	// Fenced, Evicted the ledger steps' times; Recovered when every
	// replacement pod ran.
	Verdict   time.Time `json:"verdict"`
	Intent    time.Time `json:"intent"`
	Fenced    time.Time `json:"fenced"`
	Evicted   time.Time `json:"evicted"`
	Recovered time.Time `json:"recovered"`
	// LeaderKilled is set in failover trials.
	LeaderKilled time.Time `json:"leaderKilled,omitzero"`
	FenceID      string    `json:"fenceID"`
	// Corroboration is what confirmed the verdict, from the fence's reason.
	Corroboration string `json:"corroboration,omitempty"`
	// Early is set when the fence was opened on an early verdict.
	Early bool   `json:"early,omitempty"`
	Error string `json:"error,omitempty"`
	// Derived figures, in seconds.
	DetectionOverhead float64 `json:"detectionOverheadSeconds"`
	FenceTime         float64 `json:"fenceSeconds"`
	EvictionTime      float64 `json:"evictionSeconds"`
	GraceToEvicted    float64 `json:"graceToAllDeletedSeconds"`
	TotalRecovery     float64 `json:"totalRecoverySeconds"`
	KillToComplete    float64 `json:"leaderKillToFenceCompleteSeconds,omitempty"`
	// FromPowerOff and FromRenewal are the milestones (verdict, fence
	// opened, fenced, evicted, replacements Running) in seconds after the
	// power-off and after the last renewal; absent in older runs, whose
	// timestamps give them.
	FromPowerOff *Since `json:"fromPowerOff,omitempty"`
	FromRenewal  *Since `json:"fromLastRenewal,omitempty"`
}

// SingleResults are the single-node trials.
type SingleResults struct {
	Grace string `json:"grace"`
	// Early is set when early verdicts were on.
	Early  bool    `json:"earlyVerdicts,omitempty"`
	Trials []Trial `json:"trials"`
}

// FailoverResult are the failover trials.
type FailoverResult struct {
	Trials []Trial `json:"trials"`
}

// defaultGrace is fenced's default heartbeat grace (configs.DefaultCluster).
const defaultGrace = 40 * time.Second

func runSingle(t *e2e.Standalone, p params) (*SingleResults, *FailoverResult, error) {
	fmt.Fprintf(os.Stderr, "single: starting %d nodes, three replicas, five arrays\n", p.Nodes)
	h := e2e.Start(t, e2e.Options{Nodes: p.Nodes, Timing: e2e.ClusterTiming{EarlyVerdict: earlyMode(p.Early)}, NoArrayAuditFiles: true})
	var names []string
	for _, a := range h.Arrays {
		names = append(names, a.Name)
	}
	// Latency per direction: half the round trip.
	for _, id := range h.IDs {
		for _, a := range names {
			if err := h.Net.Latency(p.Latency/2, e2e.ArrayProxy(id, a)); err != nil {
				return nil, nil, err
			}
		}
	}
	h.WaitLeader(2 * time.Minute)
	single := &SingleResults{Grace: defaultGrace.String(), Early: p.Early}
	fail := &FailoverResult{}
	victim := 0
	next := func() (string, string) {
		victim++
		return fmt.Sprintf("worker-%d", victim), fmt.Sprintf("worker-%d", p.Nodes/2+victim)
	}
	for i := range p.Trials {
		v, spare := next()
		tr := trial(h, p, fmt.Sprintf("s%d", i), v, spare, killPhase(i, p.Trials), false)
		single.Trials = append(single.Trials, tr)
		fmt.Fprintf(os.Stderr, "single %d/%d: %s\n", i+1, p.Trials, tr.line())
	}
	for i := range p.Failover {
		v, spare := next()
		tr := trial(h, p, fmt.Sprintf("f%d", i), v, spare, killPhase(i, p.Failover), true)
		fail.Trials = append(fail.Trials, tr)
		fmt.Fprintf(os.Stderr, "failover %d/%d: %s\n", i+1, p.Failover, tr.line())
	}
	// The ledgers give the steps' exact times.
	in, _, err := h.Inputs()
	if err != nil {
		return single, fail, err
	}
	byID := map[string]*ledger.Fence{}
	for _, f := range in.Ledger.Fences {
		byID[f.ID] = f
	}
	logs := leaderVerdicts(h)
	for _, list := range [][]Trial{single.Trials, fail.Trials} {
		for i := range list {
			list[i].fill(byID[list[i].FenceID], logs)
		}
	}
	return single, fail, nil
}

// waitPhase returns phase after one of the node's Lease renewals: after
// the last one if that moment is still ahead, else after the next one.
func waitPhase(ctx context.Context, h *e2e.Harness, node string, phase time.Duration) error {
	last, err := h.CP.LeaseRenewTime(ctx, node)
	if err != nil {
		return fmt.Errorf("read the Lease of %s: %w", node, err)
	}
	for time.Until(last.Add(phase)) <= 0 {
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for a renewal of %s: %w", node, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
		r, err := h.CP.LeaseRenewTime(ctx, node)
		if err != nil {
			return fmt.Errorf("read the Lease of %s: %w", node, err)
		}
		if r.After(last) {
			last = r
		}
	}
	select {
	case <-ctx.Done():
		return fmt.Errorf("wait for the kill phase of %s: %w", node, ctx.Err())
	case <-time.After(time.Until(last.Add(phase))):
	}
	return nil
}

func (tr Trial) line() string {
	if tr.Error != "" {
		return tr.Node + ": " + tr.Error
	}
	return fmt.Sprintf("%s: fence %s, recovered %.1fs after the power-off, %.1fs after the last renewal", tr.Node, tr.FenceID,
		tr.Recovered.Sub(tr.Killed).Seconds(), tr.Recovered.Sub(tr.LastRenew).Seconds())
}

// renewInterval is how often the test bed's kubelets (kwok) renew their
// node Lease: a quarter of its 40 s duration, as kubelets do by default.
const renewInterval = 10 * time.Second

// killPhase is where in the victim's renewal cycle trial i of n powers it
// off: the middles of n equal slices of renewInterval. A real node dies
// at no particular moment of its kubelet's cycle, so the trials spread
// evenly over it; powering off as soon as the pods run would tie the
// phase to the test bed's timing, and the figures from the power-off
// with it.
func killPhase(i, n int) time.Duration {
	return time.Duration((float64(i) + 0.5) / float64(max(n, 1)) * float64(renewInterval))
}

// trial kills one node carrying p.Pods protected pods, phase after one
// of its Lease renewals, and waits until the pods run on spare.
func trial(h *e2e.Harness, p params, name, victim, spare string, phase time.Duration, failover bool) Trial {
	tr := Trial{Node: victim, KillPhase: phase.Seconds()}
	ctx, cancel := context.WithTimeout(context.Background(), p.TrialDeadline)
	defer cancel()
	if err := tr.run(ctx, h, p, name, victim, spare, phase, failover); err != nil {
		tr.Error = err.Error()
	}
	return tr
}

func (tr *Trial) run(ctx context.Context, h *e2e.Harness, p params, name, victim, spare string, phase time.Duration, failover bool) error {
	cs := h.CP.Client
	label := "bench-" + name
	if err := labelNode(ctx, h.CP, victim, label); err != nil {
		return err
	}
	old, err := placePods(ctx, h.CP, name, label, p.Pods)
	if err != nil {
		return err
	}
	if err := labelNode(ctx, h.CP, spare, label); err != nil {
		return err
	}
	if err := waitPhase(ctx, h, victim, phase); err != nil {
		return fmt.Errorf("trial %s: %w", name, err)
	}
	tr.Killed = time.Now()
	h.KillNode(victim)
	renew, err := h.CP.LeaseRenewTime(ctx, victim)
	if err != nil {
		return err
	}
	tr.LastRenew = renew
	killedLeader := ""
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("trial %s: %w (killed %s)", name, err, tr.Killed.Format(time.RFC3339))
		}
		leader, err := h.Leader(ctx)
		if err == nil {
			st, err := h.Replicas[leader].Status(ctx)
			if err == nil {
				for _, f := range st.Fences {
					if f.Node != victim || f.Kind == "unfence" {
						continue
					}
					tr.FenceID = f.ID
					if failover && killedLeader == "" {
						if f.Phase == "evicted" {
							return fmt.Errorf("trial %s: the fence completed before the leader could be killed", name)
						}
						killedLeader = leader
						tr.LeaderKilled = time.Now()
						h.KillReplica(leader)
					}
				}
			}
		}
		if tr.FenceID != "" && (!failover || killedLeader != "") {
			done, err := replaced(ctx, cs, name, old, spare)
			if err == nil && done {
				tr.Recovered = time.Now()
				break
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
	if killedLeader != "" {
		h.StartReplica(killedLeader)
		h.WaitLeader(2 * time.Minute)
	}
	return nil
}

// placePods creates a StatefulSet of n pods on the nodes labelled label
// and waits until they run; it returns their UIDs.
func placePods(ctx context.Context, cp *testbed.ControlPlane, name, label string, n int) (map[string]types.UID, error) {
	// Volumes come from the emulated PowerFlex driver, one per pod, named
	// after the StatefulSet.
	_, err := cp.CreateStatefulSet(ctx, testbed.StatefulSetSpec{Namespace: "bench", Name: name, Replicas: int32(n),
		NodeSelector: map[string]string{label: "true"}})
	if err != nil {
		return nil, err
	}
	for {
		pods, err := cp.Client.CoreV1().Pods("bench").List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err == nil {
			uids := map[string]types.UID{}
			for _, p := range pods.Items {
				if p.Status.Phase == corev1.PodRunning {
					uids[p.Name] = p.UID
				}
			}
			if len(uids) == n {
				return uids, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("pods of %s not running: %w", name, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// replaced reports whether every pod of the StatefulSet runs on spare
// with a new UID.
func replaced(ctx context.Context, cs kubernetes.Interface, name string, old map[string]types.UID, spare string) (bool, error) {
	pods, err := cs.CoreV1().Pods("bench").List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
	if err != nil {
		return false, err
	}
	n := 0
	for _, p := range pods.Items {
		if uid, ok := old[p.Name]; ok && uid != p.UID && p.Spec.NodeName == spare && p.Status.Phase == corev1.PodRunning {
			n++
		}
	}
	return n == len(old), nil
}

// leaderVerdicts returns, per replica and node, the times the replica
// logged a Failed verdict.
func leaderVerdicts(h *e2e.Harness) map[string]map[string][]time.Time {
	out := map[string]map[string][]time.Time{}
	for _, id := range h.IDs {
		out[id] = map[string][]time.Time{}
		f, err := os.Open(h.Replicas[id].LogPath)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			if !strings.Contains(string(line), `"node verdict"`) || !strings.Contains(string(line), `"state":"failed"`) {
				continue
			}
			var rec struct {
				Time time.Time `json:"time"`
				Node string    `json:"node"`
			}
			if json.Unmarshal(line, &rec) == nil {
				out[id][rec.Node] = append(out[id][rec.Node], rec.Time)
			}
		}
		_ = f.Close()
	}
	return out
}

// fill derives a trial's figures from its ledger record and the verdict
// logs.
func (tr *Trial) fill(f *ledger.Fence, verdicts map[string]map[string][]time.Time) {
	if f == nil {
		if tr.Error == "" {
			tr.Error = "no ledger record " + tr.FenceID
		}
		return
	}
	if i := strings.Index(f.Reason, "corroborated by "); i >= 0 {
		tr.Corroboration, _, _ = strings.Cut(f.Reason[i+len("corroborated by "):], ", "+stonith.EarlyReason)
	}
	tr.Early = strings.Contains(f.Reason, stonith.EarlyReason)
	var intentBy string
	for _, s := range f.Steps {
		switch s.To {
		case ledger.StateIntent:
			if tr.Intent.IsZero() {
				tr.Intent, intentBy = s.At, s.By
			}
		case ledger.StateFenced:
			tr.Fenced = s.At
		case ledger.StateEvicted:
			tr.Evicted = s.At
		}
	}
	for _, at := range verdicts[intentBy][tr.Node] {
		if !at.After(tr.Intent) && at.After(tr.Killed) {
			tr.Verdict = at
		}
	}
	if tr.Verdict.IsZero() {
		tr.Verdict = tr.Intent
	}
	graceEnd := tr.LastRenew.Add(defaultGrace)
	tr.DetectionOverhead = tr.Verdict.Sub(graceEnd).Seconds()
	tr.FenceTime = tr.Fenced.Sub(tr.Intent).Seconds()
	tr.EvictionTime = tr.Evicted.Sub(tr.Fenced).Seconds()
	tr.GraceToEvicted = tr.Evicted.Sub(graceEnd).Seconds()
	if !tr.Recovered.IsZero() {
		tr.TotalRecovery = tr.Recovered.Sub(tr.LastRenew).Seconds()
	}
	if !tr.LeaderKilled.IsZero() {
		tr.KillToComplete = tr.Evicted.Sub(tr.LeaderKilled).Seconds()
	}
	off, renew := tr.since(tr.Killed), tr.since(tr.LastRenew)
	tr.FromPowerOff, tr.FromRenewal = &off, &renew
}
