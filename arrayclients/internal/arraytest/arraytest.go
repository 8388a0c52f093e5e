// Package arraytest holds the test helpers the array family packages
// share: plan round trips, read-back lookups, the simulator audit checks
// and the fence benchmarks' fixtures and measurement.
package arraytest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/tests/arraysim/fixture"
	"github.com/fenced-project/fenced/tests/arraysim/simcore"
)

// DumpJSON is v as JSON, for comparing states.
func DumpJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// WritesSince lists the requests after seq that changed the simulator.
func WritesSince(srv *simcore.Server, seq int64) []simcore.AuditEntry {
	var out []simcore.AuditEntry
	for _, a := range srv.AuditSince(seq) {
		if a.Changed {
			out = append(out, a)
		}
	}
	return out
}

// RoundTrip plans, serialises and reloads the plan as the ledger would.
func RoundTrip(t testing.TB, p arrayclients.Plan) arrayclients.Plan {
	t.Helper()
	raw, err := json.Marshal(p)
	require.NoError(t, err)
	var back arrayclients.Plan
	require.NoError(t, json.Unmarshal(raw, &back))
	return back
}

// StatusLabel is an HTTP status as a subtest label ("-" for none).
func StatusLabel(status int) string {
	if status == 0 {
		return "-"
	}
	return strconv.Itoa(status)
}

// Cycle fences and unfences one node, checking each read-back.
func Cycle(ctx context.Context, a arrayclients.Adapter, n arrayclients.Node) error {
	id, err := a.Resolve(ctx, n)
	if err != nil {
		return err
	}
	plan, err := a.Plan(ctx, id, nil)
	if err != nil {
		return err
	}
	if err := a.Apply(ctx, plan); err != nil {
		return err
	}
	v, err := a.Verify(ctx, plan)
	if err != nil {
		return err
	}
	if !v.Fenced {
		return errNotFenced(v.Remaining)
	}
	if err := a.Undo(ctx, plan, arrayclients.RestoreScope{}); err != nil {
		return err
	}
	v, err = a.Verify(ctx, plan)
	if err != nil {
		return err
	}
	if !v.Restored {
		return errNotFenced(v.Missing)
	}
	return nil
}

type errNotFenced []string

func (e errNotFenced) Error() string { return "read-back mismatch: " + strings.Join(e, "; ") }

// CheckOf is the read-back of volume pv in v; the test fails without one.
func CheckOf(t testing.TB, v arrayclients.Verification, pv string) arrayclients.VolumeCheck {
	t.Helper()
	for _, c := range v.Volumes {
		if c.Volume == pv {
			return c
		}
	}
	t.Fatalf("read-back has no volume %s: %+v", pv, v.Volumes)
	return arrayclients.VolumeCheck{}
}

// RequireReadOnlyProbes checks that every write-method request the
// simulator has seen so far (resolving and probing a node) was a declared
// query: health probes run for every node each round, and a simulator
// serialises real writes, so a probe it took for a write would queue
// behind fences at scale.
// RequireReadOnlyProbes fails the test if a write-method request (a
// query sent as POST) was served by the simulator as a write.
func RequireReadOnlyProbes(t *testing.T, srv *simcore.Server) {
	t.Helper()
	for _, e := range srv.Audit() {
		if simcore.IsWrite(e.Method) {
			assert.True(t, e.Query, "%s %s is served as a write", e.Method, e.Path)
		}
	}
}

// BenchLatency is the latency injected on every request in the fence
// benchmarks.
const BenchLatency = 20 * time.Millisecond

// BenchConcurrency bounds how many nodes are fenced at once.
const BenchConcurrency = 8

// BenchNodes writes n fixture nodes.
func BenchNodes(n int) string {
	var b strings.Builder
	b.WriteString("nodes:\n")
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "  - {name: node-%02d, ip: 127.0.11.%d, fqdn: node-%02d.cluster.local, machineID: %032x, iqn: \"iqn.1994-05.com.redhat:node-%02d\", wwpns: [\"%016x\"]}\n",
			i, i, i, 0xabc000+i, i, 0x10000000c9a00000+i)
	}
	return b.String()
}

// FenceAll fences every node with at most BenchConcurrency at once
// (Plan, Apply, Verify), then undoes them outside the timer. It returns
// the sum of the per-node fence durations.
func FenceAll(b *testing.B, a arrayclients.Adapter, ids []arrayclients.Identity) time.Duration {
	b.Helper()
	ctx := context.Background()
	plans := make([]arrayclients.Plan, len(ids))
	sem := make(chan struct{}, BenchConcurrency)
	var wg sync.WaitGroup
	errs := make(chan error, len(ids))
	var mu sync.Mutex
	var total time.Duration
	for i, id := range ids {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			start := time.Now()
			defer func() { mu.Lock(); total += time.Since(start); mu.Unlock() }()
			p, err := a.Plan(ctx, id, nil)
			if err == nil {
				err = a.Apply(ctx, p)
			}
			if err == nil {
				var v arrayclients.Verification
				v, err = a.Verify(ctx, p)
				if err == nil && !v.Fenced {
					err = fmt.Errorf("node %s not fenced: %v", id.Node, v.Remaining)
				}
			}
			plans[i] = p
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(b, err)
	}
	b.StopTimer()
	undoErrs := make(chan error, len(plans))
	for _, p := range plans {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			undoErrs <- a.Undo(ctx, p, arrayclients.RestoreScope{})
		}()
	}
	wg.Wait()
	close(undoErrs)
	for err := range undoErrs {
		require.NoError(b, err)
	}
	b.StartTimer()
	return total
}

