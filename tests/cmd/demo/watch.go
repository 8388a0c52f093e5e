package main

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/fenced-project/fenced/stonith"
	"github.com/fenced-project/fenced/tests/arraysim/simcore"
	"github.com/fenced-project/fenced/tests/e2e"
	"github.com/fenced-project/fenced/tests/testbed"
)

// watcher turns what the API server and fenced's ledger say about one
// node's failure into timeline events.
type watcher struct {
	d      *demo
	tl     *timeline
	node   string
	oldPod corev1.Pod

	done     chan struct{}
	doneOnce sync.Once

	mu           sync.Mutex
	leader       *replica
	heartbeatSet bool
	lastState    string // for the error on timeout
}

// killAndWatch powers off the node of pod victim and prints the timeline
// until the pod runs again elsewhere.
func (d *demo) killAndWatch(ctx context.Context, victim corev1.Pod) (*timeline, error) {
	node := d.cp.Node(victim.Spec.NodeName)
	if node == nil {
		return nil, fmt.Errorf("pod %s runs on %q, which is not a test bed node", victim.Name, victim.Spec.NodeName)
	}
	w := &watcher{d: d, node: node.Name(), oldPod: victim, done: make(chan struct{})}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	initialTaints, err := w.taintKeys(ctx)
	if err != nil {
		return nil, err
	}

	d.say("powering off %s, which runs pod %s/%s", node.Name(), victim.Namespace, victim.Name)
	t0 := time.Now()
	w.tl = newTimeline(d.out, t0, demoTiming.heartbeatGrace)
	if err := node.Kill(ctx); err != nil {
		return nil, err
	}
	if err := w.arraysLoseSight(node); err != nil {
		return nil, err
	}
	w.tl.mark(mKill, t0)
	w.tl.add("kill", event{At: t0, Source: srcDemo, Text: fmt.Sprintf(
		"%s powered off: kubelet port closed, Lease no longer renewed, arrays see no connection or I/O from it", node.Name())}, t0)
	w.tl.header(node.Name())
	// Nothing changes on the API server for seconds after the kill; the
	// informers' first lists see the state before the fence.
	if err := w.startInformers(wctx, initialTaints); err != nil {
		return nil, err
	}

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		w.pollLedger(wctx)
	}()
	defer wg.Wait()
	defer cancel()

	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-w.done:
			w.tl.flush(time.Now(), true)
			return w.tl, nil
		case <-ctx.Done():
			w.tl.flush(time.Now(), true)
			w.mu.Lock()
			last := w.lastState
			w.mu.Unlock()
			return nil, fmt.Errorf("no replacement for pod %s running within --timeout %s (last seen: %s); replica logs are in %s",
				victim.Name, d.o.timeout, last, d.dir)
		case now := <-tick.C:
			w.tl.flush(now, false)
		}
	}
}

// arraysLoseSight makes every array see the node disconnected and idle,
// as it would a powered-off host. Each family names its hosts its own way
// (SDC GUID, csi-node-<machine ID>-<IP>, NFS client IP, csi-node-<prefix>-<node>,
// FQDN); every array must know the node by one of them.
func (w *watcher) arraysLoseSight(n *testbed.Node) error {
	off := false
	names := []string{n.Spec.Name, n.Spec.FQDN, n.Spec.IP, n.Spec.SDCGUID}
	for _, id := range n.Spec.CSINodeIDs() {
		names = append(names, id)
	}
	for _, a := range sortedArrays(w.d.arrays) {
		hosts := names
		if prefix := powerMaxPrefix(a); prefix != "" {
			hosts = append(slices.Clone(names), "csi-node-"+prefix+"-"+n.Spec.Name)
		}
		found := false
		for _, host := range hosts {
			if a.Server.Family().SetSignals(host, simcore.Signals{Connected: &off, IOActive: &off}) == nil {
				found = true
			}
		}
		if !found {
			return fmt.Errorf("array %s knows node %s by none of %v", a.Name, n.Spec.Name, hosts)
		}
	}
	return nil
}

// powerMaxPrefix is the csi-powermax cluster prefix of a PowerMax array
// ("" for other families).
func powerMaxPrefix(a *e2e.Array) string {
	if opts := familyOptions(a); a.Family == "powermax" && opts != nil {
		if p, ok := opts["clusterPrefix"].(string); ok {
			return p
		}
	}
	return ""
}

