// Package replica assembles a fenced replica on a daemon.Daemon: the Raft
// group, the arrays, per cluster its API server probe, detector, identity
// learning and path-loss watch, the fencing pipeline with its API, the
// probe sharing between replicas, the /readyz checks, the /status sections
// and the operational metrics. Preflight runs the same checks without side
// effects.
package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/arrayclients/all"
	"github.com/fenced-project/fenced/cluster"
	"github.com/fenced-project/fenced/cluster/ledger"
	"github.com/fenced-project/fenced/cmd/fenced/internal/apiprobe"
	"github.com/fenced-project/fenced/cmd/fenced/internal/daemon"
	"github.com/fenced-project/fenced/cmd/fenced/internal/logging"
	"github.com/fenced-project/fenced/configs"
	"github.com/fenced-project/fenced/detector"
	"github.com/fenced-project/fenced/detector/groupview"
	"github.com/fenced-project/fenced/kube"
	"github.com/fenced-project/fenced/stonith"
)

// identityRetry is how often a new leader retries learning the identities
// of nodes whose inputs arrived while it followed and could not be resolved.
const identityRetry = 30 * time.Second

// clusterRuntime is one protected cluster inside the daemon.
type clusterRuntime struct {
	cfg   configs.Cluster
	probe *apiprobe.Prober
	// kube, writer, runner and view are nil when the cluster's clients
	// could not be built (err says why); the daemon runs on without it.
	kube       *kube.Cluster
	writer     *kube.Writer
	footprints *kube.Footprints
	// remediations are the cluster's FencedRemediations (NodeHealthCheck).
	remediations *kube.Remediations
	// leases are the medik8s node Leases fenced coordinates with.
	leases *kube.NodeLeases
	// statusObject is the cluster's FencedStatus, when configured.
	statusObject *kube.StatusObject
	runner       *detector.Runner
	view         *groupview.View
	err          error
}

// fencing is everything `fenced run` wires next to the Raft group: the
// arrays, one detector per cluster, identity learning, the fencing
// pipeline and its API.
type fencing struct {
	d        *daemon.Daemon
	node     *cluster.Node
	log      *slog.Logger
	reg      *arrayclients.Registry
	checker  *arrayChecker
	clusters []*clusterRuntime
	ctrl     *stonith.Controller // nil when no cluster could be wired
	vantage  *groupview.Sharing
	// pathMetrics is registered when a cluster enables storagePathLoss.
	pathMetrics *detector.PathMetrics
}

// clientGoLogger is the logger client-go reports a cluster's watches
// through: the cluster named on every record, at WARN at most and each
// record at most once a minute (a watch failing while an API server is
// away is the detector's doubt to report, not an error of fenced's).
func (f *fencing) clientGoLogger(cluster string) *slog.Logger {
	return logging.LibraryLogger(f.log.With("cluster", cluster), "client-go")
}

