package groupview

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/cluster"
	"github.com/fenced-project/fenced/cluster/ledger"
	"github.com/fenced-project/fenced/configs"
	"github.com/fenced-project/fenced/detector"
)

// ProbeKubelet is the ledger's name for a replica's kubelet probe of a node.
const ProbeKubelet = "kubelet"

// Node is what the detector's view of the group needs of the Raft group.
// *cluster.Node implements it.
type Node interface {
	ID() string
	Leadership() (cluster.Leadership, <-chan struct{})
	Leader() (cluster.LeaderInfo, bool)
	Apply(ctx context.Context, cmd ledger.Command) (uint64, error)
	Ledger() *ledger.FSM
}

var _ Node = (*cluster.Node)(nil)

// View connects one cluster's detector to the ledger: it is the
// Runner's IdentitySource, VantageSource, ObservationSink and Guard.
//
// Identity learning: the detector hands over the identity inputs (Node and
// CSINode) of healthy nodes. On the leader they are resolved at once on
// every array of the cluster and committed with SetIdentities when they
// differ from the ledger's; on a follower they are kept, and resolved when
// the replica becomes leader (Drain), so a new leader learns what changed
// while it followed. A node is committed only when every array answered
// (an unreachable array keeps the previous set); arrays where no identity
// or an ambiguous one was found are committed as such, and make the node
// unprotected where it has footprint volumes. Ambiguities are also kept in
// memory and reported to the detector (Blocked identity-ambiguous).
type View struct {
	cluster   string
	node      Node
	arrays    []arrayclients.Adapter
	instances map[string][]string          // array -> driver names whose node IDs identify a node on it
	overrides map[string]map[string]string // node -> array -> override
	bootID    func(node string) string
	build     string
	log       *slog.Logger

	// board holds the other replicas' fresh kubelet probes (filled on the
	// leader by their reports); report queues this replica's probe for the
	// leader while it follows. Both are nil in a group of one (see
	// ShareProbes).
	board  *detector.VantageBoard
	report func(detector.ProbeObservation)

	mu        sync.Mutex
	ambiguous map[string][]string
	pending   map[string]arrayclients.Node
}

var (
	_ detector.IdentitySource      = (*View)(nil)
	_ detector.VersionedIdentities = (*View)(nil)
	_ detector.VantageSource       = (*View)(nil)
	_ detector.ObservationSink     = (*View)(nil)
	_ detector.Guard               = (*View)(nil)
)

// NewView returns the view of cluster c's detector. bootID returns a
// node's current boot ID, committed with its identities. instances maps an
// array to the CSI driver names of the driver instance that serves it (see
// configs.Config.ArrayDrivers): a node is resolved on the array with the
// node ID that instance reported in its CSINode. An array it does not name
// is resolved with arrayclients.UnnamedInstance.
//
// build names the fenced build (version and revision): it is part of the
// digest of a node's identity inputs, so a new version resolves every node
// again.
func NewView(c configs.Cluster, instances map[string][]string, node Node, arrays []arrayclients.Adapter,
	bootID func(string) string, build string, log *slog.Logger) *View {
	ov := map[string]map[string]string{}
	for _, n := range c.Nodes {
		ov[n.Name] = maps.Clone(n.Arrays)
	}
	drivers := c.DriverFamilies()
	inst := map[string][]string{}
	for _, a := range arrays {
		if names := instances[a.Name()]; len(names) > 0 {
			inst[a.Name()] = slices.Clone(names)
		} else {
			inst[a.Name()] = arrayclients.UnnamedInstance(a.Family(), drivers)
		}
	}
	return &View{cluster: c.Name, node: node, arrays: arrays, instances: inst, overrides: ov, bootID: bootID,
		build: build, log: log.With("cluster", c.Name), ambiguous: map[string][]string{}, pending: map[string]arrayclients.Node{}}
}

// NodeIdentities returns the identities the ledger holds for the node and
// the arrays where its identity was found ambiguous.
func (v *View) NodeIdentities(cluster, node string) ([]arrayclients.Identity, []string) {
	var ids []arrayclients.Identity
	v.node.Ledger().Read(func(s *ledger.State) {
		if n := s.Node(cluster, node); n != nil {
			for _, name := range slices.Sorted(maps.Keys(n.Identities)) {
				ids = append(ids, n.Identities[name])
			}
		}
	})
	v.mu.Lock()
	defer v.mu.Unlock()
	return ids, slices.Clone(v.ambiguous[node])
}

