package stonith

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/clock"

	"github.com/fenced-project/fenced/arrayclients"
)

// Config wires a Controller. ReplicaID, Ledger, Arrays and Clusters are
// required.
type Config struct {
	// ReplicaID is this replica's ID, written as the author of commands.
	ReplicaID string
	// Ledger reads the replicated ledger (the cluster's *ledger.FSM).
	Ledger LedgerReader
	// Arrays maps a configured array name to its adapter.
	Arrays map[string]Array
	// Clusters are the protected clusters.
	Clusters []ClusterConfig
	// Registry receives the metrics; nil registers none.
	Registry *prometheus.Registry
	Logger   *slog.Logger
	Clock    clock.WithTicker

	// ArrayTimeout bounds one array call (default 10s, the adapters'
	// request timeout). It is also added to the previous leader's lease
	// before a conflicting step.
	ArrayTimeout time.Duration
	// ArrayAttempts is how often one reconcile tries an array call before
	// it records the failure and requeues (default 3), with ArrayBackoff
	// (default 500ms, doubled each time, plus up to a tenth of jitter) in
	// between.
	ArrayAttempts int
	ArrayBackoff  time.Duration
	// ArrayConcurrency bounds the arrays worked on at once for one node
	// (default 4).
	ArrayConcurrency int
	// ArrayCallLimits bounds the pipeline's calls in flight to each array
	// across all nodes, by array name; arrays not named get
	// DefaultArrayCallLimit. Calls over the bound queue in fenced.
	ArrayCallLimits map[string]int
	// KubeTimeout bounds one API server call (default 10s).
	KubeTimeout time.Duration
	// Workers is the number of nodes reconciled at once (default 64). A
	// reconcile mostly waits on arrays, the API server and Raft commits,
	// so many nodes dying at once need many workers; ArrayCallLimits keeps
	// the arrays' load bounded however many there are.
	Workers int
	// RetryBase and RetryMax bound the per-node exponential requeue delay
	// after a failed reconcile (defaults 1s and 1m).
	RetryBase time.Duration
	RetryMax  time.Duration
	// OutOfServiceSettle is how long an unfence waits after it removed its
	// out-of-service taint before it gives any array access back (default
	// 10s): Kubernetes' pod garbage collector and attach/detach controller
	// read that taint from informer caches and can still force-delete the
	// node's pods or force-detach its volumes for a while after it is gone
	// (kubernetes#142331). fenced's NoSchedule taint stays on meanwhile.
	OutOfServiceSettle time.Duration
	// TaintEvictionWait bounds how long an eviction waits, after the
	// out-of-service taint, for Kubernetes' taint-eviction controller to
	// delete the node's pods that do not tolerate it (default 5s) before
	// fenced force-deletes them. That controller deletes by name, without
	// a UID precondition, and retries: had fenced's force-delete come
	// first, its delete could hit the StatefulSet's replacement pod of the
	// same name on a healthy node. A cluster that runs without that
	// controller pays this bound once per fence.
	TaintEvictionWait time.Duration
	// Resync is how often every open record and failed node is reconciled
	// even without an event (default 5s): it is what notices a settled
	// node or a cleared array fault.
	Resync time.Duration
	// Hook, when set, is called at the named points of the pipeline; if it
	// returns false the reconcile stops there as if the process had died.
	// For tests only.
	Hook func(p Point) bool
}

// ClusterConfig is one protected cluster.
type ClusterConfig struct {
	// Name is the configured cluster name.
	Name string
	// Kube is the cluster's API access (a *kube.Writer).
	Kube KubeAPI
	// Detector is this replica's detector of the cluster (a
	// *detector.Runner); nil means no doubt and no storm are known, so
	// only the direct API server check guards.
	Detector DetectorStatus
	// ProtectionSelector selects pods force-deleted like StatefulSet pods;
	// empty selects none.
	ProtectionSelector string
	// SettlePeriod is how long a rebooted node must stay healthy before it
	// is unfenced (default 2m).
	SettlePeriod time.Duration
	// HeldPeriod is how often the leader reads back every cut of a fenced
	// node until its unfence begins (default DefaultHeldPeriod); a change
	// of an attachment of one of its volumes reads them back at once.
	HeldPeriod time.Duration
	// DryRun decides and reports without writing anything.
	DryRun bool
	// GapScanPeriod is how often the leader reads from the arrays the plan
	// of every healthy node with a storage footprint, the nodes spread
	// over the period, so the gaps only an array read finds are shown
	// while the node is healthy (default DefaultGapScanPeriod).
	GapScanPeriod time.Duration
	// Footprints gives each node's storage footprint as Kubernetes shows
	// it (a *kube.Footprints). Required: without it no fence could prove
	// it cut every volume of a node.
	Footprints FootprintSource
	// Remediations are the cluster's FencedRemediations, the requests of
	// medik8s NodeHealthCheck (see remediation.go); nil: none are watched.
	Remediations RemediationSource
	// NodeLeases are the medik8s node Leases fenced takes before fencing
	// on its own verdict; nil: fenced does not coordinate.
	NodeLeases NodeLeaseSource
	// Arrays names the configured arrays serving the cluster (volumes are
	// placed on these only); empty means every array of Config.Arrays.
	Arrays []string
	// Drivers maps CSI driver names to array families; nil means Dell's
	// default names (arrayclients.DefaultDrivers).
	Drivers map[string]arrayclients.Family
}

