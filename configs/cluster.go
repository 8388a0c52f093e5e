package configs

import (
	"fmt"
	"time"

	"github.com/fenced-project/fenced/arrayclients"
)

// Cluster is one Kubernetes cluster fenced protects.
type Cluster struct {
	// Name identifies the cluster in logs, metrics and commands; a DNS label,
	// unique in the file.
	Name string `mapstructure:"name"`
	// Kubeconfig is the path (or credential:NAME) of a kubeconfig with the
	// permissions fenced needs. Required. An unreachable API server makes
	// the cluster not ready; it never stops the daemon.
	Kubeconfig string `mapstructure:"kubeconfig"`
	// HeartbeatGrace is how long a node's kubelet heartbeat (its Lease in
	// kube-node-lease) may be stale before the node is suspected.
	// Default 40s, Kubernetes' own node-monitor grace period.
	HeartbeatGrace time.Duration `mapstructure:"heartbeatGrace"`
	// PollInterval is how often each replica probes kubelets and arrays.
	// Default 2s; less than HeartbeatGrace.
	PollInterval time.Duration `mapstructure:"pollInterval"`
	// Corroboration is what must confirm a stale heartbeat before a node is
	// declared failed: kubelet (the kubelet port is unreachable from a
	// majority of replicas), array (the arrays see no connection and no
	// I/O), either (default), both, or none (the stale heartbeat alone).
	Corroboration Corroboration `mapstructure:"corroboration"`
	// IOWindow is how far back array I/O counters are compared when deciding
	// whether a node still does I/O. Default 30s.
	IOWindow time.Duration `mapstructure:"ioWindow"`
	// StormLimit is the most nodes that may be failed at once, as a count
	// ("3") or a percentage of the cluster's nodes ("33%", rounded down but
	// never below 1, so 33% of 10 nodes is 3 and 33% of 3 nodes is 1).
	// Beyond it nothing is fenced. Default 33%.
	StormLimit StormLimit `mapstructure:"stormLimit"`
	// StormCooldown is how long fencing stays suspended after the storm
	// limit was exceeded, counted from when it is no longer exceeded.
	// Default 5m.
	StormCooldown time.Duration `mapstructure:"stormCooldown"`
	// SettlePeriod is how long a rebooted node's heartbeats must be fresh
	// before the detector calls it healthy again; the pipeline unfences it
	// once that verdict has held for SettlePeriod more (about twice this
	// after the node returns). Default 2m.
	SettlePeriod time.Duration `mapstructure:"settlePeriod"`
	// HeldPeriod is how often the leader reads back every cut of a fenced
	// node, from the fence's read-back until its unfence begins, and cuts
	// again any access that reappeared (a held fence). A change of a
	// VolumeAttachment of one of the node's volumes reads them back at
	// once. Default 30s; at least 1s.
	HeldPeriod time.Duration `mapstructure:"heldPeriod"`
	// ProtectionSelector is a Kubernetes label selector: pods matching it on
	// a fenced node are force-deleted like StatefulSet pods. Default: none.
	ProtectionSelector string `mapstructure:"protectionSelector"`
	// DryRun decides and reports, but never writes to arrays or the API
	// server. Default false.
	DryRun bool `mapstructure:"dryRun"`
	// GapScanPeriod is how often the leader reads, from the arrays, what a
	// fence of each healthy node with volumes would cut (read-only, the
	// nodes spread over the period, after every fence in the arrays' call
	// bounds), so gaps only an array read finds make the node unprotected
	// before it fails. Default 5m, at least 1s.
	GapScanPeriod time.Duration `mapstructure:"gapScanPeriod"`
	// Arrays names the entries of the top-level arrays list that serve this
	// cluster. A node is fenced on every one where it has an identity.
	Arrays []string `mapstructure:"arrays"`
	// StoragePathLoss optionally treats a node whose arrays report its
	// storage paths lost as failed, even with a healthy kubelet.
	StoragePathLoss StoragePathLoss `mapstructure:"storagePathLoss"`
	// EarlyVerdict optionally declares a node failed before HeartbeatGrace
	// when every witness agrees it is dead.
	EarlyVerdict EarlyVerdict `mapstructure:"earlyVerdict"`
	// StatusObject makes the leader keep a FencedStatus named "fenced" in
	// the cluster (deploy/kubernetes/status.yaml) with its view of the
	// cluster, for kubectl. Default false.
	StatusObject bool `mapstructure:"statusObject"`
	// NodeHealthCheck makes fenced a remediator of medik8s
	// NodeHealthCheck in the cluster.
	NodeHealthCheck NodeHealthCheck `mapstructure:"nodeHealthCheck"`
	// Nodes holds per-node identity overrides.
	Nodes []NodeOverride `mapstructure:"nodes"`
	// Drivers maps further CSI driver names to array families, for Dell
	// drivers installed under another name (X_CSI_DRIVER_NAME and the like):
	// {"csi-powerstore-b.example.com": powerstore}. Dell's default names
	// (csi-vxflexos.dellemc.com, csi-powerstore.dellemc.com,
	// csi-isilon.dellemc.com, csi-powermax.dellemc.com,
	// csi-unity.dellemc.com) are always known. A volume of a driver fenced
	// does not know makes its node unprotected.
	Drivers map[string]arrayclients.Family `mapstructure:"drivers"`
}