// IdentitiesVersion is the ledger's applied index: identities change only
// by a committed entry (or a snapshot restored), which moves it.
func (v *View) IdentitiesVersion() uint64 {
	return v.node.Ledger().AppliedIndex()
}

// Probes returns the other replicas' fresh kubelet probes of the node:
// on the leader, those they reported within the board's freshness bound
// (see detector.VantageBoard); nothing on a follower. The ledger's record
// of their reachability (changes only, for the history) is never used as
// evidence: its Since is when a value began, not when it was last seen.
func (v *View) Probes(cluster, node string) []detector.ProbeObservation {
	if v.board == nil {
		return nil
	}
	return v.board.Probes(cluster, node, time.Now())
}

// RecordProbe commits this replica's kubelet probe when its outcome
// differs from the ledger's record. Only the leader writes; a follower
// reports its probes to the leader (see vantage).
func (v *View) RecordProbe(ctx context.Context, obs detector.ProbeObservation) error {
	l, _ := v.node.Leadership()
	if !l.Leader {
		if v.report != nil {
			v.report(obs)
		}
		return nil
	}
	self := v.node.ID()
	same := false
	v.node.Ledger().Read(func(s *ledger.State) {
		o, ok := s.Observations(obs.Cluster, obs.Node, ProbeKubelet)[self]
		same = ok && o.OK == obs.Reachable
	})
	if same {
		return nil
	}
	detail := obs.Address
	if !obs.Reachable {
		detail = obs.Error
	}
	_, err := v.node.Apply(ctx, &ledger.Observe{Meta: l.Meta(), Replica: self, Cluster: obs.Cluster, Node: obs.Node,
		Probe: ProbeKubelet, OK: obs.Reachable, Since: obs.At.UTC(), Detail: truncate(detail, 200)})
	if errors.Is(err, cluster.ErrNotLeader) {
		return nil
	}
	return err
}

// RecordNodeInputs learns a healthy node's identities (see View).
func (v *View) RecordNodeInputs(ctx context.Context, in arrayclients.Node) error {
	l, _ := v.node.Leadership()
	if !l.Leader {
		v.mu.Lock()
		v.pending[in.Name] = in
		v.mu.Unlock()
		return nil
	}
	err := v.learn(ctx, l, in)
	if errors.Is(err, cluster.ErrNotLeader) {
		v.mu.Lock()
		v.pending[in.Name] = in
		v.mu.Unlock()
		return nil
	}
	return err
}

// ShareProbes connects the view to the group's probe sharing: board holds
// the other replicas' probes of the cluster, report sends this replica's
// to the leader while it follows (Sharing.Queue).
func (v *View) ShareProbes(board *detector.VantageBoard, report func(detector.ProbeObservation)) {
	v.board, v.report = board, report
}

// drainWorkers is how many nodes Drain learns at once: learning resolves
// the node on every array, so thousands of nodes one at a time would take
// many minutes after an election.
const drainWorkers = 8