// wireFencing builds the components and plugs them into the daemon. A
// cluster whose kubeconfig cannot be used is reported (not ready, in
// /status), never fatal; bad array settings are.
func wireFencing(d *daemon.Daemon, node *cluster.Node, order *stopOrder) (*fencing, error) {
	cfg := d.Config()
	f := &fencing{d: d, node: node, log: d.Logger()}
	reg, err := all.New(d.ArrayConfigs(), arrayclients.Options{Registry: d.Registry(), Logger: f.log.With("component", "arrays"), Redactor: d.Redactor()})
	if err != nil {
		return nil, fmt.Errorf("arrays: %w", err)
	}
	f.reg = reg
	if f.vantage, err = newVantage(cfg, d.CredentialsDir(), node, f.log); err != nil {
		return nil, err
	}
	f.checker = newArrayChecker(reg, f.log)
	if err := d.AddComponent("arrays", f.checker.Run); err != nil {
		return nil, err
	}

	for _, c := range cfg.Clusters {
		f.clusters = append(f.clusters, f.newCluster(c))
	}
	if err := f.newController(); err != nil {
		return nil, err
	}
	metrics, err := detector.NewMetrics(d.Registry())
	if err != nil {
		return nil, fmt.Errorf("register detector metrics: %w", err)
	}
	for _, cr := range f.clusters {
		if err := d.AddComponent("apiprobe/"+cr.cfg.Name, cr.probe.Run); err != nil {
			return nil, err
		}
		if cr.kube == nil {
			continue
		}
		fp := cr.footprints
		kubeLog := f.clientGoLogger(cr.cfg.Name)
		if err := d.AddComponent("footprints/"+cr.cfg.Name, func(ctx context.Context) error {
			ctx = kube.ContextWithLogger(ctx, kubeLog)
			fp.Start(ctx)
			// Once synced, scan every PersistentVolume for configuration
			// drift at once rather than at the next resync.
			if fp.WaitForSync(ctx) && f.ctrl != nil {
				f.ctrl.VolumesChanged()
			}
			<-ctx.Done()
			return nil
		}); err != nil {
			return nil, err
		}
		if obj := cr.statusObject; obj != nil {
			if err := d.AddComponent("statusobject/"+cr.cfg.Name, func(ctx context.Context) error {
				f.publishStatusObject(ctx, cr, obj)
				return nil
			}); err != nil {
				return nil, err
			}
		}
		if rem := cr.remediations; rem != nil {
			if err := d.AddComponent("remediations/"+cr.cfg.Name, func(ctx context.Context) error {
				rem.Start(ctx)
				return nil
			}); err != nil {
				return nil, err
			}
		}
		if err := f.newRunner(cr, metrics); err != nil {
			return nil, err
		}
		runner := cr.runner
		if err := order.add(d, "detector/"+cr.cfg.Name, func(ctx context.Context) error {
			return runner.Run(kube.ContextWithLogger(ctx, kubeLog))
		}); err != nil {
			return nil, err
		}
	}
	if err := order.add(d, "identities", f.learnAsLeader); err != nil {
		return nil, err
	}
	if err := order.add(d, "vantage", f.vantage.Run); err != nil {
		return nil, err
	}
	if err := f.vantageRoute(); err != nil {
		return nil, err
	}
	if f.ctrl != nil {
		if err := order.add(d, "stonith", func(ctx context.Context) error {
			f.ctrl.FollowCluster(ctx, node)
			return nil
		}); err != nil {
			return nil, err
		}
		if err := d.AddComponent("protection", func(ctx context.Context) error {
			f.ctrl.WatchProtection(ctx)
			return nil
		}); err != nil {
			return nil, err
		}
		if err := f.routes(); err != nil {
			return nil, err
		}
	}
	f.readiness()
	f.statusProviders()
	if err := d.Registry().Register(newOpsCollector(cfg, node.Ledger(), d.CredentialsDir(), f.log)); err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	return f, nil
}

// newCluster builds a cluster's API access. Errors are kept, not returned.
func (f *fencing) newCluster(c configs.Cluster) *clusterRuntime {
	cr := &clusterRuntime{cfg: c, probe: apiprobe.New(c, f.d.CredentialsDir(), f.log)}
	path, err := configs.ResolveFile(c.Kubeconfig, f.d.CredentialsDir())
	if err == nil {
		var clients *kube.Clients
		if clients, err = kube.NewClients(kube.Config{Kubeconfig: path}); err == nil {
			cr.kube = kube.NewClusterFromClients(c.Name, clients, nil)
			cr.writer = kube.NewWriter(clients.Fence, "fenced", f.d.Config().Replica.ID, nil)
			cr.footprints, err = kube.NewFootprints(clients.Watch)
			if c.StatusObject {
				cr.statusObject = kube.NewStatusObject(clients.Dynamic)
			}
			if c.NodeHealthCheck.Leases {
				cr.leases = kube.NewNodeLeases(clients.Fence, c.NodeHealthCheck.LeaseNamespace, nil)
			}
			if c.NodeHealthCheck.Enabled {
				cr.remediations = kube.NewRemediations(clients.DynamicWatch, clients.Dynamic,
					f.log.With("component", "remediations", "cluster", c.Name))
			}
		}
	}
	if err != nil {
		cr.err = fmt.Errorf("cluster %s: kubeconfig: %w", c.Name, err)
		f.log.Error("cluster not protected: cannot build its API clients", "cluster", c.Name, "error", err)
		return cr
	}
	var adapters []arrayclients.Adapter
	for _, name := range c.Arrays {
		if a, ok := f.reg.Get(name); ok {
			adapters = append(adapters, a)
		}
	}
	kc := cr.kube
	bootID := func(node string) string {
		if n, ok := kc.Node(node); ok {
			return n.Status.NodeInfo.BootID
		}
		return ""
	}
	b := f.d.Build()
	cr.view = groupview.NewView(c, f.d.Config().ArrayDrivers(c), f.node, adapters, bootID, b.Version+" "+b.Revision, f.log.With("component", "identities"))
	return cr
}