// finish ends the watch.
func (w *watcher) finish() {
	w.doneOnce.Do(func() { close(w.done) })
}

// startInformers watches the workload's pods and the node through
// client-go informers.
func (w *watcher) startInformers(ctx context.Context, initialTaints map[string]bool) error {
	client := w.d.cp.Client
	pods := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(workloadNamespace))
	nodes := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = "metadata.name=" + w.node
	}))

	podInf := pods.Core().V1().Pods().Informer()
	nodeInf := nodes.Core().V1().Nodes().Informer()
	handlers := []struct {
		inf cache.SharedIndexInformer
		h   cache.ResourceEventHandlerFuncs
	}{
		{podInf, cache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { w.onPod(o) },
			UpdateFunc: func(_, o any) { w.onPod(o) },
			DeleteFunc: func(o any) { w.onPodDeleted(o) },
		}},
		{nodeInf, cache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { w.onNode(o, initialTaints) },
			UpdateFunc: func(_, o any) { w.onNode(o, initialTaints) },
		}},
	}
	for _, h := range handlers {
		if _, err := h.inf.AddEventHandler(h.h); err != nil {
			return fmt.Errorf("watch: %w", err)
		}
	}
	for _, f := range []informers.SharedInformerFactory{pods, nodes} {
		f.Start(ctx.Done())
	}
	for _, inf := range []cache.SharedIndexInformer{podInf, nodeInf} {
		if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			return fmt.Errorf("watch pods and node %s: %w", w.node, ctx.Err())
		}
	}
	return nil
}

// taintKeys returns the keys of the node's taints.
func (w *watcher) taintKeys(ctx context.Context) (map[string]bool, error) {
	n, err := w.d.cp.Client.CoreV1().Nodes().Get(ctx, w.node, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get node %s: %w", w.node, err)
	}
	keys := map[string]bool{}
	for _, t := range n.Spec.Taints {
		keys[t.Key] = true
	}
	return keys, nil
}

// onPod follows the replacement of the victim's pod.
func (w *watcher) onPod(o any) {
	p, ok := o.(*corev1.Pod)
	if !ok || p.Name != w.oldPod.Name || p.UID == w.oldPod.UID {
		return
	}
	now := time.Now()
	ref := p.Namespace + "/" + p.Name
	w.tl.add("created-"+string(p.UID), event{At: now, Source: srcAPI,
		Text: fmt.Sprintf("pod %s created again by the StatefulSet controller (new UID %s)", ref, short(string(p.UID)))}, now)
	if p.Spec.NodeName != "" {
		w.tl.add("scheduled-"+string(p.UID), event{At: now, Source: srcAPI,
			Text: fmt.Sprintf("pod %s scheduled on %s", ref, p.Spec.NodeName)}, now)
	}
	if p.Status.Phase == corev1.PodRunning && p.Spec.NodeName != "" && p.Spec.NodeName != w.node {
		if w.tl.add("running-"+string(p.UID), event{At: now, Source: srcAPI,
			Text: fmt.Sprintf("replacement pod %s Running on %s", ref, p.Spec.NodeName)}, now) {
			w.tl.mark(mReplacement, now)
			w.finish()
		}
	}
}