// Drain learns, under leadership l, every node whose inputs arrived while
// this replica followed, drainWorkers at a time from a work queue in the
// order of their names. A node that fails is queued again after retry, and
// inputs that arrive meanwhile are taken every retry interval, until the
// leadership ends.
func (v *View) Drain(l cluster.Leadership, retry time.Duration) {
	q := workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemFastSlowRateLimiter[string](retry, retry, 0))
	var (
		mu      sync.Mutex
		inputs  = map[string]*arrayclients.Node{} // taken and not learned yet
		learned int
		failed  bool
	)
	take := func() {
		v.mu.Lock()
		todo := v.pending
		v.pending = map[string]arrayclients.Node{}
		v.mu.Unlock()
		mu.Lock()
		for name, in := range todo {
			inputs[name] = &in
		}
		mu.Unlock()
		for _, name := range slices.Sorted(maps.Keys(todo)) {
			q.Add(name)
		}
	}
	var wg sync.WaitGroup
	for range drainWorkers {
		wg.Go(func() {
			for {
				name, shutdown := q.Get()
				if shutdown {
					return
				}
				mu.Lock()
				in, ok := inputs[name]
				mu.Unlock()
				if !ok || l.Ctx.Err() != nil {
					q.Done(name) // learned already, or left for the next leadership
					continue
				}
				err := v.learn(l.Ctx, l, *in)
				mu.Lock()
				switch {
				case err != nil:
					failed = true
				case inputs[name] == in: // not replaced by newer inputs meanwhile
					delete(inputs, name)
					learned++
					if len(inputs) == 0 && !failed {
						v.log.Info("learned node identities after gaining leadership", "nodes", learned)
					}
					if len(inputs) == 0 {
						learned, failed = 0, false
					}
				}
				mu.Unlock()
				if err != nil {
					v.log.Warn("learn node identities", "node", name, "error", err)
					q.AddRateLimited(name)
				} else {
					q.Forget(name)
				}
				q.Done(name)
			}
		})
	}
	take()
	tick := time.NewTicker(retry)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			take()
			continue
		case <-l.Ctx.Done():
		}
		break
	}
	q.ShutDown()
	wg.Wait()
	// The leadership ended: what was not learned stays pending for the
	// next one. The detector has handed these inputs over once and will
	// not again unless they change, so dropping them would leave the nodes
	// unprotected (no identities) for good.
	v.mu.Lock()
	for name, in := range inputs {
		if _, newer := v.pending[name]; !newer {
			v.pending[name] = *in
		}
	}
	v.mu.Unlock()
}

// learn resolves the node on every array of the cluster and commits the
// identity set when it differs from the ledger's: the identities found,
// and the arrays where none was found or more than one candidate was
// (never silently dropped: with a footprint volume there the node is
// unprotected). An array that could not be asked keeps the previous set:
// a set is committed only when every array answered.
func (v *View) learn(ctx context.Context, l cluster.Leadership, in arrayclients.Node) error {
	digest := v.inputsDigest(in)
	boot := v.bootID(in.Name)
	if v.resolvedFrom(in.Name, boot, digest) {
		return nil
	}
	ids := map[string]arrayclients.Identity{}
	notFound, ambiguous := map[string]string{}, map[string]string{}
	var errs []error
	for _, a := range v.arrays {
		q := in.ForInstance(a.Family(), v.instances[a.Name()])
		q.Override = v.overrides[in.Name][a.Name()]
		id, err := a.Resolve(ctx, q)
		switch {
		case err == nil:
			ids[a.Name()] = id
		case errors.Is(err, arrayclients.ErrNoIdentity):
			// Say whose node ID was looked for: with several instances
			// of a family, a wrong arrays[].driverName shows here.
			notFound[a.Name()] = truncate(fmt.Sprintf("%v (node ID of CSI driver %s)", err,
				strings.Join(v.instances[a.Name()], " or ")), 1000)
		case errors.Is(err, arrayclients.ErrAmbiguousIdentity):
			ambiguous[a.Name()] = truncate(err.Error(), 1000)
		default:
			errs = append(errs, err)
		}
	}
	v.mu.Lock()
	if len(ambiguous) > 0 {
		v.ambiguous[in.Name] = slices.Sorted(maps.Keys(ambiguous))
	} else if len(errs) == 0 {
		delete(v.ambiguous, in.Name)
	}
	v.mu.Unlock()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("resolve %s/%s: %w", v.cluster, in.Name, err)
	}
	if len(ambiguous) > 0 {
		v.log.Warn("node identity is ambiguous on some arrays; a volume of the node there makes it unprotected until resolved (per-node override)",
			"node", in.Name, "arrays", slices.Sorted(maps.Keys(ambiguous)))
	}
	if len(notFound) == 0 {
		notFound = nil
	}
	if len(ambiguous) == 0 {
		ambiguous = nil
	}
	if v.unchanged(in.Name, boot, ids, notFound, ambiguous, digest) {
		return nil
	}
	if _, err := v.node.Apply(ctx, &ledger.SetIdentities{Meta: l.Meta(), Cluster: v.cluster, Node: in.Name,
		BootID: boot, Identities: ids, NotFound: notFound, Ambiguous: ambiguous, InputsDigest: digest}); err != nil {
		return fmt.Errorf("record identities of %s/%s: %w", v.cluster, in.Name, err)
	}
	v.log.Info("learned node identities", "node", in.Name, "arrays", slices.Sorted(maps.Keys(ids)),
		"notFound", slices.Sorted(maps.Keys(notFound)), "ambiguous", slices.Sorted(maps.Keys(ambiguous)))
	return nil
}

