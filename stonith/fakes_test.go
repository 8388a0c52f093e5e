package stonith

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/cluster/ledger"
	"github.com/fenced-project/fenced/kube"
)

// opLog orders every write the fakes see, arrays and API server alike.
type opLog struct {
	mu  sync.Mutex
	ops []string
	at  []time.Time // when each op was logged
}

func (o *opLog) add(format string, args ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ops = append(o.ops, fmt.Sprintf(format, args...))
	o.at = append(o.at, time.Now())
}

// when returns when the first op equal to op was logged, and its index.
func (o *opLog) when(op string) (time.Time, int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	i := slices.Index(o.ops, op)
	if i < 0 {
		return time.Time{}, -1
	}
	return o.at[i], i
}

func (o *opLog) list() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.ops...)
}

func (o *opLog) count(op string) int {
	n := 0
	for _, s := range o.list() {
		if s == op {
			n++
		}
	}
	return n
}

// fakeGroup is a Raft group reduced to what the FSM sees: entries applied
// in order with an index and a term, through the real ledger FSM.
type fakeGroup struct {
	mu        sync.Mutex
	fsm       *ledger.FSM
	index     uint64
	term      uint64
	verifyErr error
}

// newFakeGroup is a group whose voters all run this build: its ledger
// holds the group ledger version ledger.Version, as the leader of such a
// group commits it.
func newFakeGroup() *fakeGroup {
	g := newLegacyGroup()
	g.index++
	buf, err := ledger.Encode(&ledger.SetLedgerVersion{Meta: g.meta(), LedgerVersion: ledger.Version})
	if err != nil {
		panic(err)
	}
	if res := g.fsm.Apply(&raft.Log{Index: g.index, Term: g.term, Type: raft.LogCommand, Data: buf}); res != nil {
		panic(res)
	}
	return g
}

// newLegacyGroup is a group that never committed a ledger version (a voter
// runs a build from before version 3): it runs ledger.LegacyVersion.
func newLegacyGroup() *fakeGroup { return &fakeGroup{fsm: ledger.New(), term: 1} }

// fakeLead is one leadership of a fakeGroup.
type fakeLead struct {
	g      *fakeGroup
	term   uint64
	ctx    context.Context
	cancel context.CancelFunc
	safeAt time.Time
	// peerTimeout is the array timeout another replica advertised.
	peerTimeout time.Duration
}

// lead starts a new term and returns its leadership.
func (g *fakeGroup) lead(t *testing.T) *fakeLead {
	g.mu.Lock()
	g.term++
	term := g.term
	g.mu.Unlock()
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	return &fakeLead{g: g, term: term, ctx: ctx, cancel: cancel, safeAt: time.Now()}
}

func (l *fakeLead) Context() context.Context { return l.ctx }
func (l *fakeLead) Term() uint64             { return l.term }
func (l *fakeLead) SafeAt() time.Time        { return l.safeAt }

func (l *fakeLead) PeerArrayTimeout() time.Duration { return l.peerTimeout }

func (l *fakeLead) VerifyLeader(ctx context.Context) error {
	l.g.mu.Lock()
	defer l.g.mu.Unlock()
	if l.g.term != l.term || l.ctx.Err() != nil {
		return errors.New("not leader")
	}
	return l.g.verifyErr
}

func (l *fakeLead) Apply(ctx context.Context, cmd ledger.Command) error {
	buf, err := ledger.Encode(cmd)
	if err != nil {
		return err
	}
	l.g.mu.Lock()
	defer l.g.mu.Unlock()
	if l.g.term != l.term || l.ctx.Err() != nil {
		return errors.New("not leader")
	}
	l.g.index++
	res := l.g.fsm.Apply(&raft.Log{Index: l.g.index, Term: l.g.term, Type: raft.LogCommand, Data: buf})
	if e, ok := res.(error); ok {
		return e
	}
	return nil
}

// raw applies a command as a given term would (to seed the ledger).
func (g *fakeGroup) must(t *testing.T, cmd ledger.Command) {
	t.Helper()
	l := &fakeLead{g: g, term: g.term, ctx: t.Context()}
	require.NoError(t, l.Apply(t.Context(), cmd))
}

func (g *fakeGroup) meta() ledger.Meta {
	return ledger.Meta{V: ledger.Version, Term: g.term, At: time.Now().UTC(), By: "seed"}
}