// DriverFamilies returns every CSI driver name the cluster's volumes may
// use with its family: Dell's defaults plus Drivers.
func (c Cluster) DriverFamilies() map[string]arrayclients.Family {
	m := arrayclients.DefaultDrivers()
	for name, f := range c.Drivers {
		m[name] = f
	}
	return m
}

// Corroboration policies.
type Corroboration string

// The corroboration policies.
const (
	CorroborateKubelet Corroboration = "kubelet"
	CorroborateArray   Corroboration = "array"
	CorroborateEither  Corroboration = "either"
	CorroborateBoth    Corroboration = "both"
	CorroborateNone    Corroboration = "none"
)

// Corroborations lists the valid policies.
func Corroborations() []Corroboration {
	return []Corroboration{CorroborateKubelet, CorroborateArray, CorroborateEither, CorroborateBoth, CorroborateNone}
}

// StoragePathLoss configures fencing on lost storage paths.
type StoragePathLoss struct {
	// Enabled turns it on. Default false.
	Enabled bool `mapstructure:"enabled"`
	// Grace is how long every array serving the node must report it
	// disconnected. Default 2m.
	Grace time.Duration `mapstructure:"grace"`
	// MaxDisconnected is the most nodes (count or percentage) that may be
	// fenced this way at once; more at once points at the storage network,
	// not the nodes. Default 1.
	MaxDisconnected StormLimit `mapstructure:"maxDisconnected"`
}

// EarlyVerdict is the early verdict on agreeing witnesses: a node whose
// Lease missed a renewal is declared failed before heartbeatGrace when its
// kubelet has been unreachable from a majority of the replicas (and from
// none) for KubeletProbes polls and every array holding part of its
// storage footprint (every array where it has an identity, for a node
// without volumes) has reported it disconnected with no I/O for IOWindow.
// Anything unknown or disagreeing waits for the grace.
type EarlyVerdict struct {
	// Enabled turns it on (true) or off (false). Unset, the default, it is
	// on wherever it can apply (see Cluster.EarlyVerdictOn): a cluster
	// with arrays whose HeartbeatGrace is longer than After.
	Enabled *bool `mapstructure:"enabled"`
	// After is the heartbeat age from which a node may be declared failed
	// early (a missed renewal: kubelets renew every 10s). Default 12s; less
	// than heartbeatGrace.
	After time.Duration `mapstructure:"after"`
	// ProbeFrom is the heartbeat age from which a node is probed for an
	// early verdict, so that the kubelet's and the arrays' runs are under
	// way when the heartbeat reaches After. Unset (zero) it is
	// DefaultEarlyProbeFrom, or After if that is shorter (see ProbeStart);
	// set, at most After.
	ProbeFrom time.Duration `mapstructure:"probeFrom"`
	// KubeletProbes is how many consecutive polls the kubelet must have
	// been unreachable. Default 3.
	KubeletProbes int `mapstructure:"kubeletProbes"`
	// IOWindow is how long the arrays must have reported the node
	// disconnected with no I/O. Default 6s.
	IOWindow time.Duration `mapstructure:"ioWindow"`
}