// newController builds the fencing pipeline over the clusters that have
// API clients.
func (f *fencing) newController() error {
	cfg := f.d.Config()
	arrays := map[string]stonith.Array{}
	for _, a := range f.reg.Adapters() {
		arrays[a.Name()] = a
	}
	var timeout time.Duration
	callLimits := map[string]int{}
	for _, a := range cfg.Arrays {
		timeout = max(timeout, a.RequestTimeout)
		if arrays[a.Name] != nil {
			callLimits[a.Name] = a.MaxConcurrentCalls
		}
	}
	var clusters []stonith.ClusterConfig
	for _, cr := range f.clusters {
		if cr.kube == nil {
			continue
		}
		var rem stonith.RemediationSource
		if cr.remediations != nil {
			rem = cr.remediations
		}
		var leases stonith.NodeLeaseSource
		if cr.leases != nil {
			leases = cr.leases
		}
		clusters = append(clusters, stonith.ClusterConfig{
			Remediations: rem, NodeLeases: leases,
			Name: cr.cfg.Name, Kube: cr.writer, DryRun: cr.cfg.DryRun, SettlePeriod: cr.cfg.SettlePeriod,
			HeldPeriod: cr.cfg.HeldPeriod, GapScanPeriod: cr.cfg.GapScanPeriod,
			ProtectionSelector: cr.cfg.ProtectionSelector,
			Footprints:         cr.footprints, Arrays: cr.cfg.Arrays, Drivers: cr.cfg.DriverFamilies(),
			Detector: stonith.DetectorStatusFunc(func() detector.Status {
				if cr.runner == nil {
					return detector.Status{Cluster: cr.cfg.Name}
				}
				return cr.runner.Status()
			}),
		})
	}
	if len(clusters) == 0 {
		if len(cfg.Clusters) > 0 {
			f.log.Error("no cluster could be wired: the fencing pipeline does not run")
		}
		return nil
	}
	ctrl, err := stonith.New(stonith.Config{
		ReplicaID: cfg.Replica.ID, Ledger: f.node.Ledger(), Arrays: arrays, Clusters: clusters,
		Registry: f.d.Registry(), Logger: f.log, ArrayTimeout: timeout, ArrayCallLimits: callLimits,
	})
	if err != nil {
		return fmt.Errorf("fencing pipeline: %w", err)
	}
	f.ctrl = ctrl
	for _, cr := range f.clusters {
		if cr.footprints != nil {
			name := cr.cfg.Name
			cr.footprints.OnChange(func(node string) { ctrl.FootprintChanged(name, node) })
			cr.footprints.OnAttachmentChange(func(ch kube.AttachmentChange) { ctrl.AttachmentChanged(name, ch) })
			cr.footprints.OnPVChange(ctrl.VolumesChanged)
		}
		if cr.remediations != nil {
			name := cr.cfg.Name
			cr.remediations.OnChange(func(node string) { ctrl.RemediationChanged(name, node) })
		}
	}
	return nil
}