func (g *fakeGroup) fence(cluster, node string) *ledger.Fence {
	var out *ledger.Fence
	g.fsm.Read(func(s *ledger.State) {
		if n := s.Node(cluster, node); n != nil && n.Fence != nil {
			b, _ := json.Marshal(n.Fence)
			out = &ledger.Fence{}
			_ = json.Unmarshal(b, out)
		}
	})
	return out
}

func (g *fakeGroup) history(cluster, node string) []*ledger.Fence {
	var out []*ledger.Fence
	g.fsm.Read(func(s *ledger.State) {
		if n := s.Node(cluster, node); n != nil {
			out = append(out, n.History...)
		}
	})
	return out
}

// fakeArray is an array whose node access is one flag, with fault injection.
type fakeArray struct {
	name string
	log  *opLog

	mu        sync.Mutex
	access    map[string]bool // node -> has access
	applyErr  error
	planErr   error
	verifyErr error
	undoErr   error
	// undoFn, when set, is asked first on each Undo; an error fails it.
	undoFn func(p arrayclients.Plan, scope arrayclients.RestoreScope) error
	// verifyRestoreFn, when set, answers VerifyRestore.
	verifyRestoreFn func(p arrayclients.Plan) arrayclients.Verification
	applies         int
	undos           int
	// planGaps are the gaps Plan reports, by footprint volume; plans
	// counts Plan calls.
	planGaps map[string]*arrayclients.Gap
	plans    int
	// sessions and io are what the array reports of each node's sessions
	// and I/O; with neither set it reports none (ErrNoSessions). A cut
	// ends a node's sessions, and its I/O unless keepIO (a window still
	// counting I/O from before the cut).
	sessions    map[string][]arrayclients.Session
	io          map[string]arrayclients.IOWindow
	keepIO      bool
	sessionsErr error
	// verifyHook, when set, runs at the start of each Verify, outside the
	// lock; an error fails the Verify (an array that does not answer
	// blocks in it until ctx ends).
	verifyHook func(ctx context.Context) error
}

func newFakeArray(name string, log *opLog, nodes ...string) *fakeArray {
	a := &fakeArray{name: name, log: log, access: map[string]bool{}}
	for _, n := range nodes {
		a.access[n] = true
	}
	return a
}

func (a *fakeArray) Name() string { return a.name }

func (a *fakeArray) Family() arrayclients.Family { return arrayclients.PowerFlex }

func (a *fakeArray) Holds(loc arrayclients.VolumeLocation) bool {
	return loc.Family == arrayclients.PowerFlex && loc.ArrayID == a.name
}

func (a *fakeArray) Cover(arrayclients.Identity, arrayclients.VolumeRef) (arrayclients.Cut, *arrayclients.Gap) {
	return arrayclients.CutSDCUnmap, nil
}

func (a *fakeArray) Plan(_ context.Context, id arrayclients.Identity, vols []arrayclients.VolumeRef) (arrayclients.Plan, error) {
	a.mu.Lock()
	err := a.planErr
	a.plans++
	gaps := maps.Clone(a.planGaps)
	a.mu.Unlock()
	if err != nil {
		return arrayclients.Plan{}, err
	}
	p := arrayclients.Plan{Array: a.name, Family: arrayclients.PowerFlex, Identity: id,
		Entries: json.RawMessage(`[{"volume":"v1"}]`), Summary: "unmap v1 from " + id.Node, CreatedAt: time.Now().UTC()}
	for _, v := range vols {
		if g := gaps[v.Volume]; g != nil {
			p.Volumes = append(p.Volumes, arrayclients.VolumeCut{VolumeRef: v, Gap: g})
			continue
		}
		p.Volumes = append(p.Volumes, arrayclients.VolumeCut{VolumeRef: v, Cut: arrayclients.CutSDCUnmap})
	}
	return p, nil
}

func (a *fakeArray) Apply(_ context.Context, p arrayclients.Plan) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.applyErr != nil {
		return a.applyErr
	}
	a.applies++
	a.access[p.Identity.Node] = false
	if a.sessions != nil {
		delete(a.sessions, p.Identity.Node)
	}
	if w, ok := a.io[p.Identity.Node]; ok && !a.keepIO {
		w.Ops = 0
		a.io[p.Identity.Node] = w
	}
	a.log.add("apply %s %s", a.name, p.Identity.Node)
	return nil
}