// onPodDeleted reports the victim pod's removal and, from the API
// server's audit log, every DELETE of it and who sent it.
func (w *watcher) onPodDeleted(o any) {
	if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = t.Obj
	}
	p, ok := o.(*corev1.Pod)
	if !ok || p.UID != w.oldPod.UID {
		return
	}
	gone := time.Now()
	ref := p.Namespace + "/" + p.Name
	w.tl.add("gone", event{At: gone, Source: srcAPI, Text: fmt.Sprintf("pod %s (was on %s) is gone", ref, w.node)}, gone)
	var evs []testbed.AuditEvent
	for range 20 { // the audit log is written as the request completes
		var err error
		evs, err = w.d.cp.AuditEvents(testbed.AuditFilter{Verb: "delete", Resource: "pods", Subresource: "-",
			Namespace: p.Namespace, Name: p.Name, Since: w.tl.t0, Succeeded: true})
		if err == nil && len(evs) > 0 && strings.HasPrefix(evs[len(evs)-1].User.Username, "fenced-") {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	deleted := gone
	for i, e := range evs {
		user := e.User.Username
		text := fmt.Sprintf("pod %s: DELETE by %s", ref, user)
		switch {
		case strings.HasPrefix(user, "fenced-"):
			text, deleted = fmt.Sprintf("pod %s force-deleted by %s (grace 0, UID precondition)", ref, user), e.Received
		case strings.HasSuffix(user, ":node-controller"):
			text = fmt.Sprintf("pod %s evicted by %s (taint eviction: out-of-service is NoExecute)", ref, user)
		}
		w.tl.add(fmt.Sprintf("delete-%d", i), event{At: e.Received, Source: srcAPI, Text: text}, time.Now())
	}
	w.tl.mark(mPodDeleted, deleted)
}

// onNode reports the node's new taints and its Ready condition.
func (w *watcher) onNode(o any, initial map[string]bool) {
	n, ok := o.(*corev1.Node)
	if !ok {
		return
	}
	now := time.Now()
	for _, t := range n.Spec.Taints {
		if initial[t.Key] {
			continue
		}
		w.tl.add("taint-"+t.Key, event{At: now, Source: srcAPI,
			Text: fmt.Sprintf("node %s has taint %s=%s:%s", n.Name, t.Key, t.Value, t.Effect)}, now)
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
			w.tl.add("notready", event{At: now, Source: srcAPI, Text: fmt.Sprintf(
				"node %s Ready=%s (node lifecycle controller: %s)", n.Name, c.Status, c.Reason)}, now)
		}
	}
}

// short abbreviates a UID.
func short(uid string) string {
	if len(uid) > 8 {
		return uid[:8]
	}
	return uid
}