// NodeHealthCheck is fenced's part in medik8s NodeHealthCheck (NHC).
type NodeHealthCheck struct {
	// Enabled makes the leader watch the cluster's FencedRemediations (the
	// CRs NHC creates from a FencedRemediationTemplate) and fence the
	// nodes they name. Needs deploy/kubernetes/nhc/remediator.yaml applied
	// to the cluster. Default false.
	Enabled bool `mapstructure:"enabled"`
	// Leases makes fenced take a node's medik8s Lease (node-<node> in
	// LeaseNamespace, holder "fenced") before it fences the node on its
	// own verdict, hold it while the fence is open, and wait while
	// another holder (NodeHealthCheck, another remediator) holds it.
	// Default false.
	Leases bool `mapstructure:"leases"`
	// LeaseNamespace is where the medik8s remediators keep their node
	// Leases. Default medik8s-leases.
	LeaseNamespace string `mapstructure:"leaseNamespace"`
}

// DefaultEarlyProbeFrom is earlyVerdict.probeFrom when it is unset: a
// kubelet renews its Lease every 10 s plus up to 4 % jitter, so a heartbeat
// 11 s old is overdue.
const DefaultEarlyProbeFrom = 11 * time.Second

// ProbeStart is the heartbeat age from which a node is probed for an early
// verdict: ProbeFrom when set, else DefaultEarlyProbeFrom or After,
// whichever is shorter.
func (e EarlyVerdict) ProbeStart() time.Duration {
	if e.ProbeFrom != 0 {
		return e.ProbeFrom
	}
	return min(DefaultEarlyProbeFrom, e.After)
}

// EarlyVerdictOn reports whether early verdicts apply to the cluster, and
// why when they do not: set enabled, or left unset (the default) on a
// cluster that lists arrays with a heartbeatGrace longer than
// earlyVerdict.after. A cluster that sets enabled: true without arrays, or
// with an after not shorter than the grace, is refused by Validate.
func (c Cluster) EarlyVerdictOn() (bool, string) {
	e := c.EarlyVerdict
	switch {
	case e.Enabled != nil && !*e.Enabled:
		return false, "earlyVerdict.enabled is false"
	case e.Enabled != nil:
		return true, ""
	case len(c.Arrays) == 0:
		return false, "the cluster lists no arrays to witness a death"
	case c.HeartbeatGrace > 0 && e.After >= c.HeartbeatGrace:
		return false, fmt.Sprintf("earlyVerdict.after %v is not shorter than heartbeatGrace %v", e.After, c.HeartbeatGrace)
	}
	return true, ""
}

// NodeOverride pins a node's identity on arrays where CSINode-based
// resolution cannot find it or finds more than one candidate.
type NodeOverride struct {
	// Name is the Kubernetes node name.
	Name string `mapstructure:"name"`
	// Arrays maps an array name (one of the cluster's arrays) to the node's
	// identity there in the family's terms: PowerFlex SDC GUID, PowerStore,
	// PowerMax or Unity host name, PowerScale export client strings
	// separated by commas.
	Arrays map[string]string `mapstructure:"arrays"`
}

// DefaultCluster returns the values every clusters[] entry starts from.
func DefaultCluster() Cluster {
	return Cluster{
		HeartbeatGrace: 40 * time.Second,
		PollInterval:   2 * time.Second,
		Corroboration:  CorroborateEither,
		IOWindow:       30 * time.Second,
		StormLimit:     Percent(33),
		StormCooldown:  5 * time.Minute,
		SettlePeriod:   2 * time.Minute,
		HeldPeriod:     30 * time.Second,
		GapScanPeriod:  5 * time.Minute,
		StoragePathLoss: StoragePathLoss{
			Enabled:         false,
			Grace:           2 * time.Minute,
			MaxDisconnected: Count(1),
		},
		EarlyVerdict: EarlyVerdict{After: 12 * time.Second, KubeletProbes: 3, IOWindow: 6 * time.Second},
	}
}