// Sessions reports the node's sessions and I/O as set.
func (a *fakeArray) Sessions(_ context.Context, p arrayclients.Plan) (arrayclients.SessionReport, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.sessionsErr != nil {
		return arrayclients.SessionReport{}, a.sessionsErr
	}
	if a.sessions == nil && a.io == nil {
		return arrayclients.SessionReport{}, arrayclients.ErrNoSessions
	}
	rep := arrayclients.SessionReport{Sessions: slices.Clone(a.sessions[p.Identity.Node]), AskedAt: time.Now().UTC()}
	if w, ok := a.io[p.Identity.Node]; ok {
		rep.IO = &w
	}
	return rep, nil
}

func (a *fakeArray) Verify(ctx context.Context, p arrayclients.Plan) (arrayclients.Verification, error) {
	a.mu.Lock()
	hook := a.verifyHook
	a.mu.Unlock()
	if hook != nil {
		if err := hook(ctx); err != nil {
			return arrayclients.Verification{}, err
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.verifyErr != nil {
		return arrayclients.Verification{}, a.verifyErr
	}
	has := a.access[p.Identity.Node]
	v := arrayclients.Verification{Fenced: !has, Restored: has, CheckedAt: time.Now().UTC()}
	for _, vc := range p.Volumes {
		v.Volumes = append(v.Volumes, arrayclients.VolumeCheck{Volume: vc.Volume, Object: vc.Object, NodeAccess: has})
	}
	if has {
		v.Remaining = []string{"v1"}
		a.log.add("verify %s %s access", a.name, p.Identity.Node)
	} else {
		v.Missing = []string{"v1"}
		a.log.add("verify %s %s fenced", a.name, p.Identity.Node)
	}
	return v, nil
}

func (a *fakeArray) VerifyRestore(ctx context.Context, p arrayclients.Plan, _ arrayclients.RestoreScope) (arrayclients.Verification, error) {
	a.mu.Lock()
	fn := a.verifyRestoreFn
	a.mu.Unlock()
	if fn != nil {
		return fn(p), nil
	}
	return a.Verify(ctx, p)
}

func (a *fakeArray) Undo(_ context.Context, p arrayclients.Plan, scope arrayclients.RestoreScope) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.undoErr != nil {
		return a.undoErr
	}
	if a.undoFn != nil {
		if err := a.undoFn(p, scope); err != nil {
			return err
		}
	}
	a.undos++
	a.access[p.Identity.Node] = true
	a.log.add("undo %s %s", a.name, p.Identity.Node)
	return nil
}

func (a *fakeArray) set(fn func(a *fakeArray)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	fn(a)
}

func (a *fakeArray) hasAccess(node string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.access[node]
}

// fakeFootprints holds each node's volumes as Kubernetes would show them.
type fakeFootprints struct {
	mu     sync.Mutex
	vols   map[string][]arrayclients.KubeVolume
	gone   map[string]bool           // PVs whose attachment is being deleted
	pvs    []arrayclients.KubeVolume // PersistentVolumes attached to no node
	broken error
}

func newFakeFootprints() *fakeFootprints {
	return &fakeFootprints{vols: map[string][]arrayclients.KubeVolume{}, gone: map[string]bool{}}
}

// attach adds a volume of the fake driver (family PowerFlex, handle
// "<array>-<pv without dashes>") on array to node.
func (f *fakeFootprints) attach(node, pv, array string) {
	f.add(node, arrayclients.KubeVolume{PV: pv, Attachment: "va-" + pv, Driver: arrayclients.DriverPowerFlex,
		Handle: array + "-" + strings.ReplaceAll(pv, "-", ""), Attached: true})
}

func (f *fakeFootprints) add(node string, v arrayclients.KubeVolume) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.vols[node] = append(f.vols[node], v)
}

func (f *fakeFootprints) detach(node string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.vols, node)
}

func (f *fakeFootprints) Volumes(node string) ([]arrayclients.KubeVolume, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.vols[node]), f.broken
}

func (f *fakeFootprints) Wanted(node string) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, v := range f.vols[node] {
		if !f.gone[v.PV] {
			out = append(out, v.PV)
		}
	}
	return out, f.broken
}