// pollLedger reads the leader's verdicts and the fence record until ctx
// ends.
func (w *watcher) pollLedger(ctx context.Context) {
	for {
		w.pollOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// pollOnce reads the leader's /status and /v1/fences once.
func (w *watcher) pollOnce(ctx context.Context) {
	w.mu.Lock()
	l := w.leader
	w.mu.Unlock()
	if l == nil {
		var err error
		if l, err = w.d.leader(ctx); err != nil {
			w.setLast(err.Error())
			return
		}
		w.mu.Lock()
		w.leader = l
		w.mu.Unlock()
	}
	st, err := l.status(ctx)
	if err != nil || st.Raft == nil || st.Raft.State != "Leader" {
		w.mu.Lock()
		w.leader = nil // find it again next time
		w.mu.Unlock()
		return
	}
	for _, c := range st.Clusters {
		for _, n := range c.Unhealthy {
			if n.Name == w.node {
				w.onVerdict(ctx, l.id, n.Verdict, n.Reason, n.Since)
			}
		}
	}
	fences, err := l.fences(ctx)
	if err != nil {
		w.setLast(err.Error())
		return
	}
	for _, f := range fences.Fences {
		if f.Node == w.node && f.Kind == "fence" {
			w.onFence(ctx, f)
		}
	}
}

func (w *watcher) setLast(s string) {
	w.mu.Lock()
	w.lastState = s
	w.mu.Unlock()
}

// onVerdict reports the leader detector's verdict on the node.
func (w *watcher) onVerdict(ctx context.Context, leader, verdict, reason string, since time.Time) {
	w.setLast("verdict " + verdict + ": " + reason)
	switch verdict {
	case "suspect", "failed":
		name := mSuspect
		if verdict == "failed" {
			name = mFailed
		}
		w.tl.mark(name, since)
		w.tl.add("verdict-"+verdict, event{At: since, Source: srcDetector,
			Text: fmt.Sprintf("verdict %s on leader %s: %s", titleCase(verdict), leader, reason)}, time.Now())
		w.heartbeat(ctx)
	case "blocked":
		w.tl.add("verdict-blocked-"+reason, event{At: since, Source: srcDetector,
			Text: fmt.Sprintf("verdict Blocked on leader %s: %s", leader, reason)}, time.Now())
		w.heartbeat(ctx)
	}
}

// heartbeat adds the node's last Lease renewal, once the node is known to
// be stale (no renewal can follow), and lets the timeline print.
func (w *watcher) heartbeat(ctx context.Context) {
	w.mu.Lock()
	set := w.heartbeatSet
	w.heartbeatSet = true
	w.mu.Unlock()
	if set {
		return
	}
	renew, err := w.d.cp.LeaseRenewTime(ctx, w.node)
	if err == nil && !renew.IsZero() {
		w.tl.mark(mHeartbeat, renew)
		w.tl.add("heartbeat", event{At: renew, Source: srcAPI, Text: fmt.Sprintf(
			"heartbeat lost: Lease kube-node-lease/%s renewed for the last time (heartbeat grace %s)", w.node, demoTiming.heartbeatGrace)}, time.Now())
	}
	w.tl.release()
}

// verdictRE reads the verdict a verdict-opened fence records in its reason:
// "verdict failed (heartbeat-stale) since 2006-01-02T15:04:05.000Z,
// corroborated by array".
var verdictRE = regexp.MustCompile(`verdict failed \((.*?)\) since (\S+?Z)(?:, corroborated by (.*))?`)

// onFence reports the fence record's steps and per-array results.
func (w *watcher) onFence(ctx context.Context, f stonith.FenceStatus) {
	w.heartbeat(ctx)
	w.setLast(fmt.Sprintf("fence %s in state %s %s %s", f.ID, f.State, f.Blocked, f.FailReason))
	now := time.Now()
	if m := verdictRE.FindStringSubmatch(f.Reason); m != nil {
		if at, err := time.Parse(time.RFC3339Nano, m[2]); err == nil {
			by := ""
			if m[3] != "" {
				by = ", corroborated by " + m[3]
			}
			w.tl.mark(mFailed, at)
			w.tl.add("verdict-failed", event{At: at, Source: srcLedger, Text: fmt.Sprintf(
				"verdict Failed (%s%s), as the fence record gives it", m[1], by)}, now)
		}
	}
	for _, s := range f.Steps {
		text := ""
		switch s.To {
		case "intent":
			w.tl.mark(mIntent, s.At)
			text = fmt.Sprintf("fence %s opened by leader %s (term %d): plans for %d arrays committed before any array is changed",
				f.ID, s.By, s.Term, len(f.Arrays))
		case "fencing":
			text = fmt.Sprintf("fence %s: fencing (the leader may now change the arrays)", f.ID)
		case "fenced":
			w.tl.mark(mFenced, s.At)
			text = fmt.Sprintf("fence %s: fenced, every array confirmed by read-back", f.ID)
		case "tainted":
			w.tl.mark(mTainted, s.At)
			text = fmt.Sprintf("fence %s: %s", f.ID, s.Note)
		case "evicted":
			w.tl.mark(mEvicted, s.At)
			text = fmt.Sprintf("fence %s: evicted (%s)", f.ID, s.Note)
		default:
			text = fmt.Sprintf("fence %s: %s %s", f.ID, s.To, s.Note)
		}
		w.tl.add(fmt.Sprintf("step-%d-%s", s.Index, s.To), event{At: s.At, Source: srcLedger, Text: text}, now)
	}
	for _, a := range f.Arrays {
		if a.Step == "verified" && !a.LastAt.IsZero() {
			if w.tl.add("array-"+a.Array, event{At: a.LastAt, Source: srcArray, Text: fmt.Sprintf(
				"%s (%s) fenced and read back: %s", a.Array, a.Family, a.Summary)}, now) {
				w.tl.countArray()
			}
		}
		if a.LastError != "" {
			w.tl.add("array-error-"+a.Array+a.LastError, event{At: a.LastAt, Source: srcArray, Text: fmt.Sprintf(
				"%s: %s (attempt %d)", a.Array, a.LastError, a.Attempts)}, now)
		}
	}
	if f.Blocked != "" {
		at := f.BlockedSince
		if at.IsZero() {
			at = now
		}
		w.tl.add("blocked-"+f.Blocked, event{At: at, Source: srcLedger, Text: "fence blocked: " + f.Blocked}, now)
	}
}

// titleCase capitalises a verdict name.
func titleCase(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
