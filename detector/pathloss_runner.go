package detector

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
)

// ProtectedArrays names, for a node, the arrays holding the volumes of its
// protected pods (StatefulSet pods and pods matching the cluster's
// protection selector). cmd/fenced implements it with kube lookups.
type ProtectedArrays interface {
	ProtectedArrays(ctx context.Context, node string) ([]string, error)
}

// PathLossConfig turns on the storage path loss path of a Runner.
type PathLossConfig struct {
	// Policy must be enabled and have its defaults filled (WithDefaults).
	Policy  PathLossPolicy
	Volumes ProtectedArrays
	Metrics *PathMetrics
}

// PathMetrics holds fenced_storage_storm_guard_active{cluster,array}.
type PathMetrics struct {
	storm *prometheus.GaugeVec
}

// NewPathMetrics registers the storage path metrics on reg.
func NewPathMetrics(reg prometheus.Registerer) (*PathMetrics, error) {
	m := &PathMetrics{storm: prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "fenced_storage_storm_guard_active",
		Help: "1 while the storage storm guard of an array blocks storage path loss verdicts (too many nodes reported disconnected, or the array's API failing).",
	}, []string{"cluster", "array"})}
	if err := reg.Register(m.storm); err != nil {
		return nil, fmt.Errorf("register storage path metrics: %w", err)
	}
	return m, nil
}

// pathRunner is the I/O side of the path for one Runner: it samples every
// node's health on every array holding an identity of it each sample
// interval, looks up the protected arrays of nodes with a lost run, and
// merges the PathMachine's verdicts into each evaluation.
type pathRunner struct {
	r   *Runner
	cfg PathLossConfig
	pm  *PathMachine // loop goroutine only

	mu    sync.Mutex
	need  []string
	storm map[string]bool // loop goroutine only
}

func newPathRunner(r *Runner, cfg PathLossConfig) (*pathRunner, error) {
	pm, err := NewPathMachine(cfg.Policy)
	if err != nil {
		return nil, fmt.Errorf("detector %s: %w", r.cfg.Cluster, err)
	}
	return &pathRunner{r: r, cfg: cfg, pm: pm, storm: map[string]bool{}}, nil
}

// merge runs on the loop goroutine.
func (p *pathRunner) merge(res Result, self Self, now time.Time) (Result, []StorageStormState) {
	out, storms := p.pm.Merge(res, self, now)
	need := p.pm.NeedVolumes()
	p.mu.Lock()
	p.need = need
	p.mu.Unlock()
	for _, s := range storms {
		if s.Active != p.storm[s.Array] {
			if s.Active {
				p.r.log.Error("STORAGE STORM GUARD ACTIVE: the array or its network failed, not the nodes; no node will be fenced for a lost storage path on it",
					"array", s.Array, "reason", s.Reason, "disconnected", s.Disconnected, "limit", s.Limit, "nodes", s.Nodes, "error", s.Error)
			} else {
				p.r.log.Warn("storage storm guard released; lost-path runs on the array start over", "array", s.Array)
			}
			p.storm[s.Array] = s.Active
		}
		if m := p.cfg.Metrics; m != nil {
			v := 0.0
			if s.Active {
				v = 1
			}
			m.storm.WithLabelValues(p.r.cfg.Cluster, s.Array).Set(v)
		}
	}
	return out, storms
}

// run samples until ctx ends.
func (p *pathRunner) run(ctx context.Context) {
	t := p.r.clk.NewTicker(p.cfg.Policy.SampleInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		p.lookup(ctx)
		p.sample(ctx)
		p.r.enqueue(func(*Machine) {}, true)
	}
}

// lookup refreshes the protected arrays of the nodes with a lost run.
func (p *pathRunner) lookup(ctx context.Context) {
	p.mu.Lock()
	need := slices.Clone(p.need)
	p.mu.Unlock()
	if p.cfg.Volumes == nil {
		return
	}
	for _, name := range need {
		cctx, cancel := context.WithTimeout(ctx, p.r.cfg.Policy.ProbeTimeout*2)
		arrays, err := p.cfg.Volumes.ProtectedArrays(cctx, name)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				p.r.log.Warn("look up the arrays of a node's protected volumes", "node", name, "error", err)
			}
			continue
		}
		at := p.r.clk.Now()
		p.r.enqueue(func(*Machine) { p.pm.ObserveProtected(name, arrays, at) }, false)
	}
}

// sample asks every array for every node it holds an identity of.
func (p *pathRunner) sample(ctx context.Context) {
	r := p.r
	if r.cfg.Identities == nil {
		return
	}
	r.mu.Lock()
	names := make([]string, 0, len(r.verdicts))
	for n := range r.verdicts {
		names = append(names, n)
	}
	r.mu.Unlock()
	slices.Sort(names)
	type tally struct {
		samples, errors int
		first           string
	}
	var mu sync.Mutex
	sweeps := map[string]*tally{}
	for a := range r.cfg.Arrays {
		sweeps[a] = &tally{}
	}
	var g errgroup.Group
	g.SetLimit(r.cfg.ProbeConcurrency)
sweep:
	for _, name := range names {
		ids, _ := r.cfg.Identities.NodeIdentities(r.cfg.Cluster, name)
		for _, id := range ids {
			src, ok := r.cfg.Arrays[id.Array]
			if !ok {
				continue
			}
			if ctx.Err() != nil {
				break sweep
			}
			g.Go(func() error {
				if ctx.Err() != nil {
					return nil // the sweep ended while this sample waited for a slot
				}
				cctx, cancel := context.WithTimeout(ctx, r.cfg.Policy.ProbeTimeout)
				h, err := src.Health(cctx, id)
				cancel()
				if ctx.Err() != nil {
					return nil
				}
				o := ArrayObservation{Node: name, Array: id.Array, Health: h, ObservedAt: r.clk.Now()}
				mu.Lock()
				s := sweeps[id.Array]
				s.samples++
				if err != nil {
					o.Err = err.Error()
					s.errors++
					if s.first == "" {
						s.first = o.Err
					}
				}
				mu.Unlock()
				r.enqueue(func(*Machine) { p.pm.ObserveSample(o) }, false)
				return nil
			})
		}
	}
	_ = g.Wait() // every sample returns nil; failures are counted in sweeps
	if ctx.Err() != nil {
		return
	}
	at := r.clk.Now()
	for a, s := range sweeps {
		sw := ArraySweep{Array: a, Samples: s.samples, Errors: s.errors, At: at}
		if s.samples > 0 && s.errors == s.samples {
			sw.Err = s.first
		}
		if s.errors > 0 {
			r.log.Debug("storage path sampling errors", "array", a, "errors", s.errors, "samples", s.samples, "first", s.first)
		}
		r.enqueue(func(*Machine) { p.pm.ObserveSweep(sw) }, false)
	}
}