// PersistentVolumes returns every attached volume and the unattached
// ones (pvs), by name.
func (f *fakeFootprints) PersistentVolumes() ([]arrayclients.KubeVolume, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	byName := map[string]arrayclients.KubeVolume{}
	for _, vols := range f.vols {
		for _, v := range vols {
			byName[v.PV] = arrayclients.KubeVolume{PV: v.PV, Driver: v.Driver, Handle: v.Handle, FSType: v.FSType, MultiNode: v.MultiNode}
		}
	}
	for _, v := range f.pvs {
		byName[v.PV] = v
	}
	var out []arrayclients.KubeVolume
	for _, k := range slices.Sorted(maps.Keys(byName)) {
		out = append(out, byName[k])
	}
	return out, f.broken
}

func (f *fakeFootprints) Nodes() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Sorted(maps.Keys(f.vols))
}

// fakeKube is an API server holding nodes and pods.
type fakeKube struct {
	log *opLog

	mu     sync.Mutex
	apiErr error
	nodes  map[string]*corev1.Node
	pods   map[types.UID]corev1.Pod
	events map[string]string // name -> reason
	// messages are the Events' messages, by name.
	messages map[string]string
	deletes  int
	// reads counts GetNode and PodsOnNode calls.
	reads int
	// detaching: node -> VolumeAttachments still to be detached.
	detaching map[string][]string
	// attached: node -> PVs the API server shows attached (AttachedPVs).
	attached map[string][]string
	// deleteDelay makes each ForceDeletePod take this long (outside the
	// lock), so deletions that run side by side overlap; inDeletes and
	// peakDeletes count them.
	deleteDelay            time.Duration
	inDeletes, peakDeletes int
	// noTaintEviction leaves out the taint-eviction controller: nothing
	// deletes a pod when a NoExecute taint appears.
	noTaintEviction bool
}

func newFakeKube(log *opLog) *fakeKube {
	return &fakeKube{log: log, nodes: map[string]*corev1.Node{}, pods: map[types.UID]corev1.Pod{}, events: map[string]string{},
		messages: map[string]string{}}
}

func (k *fakeKube) addNode(name, bootID string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)}}
	n.Status.NodeInfo.BootID = bootID
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown}}
	k.nodes[name] = n
}

func (k *fakeKube) readCount() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.reads
}

func (k *fakeKube) setNode(name string, fn func(n *corev1.Node)) {
	k.mu.Lock()
	defer k.mu.Unlock()
	fn(k.nodes[name])
}

func (k *fakeKube) addPod(ns, name, node string, sts bool, lbls map[string]string) types.UID {
	k.mu.Lock()
	defer k.mu.Unlock()
	uid := types.UID(fmt.Sprintf("uid-%s-%s-%d", ns, name, len(k.pods)))
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uid, Labels: lbls}}
	p.Spec.NodeName = node
	p.Status.Phase = corev1.PodRunning
	if sts {
		yes := true
		p.OwnerReferences = []metav1.OwnerReference{{Kind: "StatefulSet", Name: "s", Controller: &yes}}
	}
	k.pods[uid] = p
	return uid
}

func (k *fakeKube) CheckAPIServer(context.Context) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.apiErr
}

func (k *fakeKube) GetNode(_ context.Context, name string) (*corev1.Node, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.reads++
	if k.apiErr != nil {
		return nil, k.apiErr
	}
	n := k.nodes[name]
	if n == nil {
		return nil, fmt.Errorf("node %s not found", name)
	}
	return n.DeepCopy(), nil
}

func (k *fakeKube) PodsOnNode(_ context.Context, node string) ([]corev1.Pod, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.reads++
	if k.apiErr != nil {
		return nil, k.apiErr
	}
	var out []corev1.Pod
	for _, p := range k.pods {
		if p.Spec.NodeName == node {
			out = append(out, *p.DeepCopy())
		}
	}
	return out, nil
}

func (k *fakeKube) PendingDetaches(_ context.Context, node string) ([]string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.apiErr != nil {
		return nil, k.apiErr
	}
	return slices.Clone(k.detaching[node]), nil
}

func (k *fakeKube) AttachedPVs(_ context.Context, node string) ([]string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.apiErr != nil {
		return nil, k.apiErr
	}
	return slices.Clone(k.attached[node]), nil
}