// newRunner builds a cluster's detector.
func (f *fencing) newRunner(cr *clusterRuntime, metrics *detector.Metrics) error {
	pol, err := detectorPolicy(cr.cfg)
	if err != nil {
		return err
	}
	if on, why := cr.cfg.EarlyVerdictOn(); on {
		f.log.Info("early verdicts on", "cluster", cr.cfg.Name, "after", pol.Early.After, "probeFrom", pol.Early.ProbeFrom, "kubeletProbes", pol.Early.KubeletProbes, "ioWindow", pol.Early.IOWindow)
	} else {
		f.log.Info("early verdicts off: every verdict waits for the heartbeat grace", "cluster", cr.cfg.Name, "reason", why)
	}
	arrays := map[string]detector.HealthSource{}
	for _, name := range cr.cfg.Arrays {
		if a, ok := f.reg.Get(name); ok {
			arrays[name] = a
		}
	}
	rc := detector.RunnerConfig{
		Cluster: cr.cfg.Name, Replica: f.d.Config().Replica.ID, Replicas: len(f.d.Config().Peers) + 1,
		Policy: pol, API: cr.kube, Arrays: arrays,
		Identities: cr.view, Vantage: cr.view, Sink: cr.view, Guard: cr.view, Lead: cr.view,
		Metrics: metrics, Logger: f.log.With("component", "detector"),
	}
	if f.ctrl != nil {
		rc.Publisher = f.ctrl
		rc.Footprints = f.ctrl
	}
	var others []string
	for _, p := range f.d.Config().Peers {
		others = append(others, p.ID)
	}
	if len(others) > 0 {
		cr.view.ShareProbes(f.vantage.AddCluster(cr.cfg.Name, others, pol), f.vantage.Queue)
	}
	if err := f.pathLoss(cr, pol, &rc); err != nil {
		return err
	}
	r, err := detector.NewRunner(rc)
	if err != nil {
		return fmt.Errorf("detector of cluster %s: %w", cr.cfg.Name, err)
	}
	cr.runner = r
	return nil
}

// learnAsLeader learns, on each leadership of this replica, the
// identities of nodes whose inputs arrived while it followed.
func (f *fencing) learnAsLeader(ctx context.Context) error {
	for {
		l, changed := f.node.Leadership()
		if l.Leader {
			lctx, cancel := context.WithCancel(l.Ctx)
			stop := context.AfterFunc(ctx, cancel)
			l.Ctx = lctx
			var wg sync.WaitGroup
			for _, cr := range f.clusters {
				if cr.view != nil {
					wg.Go(func() { cr.view.Drain(l, identityRetry) })
				}
			}
			wg.Wait()
			stop()
			cancel()
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil
		}
	}
}

// readiness adds the /readyz checks (see README, "Readiness"): on every
// replica each cluster's API server answers and its detector trusts its
// own view; on the leader also every array answers.
func (f *fencing) readiness() {
	for _, cr := range f.clusters {
		f.d.AddReadinessCheck("cluster/"+cr.cfg.Name, func(ctx context.Context) error {
			if cr.err != nil {
				return cr.err
			}
			if err := cr.probe.Check(ctx); err != nil {
				return err
			}
			st := cr.runner.Status()
			switch {
			case st.EvaluatedAt.IsZero():
				return errors.New("detector has not evaluated the cluster yet")
			case st.Doubt != "":
				return fmt.Errorf("detector doubts its view of the cluster: %s", st.Doubt)
			}
			return nil
		})
	}
	if len(f.reg.Adapters()) > 0 {
		f.d.AddReadinessCheck("arrays", func(ctx context.Context) error {
			if !f.node.IsLeader() {
				return nil // a follower writes to no array; /status shows what it reaches
			}
			return f.checker.Check(ctx)
		})
	}
}

// Wire adds the replica's components to the daemon: the Raft group, the
// arrays, and per cluster its API server probe, detector and identity
// learning, then the fencing pipeline that runs while this replica leads,
// its API under /v1/, the /readyz checks and the /status sections. A
// cluster that cannot be reached makes the replica not ready rather than
// stopping it. On SIGTERM the detectors and the pipeline stop first, then
// Raft, then HTTP. It returns the Raft group's ledger, which the command
// serves its history endpoint from.
func Wire(d *daemon.Daemon) (*ledger.FSM, error) {
	order := &stopOrder{}
	node, err := wireRaft(d, order)
	if err != nil {
		return nil, err
	}
	f, err := wireFencing(d, node, order)
	if err != nil {
		_ = node.Close()
		return nil, err
	}
	probers := make([]*apiprobe.Prober, 0, len(f.clusters))
	for _, cr := range f.clusters {
		probers = append(probers, cr.probe)
	}
	if err := d.Registry().Register(apiprobe.NewCollector(probers)); err != nil {
		_ = node.Close()
		return nil, fmt.Errorf("register API server metrics: %w", err)
	}
	d.Logger().Debug("wired", "clusters", len(f.clusters), "arrays", len(d.ArrayConfigs()), "pipeline", f.ctrl != nil)
	return node.Ledger(), nil
}