// DefaultArrayCallLimit is the default bound on the pipeline's calls in
// flight to one array.
const DefaultArrayCallLimit = 8

// DefaultConfig returns a Config with every default set and nothing wired.
func DefaultConfig() Config {
	return Config{
		ArrayTimeout: 10 * time.Second, ArrayAttempts: 3, ArrayBackoff: 500 * time.Millisecond,
		ArrayConcurrency: 4, KubeTimeout: 10 * time.Second, Workers: 64,
		RetryBase: time.Second, RetryMax: time.Minute, Resync: 5 * time.Second,
		OutOfServiceSettle: 10 * time.Second, TaintEvictionWait: 5 * time.Second,
	}
}

// withDefaults fills zero values from DefaultConfig.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	setDur := func(v *time.Duration, def time.Duration) {
		if *v <= 0 {
			*v = def
		}
	}
	setInt := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	setDur(&c.ArrayTimeout, d.ArrayTimeout)
	setDur(&c.ArrayBackoff, d.ArrayBackoff)
	setDur(&c.KubeTimeout, d.KubeTimeout)
	setDur(&c.RetryBase, d.RetryBase)
	setDur(&c.RetryMax, d.RetryMax)
	setDur(&c.Resync, d.Resync)
	setDur(&c.OutOfServiceSettle, d.OutOfServiceSettle)
	setDur(&c.TaintEvictionWait, d.TaintEvictionWait)
	setInt(&c.ArrayAttempts, d.ArrayAttempts)
	setInt(&c.ArrayConcurrency, d.ArrayConcurrency)
	setInt(&c.Workers, d.Workers)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	for i := range c.Clusters {
		if c.Clusters[i].SettlePeriod <= 0 {
			c.Clusters[i].SettlePeriod = 2 * time.Minute
		}
		if c.Clusters[i].HeldPeriod <= 0 {
			c.Clusters[i].HeldPeriod = DefaultHeldPeriod
		}
		if c.Clusters[i].GapScanPeriod <= 0 {
			c.Clusters[i].GapScanPeriod = DefaultGapScanPeriod
		}
	}
	return c
}

// validate names the first bad field.
func (c Config) validate() error {
	var errs []error
	if c.ReplicaID == "" {
		errs = append(errs, errors.New("stonith: replicaID is required"))
	}
	if c.Ledger == nil {
		errs = append(errs, errors.New("stonith: ledger is required"))
	}
	for name, a := range c.Arrays {
		if a == nil {
			errs = append(errs, fmt.Errorf("stonith: arrays[%s]: adapter is nil", name))
		} else if a.Name() != name {
			errs = append(errs, fmt.Errorf("stonith: arrays[%s]: adapter is named %q", name, a.Name()))
		}
	}
	for name, n := range c.ArrayCallLimits {
		switch {
		case c.Arrays[name] == nil:
			errs = append(errs, fmt.Errorf("stonith: arrayCallLimits[%s]: no such array", name))
		case n < 1:
			errs = append(errs, fmt.Errorf("stonith: arrayCallLimits[%s]: %d is below 1", name, n))
		}
	}
	seen := map[string]bool{}
	for i, cl := range c.Clusters {
		switch {
		case cl.Name == "":
			errs = append(errs, fmt.Errorf("stonith: clusters[%d].name is required", i))
		case seen[cl.Name]:
			errs = append(errs, fmt.Errorf("stonith: clusters[%d].name %q is listed twice", i, cl.Name))
		}
		seen[cl.Name] = true
		if cl.Kube == nil {
			errs = append(errs, fmt.Errorf("stonith: clusters[%s].kube is required", cl.Name))
		}
		if cl.Footprints == nil {
			errs = append(errs, fmt.Errorf("stonith: clusters[%s].footprints is required", cl.Name))
		}
		for _, a := range cl.Arrays {
			if c.Arrays[a] == nil {
				errs = append(errs, fmt.Errorf("stonith: clusters[%s].arrays: no array %q", cl.Name, a))
			}
		}
		if _, err := labels.Parse(cl.ProtectionSelector); err != nil {
			errs = append(errs, fmt.Errorf("stonith: clusters[%s].protectionSelector %q: %w", cl.Name, cl.ProtectionSelector, err))
		}
	}
	if len(c.Clusters) == 0 {
		errs = append(errs, errors.New("stonith: at least one cluster is required"))
	}
	return errors.Join(errs...)
}