func (k *fakeKube) setAttached(node string, pvs ...string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.attached == nil {
		k.attached = map[string][]string{}
	}
	k.attached[node] = pvs
}

func (k *fakeKube) setDetaching(node string, vas ...string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.detaching == nil {
		k.detaching = map[string][]string{}
	}
	k.detaching[node] = vas
}

func (k *fakeKube) AddTaints(_ context.Context, node string, taints ...corev1.Taint) (bool, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.apiErr != nil {
		return false, k.apiErr
	}
	n := k.nodes[node]
	changed := false
	for _, t := range taints {
		found := false
		for _, c := range n.Spec.Taints {
			found = found || (c.Key == t.Key && c.Effect == t.Effect)
		}
		if !found {
			n.Spec.Taints = append(n.Spec.Taints, t)
			changed = true
			k.log.add("taint %s %s", node, t.Key)
			if t.Effect == corev1.TaintEffectNoExecute && !k.noTaintEviction {
				k.taintEvict(node, t)
			}
		}
	}
	return changed, nil
}

// taintEvict does what Kubernetes' taint-eviction controller does when a
// NoExecute taint appears: it deletes (gracefully: a dead kubelet never
// finishes it, so the pod stays with a deletion timestamp) every pod of
// the node that does not tolerate it (pkg/controller/tainteviction
// processPodOnNode, addConditionAndDeletePod).
func (k *fakeKube) taintEvict(node string, t corev1.Taint) {
	for uid, p := range k.pods {
		if p.Spec.NodeName != node || p.DeletionTimestamp != nil ||
			slices.ContainsFunc(p.Spec.Tolerations, func(tl corev1.Toleration) bool { return tl.ToleratesTaint(&t) }) {
			continue
		}
		now := metav1.Now()
		p.DeletionTimestamp = &now
		k.pods[uid] = p
	}
}

func (k *fakeKube) RemoveTaints(_ context.Context, node string, taints ...corev1.Taint) (bool, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.apiErr != nil {
		return false, k.apiErr
	}
	n := k.nodes[node]
	var keep []corev1.Taint
	for _, c := range n.Spec.Taints {
		drop := false
		for _, t := range taints {
			drop = drop || (c.Key == t.Key && c.Effect == t.Effect)
		}
		if drop {
			k.log.add("untaint %s %s", node, c.Key)
		} else {
			keep = append(keep, c)
		}
	}
	changed := len(keep) != len(n.Spec.Taints)
	n.Spec.Taints = keep
	return changed, nil
}

func (k *fakeKube) ForceDeletePod(_ context.Context, ns, name string, uid types.UID) (bool, error) {
	k.mu.Lock()
	k.inDeletes++
	k.peakDeletes = max(k.peakDeletes, k.inDeletes)
	delay := k.deleteDelay
	k.mu.Unlock()
	time.Sleep(delay)
	k.mu.Lock()
	defer k.mu.Unlock()
	defer func() { k.inDeletes-- }()
	if k.apiErr != nil {
		return false, k.apiErr
	}
	p, ok := k.pods[uid]
	if !ok || p.Namespace != ns || p.Name != name {
		return false, nil
	}
	delete(k.pods, uid)
	k.deletes++
	k.log.add("delete %s/%s", ns, name)
	return true, nil
}

func (k *fakeKube) Event(_ context.Context, target kube.EventTarget, _, reason, key, msg string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.events[target.Kind+"/"+target.Name+"/"+reason+"/"+key] = reason
	k.messages[target.Kind+"/"+target.Name+"/"+reason+"/"+key] = msg
	return nil
}

func (k *fakeKube) taints(node string) []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []string
	for _, t := range k.nodes[node].Spec.Taints {
		out = append(out, t.Key+"="+t.Value+":"+string(t.Effect))
	}
	return out
}

func (k *fakeKube) eventReasons() map[string]int {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := map[string]int{}
	for _, r := range k.events {
		out[r]++
	}
	return out
}

// eventMessages returns the messages of the Events of this reason.
func (k *fakeKube) eventMessages(reason string) []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []string
	for name, r := range k.events {
		if r == reason {
			out = append(out, k.messages[name])
		}
	}
	return out
}