// unchanged reports whether the ledger already holds these identities
// (times of resolution aside), boot ID and unresolved arrays for the node.
func (v *View) unchanged(node, boot string, ids map[string]arrayclients.Identity, notFound, ambiguous map[string]string,
	digest string) bool {
	same := false
	v.node.Ledger().Read(func(s *ledger.State) {
		n := s.Node(v.cluster, node)
		if n == nil || n.IdentitiesAt.IsZero() || n.BootID != boot || n.InputsDigest != digest || len(n.Identities) != len(ids) ||
			!maps.Equal(n.NotFound, notFound) || !maps.Equal(n.Ambiguous, ambiguous) {
			return
		}
		for name, id := range ids {
			old, ok := n.Identities[name]
			if !ok || !sameIdentity(old, id) {
				return
			}
		}
		same = true
	})
	return same
}

// resolvedFrom reports whether the ledger holds identities for the node,
// found on every array, resolved from these very inputs (digest) at this
// boot: resolving it again would ask every array the same question. A new
// leader is handed every node's inputs it saw while it followed; this
// spares the arrays thousands of calls after each election. A node with
// an array where it was not found or was ambiguous is always asked again.
func (v *View) resolvedFrom(node, boot, digest string) bool {
	if digest == "" {
		return false
	}
	known := false
	v.node.Ledger().Read(func(s *ledger.State) {
		n := s.Node(v.cluster, node)
		known = n != nil && !n.IdentitiesAt.IsZero() && n.InputsDigest == digest && n.BootID == boot &&
			len(n.NotFound) == 0 && len(n.Ambiguous) == 0
	})
	return known
}

// inputsDigest is the hex SHA-256 of what learn resolves a node from: its
// inputs (addresses, names, CSINode IDs), each array of the cluster with
// its family, its driver instance and the node's override there, and the
// fenced build. Empty
// when they cannot be encoded (the node is then always resolved).
func (v *View) inputsDigest(in arrayclients.Node) string {
	type arrayInput struct {
		Name     string              `json:"name"`
		Family   arrayclients.Family `json:"family"`
		Override string              `json:"override,omitempty"`
		Drivers  []string            `json:"drivers,omitempty"`
	}
	arrays := make([]arrayInput, 0, len(v.arrays))
	for _, a := range v.arrays {
		arrays = append(arrays, arrayInput{Name: a.Name(), Family: a.Family(), Override: v.overrides[in.Name][a.Name()],
			Drivers: v.instances[a.Name()]})
	}
	slices.SortFunc(arrays, func(a, b arrayInput) int { return strings.Compare(a.Name, b.Name) })
	in.Override = ""
	raw, err := json.Marshal(struct {
		Build  string            `json:"build"`
		Node   arrayclients.Node `json:"node"`
		Arrays []arrayInput      `json:"arrays"`
	}{v.build, in, arrays})
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])
}

func sameIdentity(a, b arrayclients.Identity) bool {
	a.ResolvedAt, b.ResolvedAt = time.Time{}, time.Time{}
	return a.Array == b.Array && a.Family == b.Family && a.Node == b.Node && a.ObjectID == b.ObjectID &&
		a.ObjectName == b.ObjectName && a.Kind == b.Kind && slices.Equal(a.Keys, b.Keys)
}

// Leading reports whether this replica leads the group.
func (v *View) Leading() bool {
	l, _ := v.node.Leadership()
	return l.Leader
}

// Quorum reports whether the group has a leader this replica knows of.
func (v *View) Quorum() bool {
	_, ok := v.node.Leader()
	return ok
}

// Paused reports the replicated pause flag (global or for the cluster).
func (v *View) Paused(cluster string) bool {
	paused := false
	v.node.Ledger().Read(func(s *ledger.State) { paused = s.Paused(cluster) })
	return paused
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
