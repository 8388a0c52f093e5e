package main

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fenced-project/fenced/tests/testbed"
)

// The demo's workload.
const (
	workloadNamespace = "demo"
	workloadName      = "db"
	workloadReplicas  = 3
)

// poll calls cond every interval until it reports done, cond fails, or ctx
// ends; the error then says what was awaited and what cond last said. A
// condition that can never hold returns a fatal error.
func poll(ctx context.Context, interval time.Duration, what string, cond func() (bool, string, error)) error {
	last := ""
	for {
		ok, msg, err := cond()
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		if msg != "" {
			last = msg
		}
		select {
		case <-ctx.Done():
			if last == "" {
				return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
			}
			return fmt.Errorf("waiting for %s: %w (last: %s)", what, ctx.Err(), last)
		case <-time.After(interval):
		}
	}
}

// leader returns the replica that says it leads, if one does.
func (d *demo) leader(ctx context.Context) (*replica, error) {
	for _, r := range d.replicas {
		st, err := r.status(ctx)
		if err != nil {
			continue
		}
		if st.Raft != nil && st.Raft.State == "Leader" {
			return r, nil
		}
	}
	return nil, fmt.Errorf("no replica says it leads")
}

// waitLeader waits until one replica leads, every replica names it and
// every replica is ready (it reaches the API server and the arrays).
func (d *demo) waitLeader(ctx context.Context) (*replica, error) {
	var leader *replica
	err := poll(ctx, 200*time.Millisecond, "a Raft leader and three ready replicas", func() (bool, string, error) {
		named := map[string]bool{}
		leader = nil
		for _, r := range d.replicas {
			select {
			case <-r.exited():
				return false, "", fmt.Errorf("replica %s exited; its log %s ends:\n%s", r.id, r.logPath, logTail(r.logPath, 2000))
			default:
			}
			st, err := r.status(ctx)
			if err != nil {
				return false, err.Error(), nil
			}
			if !st.Ready {
				var failing []string
				for _, c := range st.Checks {
					if !c.OK {
						failing = append(failing, c.Name+": "+c.Error)
					}
				}
				return false, fmt.Sprintf("replica %s not ready: %s", r.id, strings.Join(failing, "; ")), nil
			}
			if st.Raft == nil {
				return false, "replica " + r.id + " has no Raft status", nil
			}
			named[st.Raft.LeaderID] = true
			if st.Raft.State == "Leader" {
				leader = r
			}
		}
		if leader == nil || len(named) != 1 || !named[leader.id] {
			return false, fmt.Sprintf("leaders named: %v", named), nil
		}
		return true, "", nil
	})
	return leader, err
}

// deploy creates the StatefulSet and waits until its pods run; it returns
// them by name.
func (d *demo) deploy(ctx context.Context) ([]corev1.Pod, error) {
	d.say("deploying StatefulSet %s/%s: %d replicas, pod anti-affinity, a PVC each on %s (static CSI PVs)",
		workloadNamespace, workloadName, workloadReplicas, testbed.DriverPowerFlex)
	if _, err := d.cp.CreateStatefulSet(ctx, testbed.StatefulSetSpec{Namespace: workloadNamespace, Name: workloadName,
		Replicas: workloadReplicas, AntiAffinity: true, Driver: testbed.DriverPowerFlex}); err != nil {
		return nil, err
	}
	var pods []corev1.Pod
	err := poll(ctx, 250*time.Millisecond, "the StatefulSet's pods to run", func() (bool, string, error) {
		list, err := d.cp.Client.CoreV1().Pods(workloadNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + workloadName})
		if err != nil {
			return false, err.Error(), nil
		}
		pods = pods[:0]
		for _, p := range list.Items {
			if p.Status.Phase == corev1.PodRunning && p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
				pods = append(pods, p)
			}
		}
		return len(pods) == workloadReplicas, fmt.Sprintf("%d of %d running", len(pods), workloadReplicas), nil
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	for _, p := range pods {
		d.say("pod %s/%s Running on %s (volume %s)", p.Namespace, p.Name, p.Spec.NodeName, claimOf(p))
	}
	return pods, nil
}

// claimOf names the pod's PVC.
func claimOf(p corev1.Pod) string {
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			return v.PersistentVolumeClaim.ClaimName
		}
	}
	return "-"
}

// waitIdentities waits until the leader has resolved every node on every
// array (fenced learns a node's identities while it is healthy; a node
// whose identities were never learned cannot be fenced). It reads the
// leader's fenced_array_requests_total{op="resolve",result="ok"}.
func (d *demo) waitIdentities(ctx context.Context) error {
	err := poll(ctx, 250*time.Millisecond, "the leader to learn every node's array identities", func() (bool, string, error) {
		l, err := d.leader(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		text, err := l.metrics(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		resolved := resolvedPerArray(text)
		for name := range d.arrays {
			if resolved[name] < float64(len(d.nodes)) {
				return false, fmt.Sprintf("leader %s resolved %v nodes on %s", l.id, resolved[name], name), nil
			}
		}
		return true, "", nil
	})
	if err != nil {
		return err
	}
	d.say("the leader learned every node's identity on every array and committed them to the ledger")
	return nil
}

// resolvedPerArray sums fenced_array_requests_total{op="resolve",result="ok"}
// by array from a Prometheus text exposition.
func resolvedPerArray(text string) map[string]float64 {
	out := map[string]float64{}
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, "fenced_array_requests_total{") ||
			!strings.Contains(line, `op="resolve"`) || !strings.Contains(line, `result="ok"`) {
			continue
		}
		labels, value, ok := strings.Cut(line[len("fenced_array_requests_total{"):], "} ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			continue
		}
		for _, l := range strings.Split(labels, ",") {
			if name, ok := strings.CutPrefix(l, `array="`); ok {
				out[strings.TrimSuffix(name, `"`)] += v
			}
		}
	}
	return out
}

// printHints prints where everything is and what to try.
func (d *demo) printHints() {
	fmt.Fprintln(d.out)
	fmt.Fprintln(d.out, "Everything keeps running:")
	for _, r := range d.replicas {
		fmt.Fprintf(d.out, "  replica %s  %s/status   (log: %s)\n", r.id, r.httpURL, r.logPath)
	}
	fmt.Fprintf(d.out, "  kubeconfig  %s\n", d.cp.KubeconfigPath)
	fmt.Fprintln(d.out, "Try:")
	fmt.Fprintf(d.out, "  %s status --addr %s\n", d.fenced, d.replicas[0].httpURL)
	if d.planNode != "" {
		fmt.Fprintf(d.out, "  %s plan %s --cluster %s --addr %s --token-file %s\n", d.fenced, d.planNode, clusterName,
			d.replicas[0].httpURL, d.tokenFile)
	}
	fmt.Fprintf(d.out, "  %s pause --addr %s --token-file %s --reason 'array upgrade'\n", d.fenced, d.replicas[1].httpURL, d.tokenFile)
	fmt.Fprintf(d.out, "  %s resume --addr %s --token-file %s\n", d.fenced, d.replicas[2].httpURL, d.tokenFile)
	fmt.Fprintln(d.out, "(plan and the mutating commands need the token file; any replica answers plan itself and forwards the others to the leader)")
}
