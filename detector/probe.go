package detector

import (
	"context"
	"slices"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/fenced-project/fenced/arrayclients"
)

// probe starts one probe per named node that is not being probed already,
// at most ProbeConcurrency at once; of the nodes also in witnessesOnly
// (sorted) it asks only the early verdict's witness arrays. It runs on the
// loop goroutine.
func (r *Runner) probe(ctx context.Context, names, witnessesOnly []string) {
	for _, name := range names {
		_, onlyWitnesses := slices.BinarySearch(witnessesOnly, name)
		r.mu.Lock()
		busy := r.inflight[name]
		if !busy {
			r.inflight[name] = true
		}
		r.mu.Unlock()
		if busy {
			continue
		}
		r.probes.Go(func() {
			defer func() {
				r.mu.Lock()
				delete(r.inflight, name)
				r.mu.Unlock()
			}()
			select {
			case r.sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			defer func() { <-r.sem }()
			r.probeNode(ctx, name, onlyWitnesses)
		})
	}
}

// probeNode probes the node's kubelet port, reads its Lease back from the
// API server and asks the arrays (only the early verdict's witnesses when
// onlyWitnesses is set), all at once, each bounded by the probe timeout,
// and records what it saw.
func (r *Runner) probeNode(ctx context.Context, name string, onlyWitnesses bool) {
	pctx, cancel := context.WithTimeout(ctx, r.cfg.Policy.ProbeTimeout)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { r.probeKubelet(ctx, pctx, name) })
	wg.Go(func() { r.readLease(pctx, name) })
	wg.Go(func() { r.probeArrays(pctx, name, onlyWitnesses, r.cfg.Lead == nil || r.cfg.Lead.Leading()) })
	wg.Wait()
	r.enqueue(func(*Machine) {}, false)
}

func (r *Runner) probeKubelet(ctx, pctx context.Context, name string) {
	node, ok := r.cfg.API.Node(name)
	if !ok {
		return
	}
	addr, err := r.cfg.API.ProbeKubelet(pctx, node)
	if ctx.Err() != nil {
		return
	}
	obs := ProbeObservation{Cluster: r.cfg.Cluster, Node: name, Replica: r.cfg.Replica, Reachable: err == nil, Address: addr, At: r.clk.Now()}
	if err != nil {
		obs.Error = err.Error()
	}
	r.enqueue(func(m *Machine) { m.ObserveProbe(obs) }, false)
	if s := r.cfg.Sink; s != nil {
		if err := s.RecordProbe(ctx, obs); err != nil && ctx.Err() == nil {
			r.log.Warn("record kubelet probe", "node", name, "error", err)
		}
	}
}

func (r *Runner) readLease(pctx context.Context, name string) {
	l, err := r.cfg.API.ReadLease(pctx, name)
	obs := LeaseObservation{Node: name, ReadBack: true, ObservedAt: r.clk.Now()}
	switch {
	case err == nil:
		obs.fromLease(l)
	case apierrors.IsNotFound(err):
		obs.Deleted = true
	default:
		r.log.Debug("lease read-back", "node", name, "error", err)
		return
	}
	r.enqueue(func(m *Machine) { m.ObserveLease(obs) }, false)
}

// probeArrays records the node's identities and witness arrays and, when
// ask is set (this replica leads), asks its arrays for their view of it:
// each but those whose sweep has just given the node a complete sample
// (sweptSamples).
func (r *Runner) probeArrays(pctx context.Context, name string, onlyWitnesses, ask bool) {
	if r.cfg.Identities == nil {
		return
	}
	ids, idObs := r.identities(name)
	r.enqueue(func(m *Machine) { m.ObserveIdentities(idObs) }, false)
	if !ask {
		return
	}
	// Probed only for an early verdict, a node's other arrays cannot
	// change it: ask the witnesses alone (none when the footprint cannot
	// be witnessed whole, which rules an early verdict out).
	witnesses, _ := witnessArrays(idObs)
	var wg sync.WaitGroup
	for _, id := range ids {
		src, ok := r.cfg.Arrays[id.Array]
		if !ok || (onlyWitnesses && !slices.Contains(witnesses, id.Array)) {
			continue
		}
		if r.swept.fresh(id.Array, name, r.clk.Now(), sweptFresh(r.cfg.Policy)) {
			continue // the leader's sweep has just read the same (sweptSamples)
		}
		wg.Go(func() {
			h, err := src.Health(pctx, id)
			obs := ArrayObservation{Node: name, Array: id.Array, Health: h, ObservedAt: r.clk.Now()}
			if err != nil {
				obs.Err = err.Error()
			}
			r.enqueue(func(m *Machine) { m.ObserveArray(obs) }, false)
		})
	}
	wg.Wait()
}

// identities reads the node's identities and its witness arrays.
func (r *Runner) identities(name string) ([]arrayclients.Identity, IdentityObservation) {
	ids, ambiguous := r.cfg.Identities.NodeIdentities(r.cfg.Cluster, name)
	idObs := IdentityObservation{Node: name, Ambiguous: ambiguous, ObservedAt: r.clk.Now()}
	for _, id := range ids {
		idObs.Arrays = append(idObs.Arrays, id.Array)
	}
	if fs := r.cfg.Footprints; fs != nil {
		idObs.Footprint, idObs.FootprintComplete = fs.WitnessArrays(r.cfg.Cluster, name)
		idObs.FootprintRead = true
	}
	return ids, idObs
}