// ReportFences runs fence rounds and reports the mean latency of one
// node's fence and the wall time of a round.
func ReportFences(b *testing.B, round func() time.Duration, nodes int) {
	b.Helper()
	var sum time.Duration
	rounds := 0
	for b.Loop() {
		sum += round()
		rounds++
	}
	b.ReportMetric(float64(sum.Milliseconds())/float64(rounds*nodes), "ms/fence")
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(rounds), "ms/round")
}

// SlogTo logs everything (debug and up) as text into w.
func SlogTo(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// CounterValue reads fenced_array_requests_total{array,op,result}.
func CounterValue(t testing.TB, reg *prometheus.Registry, array, op, result string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "fenced_array_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["array"] == array && labels["op"] == op && labels["result"] == result {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// BlockRef is a block footprint volume of a plan: PV pv, array object
// object, attached or not.
func BlockRef(pv, object string, attached bool) arrayclients.VolumeRef {
	return arrayclients.VolumeRef{Volume: pv, Object: object, Protocol: arrayclients.ProtocolBlock, Attached: attached}
}

// CutOf returns the cut of PV pv in plan p, failing the test if it has
// none.
func CutOf(t testing.TB, p arrayclients.Plan, pv string) arrayclients.VolumeCut {
	t.Helper()
	for _, vc := range p.Volumes {
		if vc.Volume == pv {
			return vc
		}
	}
	t.Fatalf("plan has no volume %s", pv)
	return arrayclients.VolumeCut{}
}

// ForEachBounded runs f(0..n-1) with at most limit at once.
func ForEachBounded(n, limit int, f func(i int)) {
	sem := make(chan struct{}, limit)
	done := make(chan struct{}, n)
	for i := range n {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; done <- struct{}{} }()
			f(i)
		}()
	}
	for range n {
		<-done
	}
}

// Sessions asks an adapter for a plan's sessions through the optional
// interface.
func Sessions(t *testing.T, a arrayclients.Adapter, p arrayclients.Plan) (arrayclients.SessionReport, error) {
	t.Helper()
	sr, ok := a.(arrayclients.SessionReporter)
	require.True(t, ok, "%T reports sessions", a)
	return sr.Sessions(context.Background(), p)
}

// DottedNodes are nodes named by their FQDN, as a kubelet on a host whose
// hostname is its FQDN names them.
const DottedNodes = `
nodes:
  - {name: worker-1.dc1.example.com, ip: 127.0.10.1, fqdn: worker-1.dc1.example.com, iqn: "iqn.1994-05.com.redhat:w1", wwpns: ["10000000c9a0d001", "10000000c9a0d101"]}
  - {name: worker-10.dc1.example.com, ip: 127.0.10.10, fqdn: worker-10.dc1.example.com, iqn: "iqn.1994-05.com.redhat:w10", wwpns: ["10000000c9a0d010", "10000000c9a0d110"]}
`

// DottedNode is the node as fenced sees it: its name and the node IDs the
// drivers wrote into its CSINode (the fixture builds them by the drivers'
// rules: csi-powermax and csi-unity cut the name at its first dot).
func DottedNode(t *testing.T, doc, name string) arrayclients.Node {
	t.Helper()
	f, err := fixture.Parse([]byte(doc))
	require.NoError(t, err)
	n, ok := f.Node(name)
	require.True(t, ok, "node %s", name)
	return arrayclients.Node{Cluster: "c1", Name: n.Name, Addresses: []string{n.IP}, FQDN: n.FQDN, CSINodeIDs: n.CSINodeIDs("")}
}

// ResolveAndFence resolves node on a, plans its fence (no footprint),
// applies it and returns the identity and the read-back.
func ResolveAndFence(t *testing.T, a arrayclients.Adapter, node arrayclients.Node) (arrayclients.Identity, arrayclients.Verification) {
	t.Helper()
	ctx := context.Background()
	id, err := a.Resolve(ctx, node)
	require.NoError(t, err)
	plan, err := a.Plan(ctx, id, nil)
	require.NoError(t, err)
	require.NoError(t, a.Apply(ctx, plan))
	v, err := a.Verify(ctx, plan)
	require.NoError(t, err)
	return id, v
}

// New is arrayclients.New with only family f's constructor c: a family's
// tests build a registry of that family alone, with no other family
// package linked in.
func New(f arrayclients.Family, c arrayclients.Constructor, cfgs []arrayclients.Config, opts arrayclients.Options) (*arrayclients.Registry, error) {
	opts.Families = map[arrayclients.Family]arrayclients.Constructor{f: c}
	return arrayclients.New(cfgs, opts)
}
