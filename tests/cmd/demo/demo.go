package main

import (
	"bytes"
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/fenced-project/fenced/cluster/clustertest"
	"github.com/fenced-project/fenced/tests/e2e"
	"github.com/fenced-project/fenced/tests/testbed"
)

// arraysYAML is the arrays section of the demo's fixture: one array of
// each family; every node gets an identity and volumes on each.
//
//go:embed arrays.yaml
var arraysYAML []byte

// clusterName is the test bed's cluster in fenced's configuration.
const clusterName = "demo"

// demoTiming is the detection timing: kwok renews node Leases every 4 s
// (a kubelet does every 10 s); a node is suspected after 10 s without one
// (fenced's default is 40 s) and failed once its arrays have also seen no
// connection and no I/O from it for 5 s (default 30 s), so the demo takes
// seconds, not minutes.
var demoTiming = timing{leaseSeconds: 16, heartbeatGrace: 10 * time.Second, pollInterval: 500 * time.Millisecond,
	ioWindow: 5 * time.Second}

// demo is one run: what it started and how to stop it.
type demo struct {
	o     options
	out   io.Writer
	start time.Time

	dir       string
	removeDir bool
	fenced    string // the fenced binary
	tokenFile string // the API token for mutating commands

	sp    *spawner
	cp    *testbed.ControlPlane
	nodes []*testbed.Node
	// planNode is a node running a pod of the StatefulSet (`fenced plan`
	// shows its volume).
	planNode string
	arrays   map[string]*e2e.Array
	replicas []*replica
}

func newDemo(o options, out io.Writer) *demo {
	return &demo{o: o, out: out, start: time.Now()}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// say prints a progress line with the time since the demo started.
func (d *demo) say(format string, args ...any) {
	fmt.Fprintf(d.out, "[%6.1fs] %s\n", time.Since(d.start).Seconds(), fmt.Sprintf(format, args...))
}

// run does everything up to the point where the demo waits for Ctrl-C,
// and then waits (unless --exit-after-recovery).
func (d *demo) run(ctx context.Context) error {
	if err := d.makeDir(); err != nil {
		return err
	}
	if err := d.ensureKubernetes(ctx); err != nil {
		return err
	}
	d.say("building fenced from this tree (go build ./cmd/fenced)")
	bin, err := e2e.BuildFenced(ctx, filepath.Join(d.dir, "bin"))
	if err != nil {
		return err
	}
	d.fenced = bin

	if err := d.setUp(ctx); err != nil {
		return err
	}
	if d.o.exitAfterRecovery {
		return nil
	}
	d.printHints()
	fmt.Fprintln(d.out, "Press Ctrl-C to stop everything.")
	<-ctx.Done()
	return nil
}

// setUp starts everything and, unless --keep, kills a node and prints the
// timeline of its recovery, all within --timeout.
func (d *demo) setUp(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, d.o.timeout)
	defer cancel()
	if err := d.startKubernetes(ctx); err != nil {
		return err
	}
	if err := d.startArrays(); err != nil {
		return err
	}
	if err := d.startReplicas(ctx); err != nil {
		return err
	}
	pods, err := d.deploy(ctx)
	if err != nil {
		return err
	}
	if err := d.waitIdentities(ctx); err != nil {
		return err
	}
	if len(pods) > 0 {
		d.planNode = pods[0].Spec.NodeName // a node with a volume, for the hints
	}
	if !d.o.keep {
		victimPod := pods[len(pods)/2]
		tl, err := d.killAndWatch(ctx, victimPod)
		if err != nil {
			return err
		}
		tl.summary()
	}
	return nil
}

// makeDir creates the working directory.
func (d *demo) makeDir() error {
	if d.o.dir != "" {
		abs, err := filepath.Abs(d.o.dir)
		if err != nil {
			return fmt.Errorf("--dir: %w", err)
		}
		if err := os.MkdirAll(abs, 0o755); err != nil {
			return fmt.Errorf("--dir: %w", err)
		}
		if entries, err := os.ReadDir(abs); err != nil || len(entries) > 0 {
			return fmt.Errorf("--dir: %s is not an empty directory (a new demo needs fresh etcd and Raft data)", abs)
		}
		d.dir = abs
		return nil
	}
	dir, err := os.MkdirTemp("", "demo-")
	if err != nil {
		return fmt.Errorf("create the working directory: %w", err)
	}
	d.dir, d.removeDir = dir, true
	return nil
}

// buildNotice prints a notice on the first write of the Kubernetes build
// and echoes the lines that say what was built.
type buildNotice struct {
	d       *demo
	once    sync.Once
	pending []byte
}

func (w *buildNotice) Write(p []byte) (int, error) {
	w.once.Do(func() {
		w.d.say("building the Kubernetes binaries (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok)")
		fmt.Fprintln(w.d.out, "          from their Go modules into .cache/k8s: first run only, about 10-30 minutes on 2 cores;")
		fmt.Fprintln(w.d.out, "          later runs reuse them. The build's output goes to .cache/k8s/*/build.log.")
	})
	w.pending = append(w.pending, p...)
	for {
		i := bytes.IndexByte(w.pending, '\n')
		if i < 0 {
			break
		}
		line := string(w.pending[:i])
		w.pending = w.pending[i+1:]
		if strings.HasPrefix(line, "built ") {
			w.d.say("  %s", line)
		}
	}
	return len(p), nil
}

// ensureKubernetes builds the control-plane binaries unless cached.
func (d *demo) ensureKubernetes(ctx context.Context) error {
	bins, err := testbed.EnsureBinaries(ctx, &buildNotice{d: d})
	if err != nil {
		return err
	}
	d.say("Kubernetes %s binaries ready in %s", testbed.KubernetesVersion, relToRepo(bins.Dir))
	return nil
}

// relToRepo shortens a path under the repository root.
func relToRepo(p string) string {
	root, err := testbed.RepoRoot()
	if err != nil {
		return p
	}
	if rel, err := filepath.Rel(root, p); err == nil {
		return rel
	}
	return p
}

// startKubernetes starts the control plane with a user per replica and
// adds the worker nodes.
func (d *demo) startKubernetes(ctx context.Context) error {
	ids := []string{"a", "b", "c"}
	reps, err := newReplicas(d.dir, ids)
	if err != nil {
		return err
	}
	d.replicas = reps
	var tokens []testbed.Token
	for _, r := range reps {
		tokens = append(tokens, testbed.Token{Token: r.kubeToken, User: "fenced-" + r.id, UID: "fenced-" + r.id,
			Groups: []string{"system:masters"}})
	}
	d.say("starting etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok")
	d.sp = newSpawner()
	cp, err := testbed.StartControlPlane(ctx, testbed.Options{Dir: filepath.Join(d.dir, "kubernetes"),
		NodeLeaseDurationSeconds: demoTiming.leaseSeconds, Tokens: tokens})
	if err != nil {
		return fmt.Errorf("start the control plane: %w", err)
	}
	d.cp = cp
	d.say("API server %s is up; adding %d kwok worker nodes", cp.APIServerURL, d.o.nodes)
	nodes, err := cp.AddNodes(ctx, testbed.NodeSpecs("worker", d.o.nodes)...)
	if err != nil {
		return err
	}
	d.nodes = nodes
	var names []string
	for _, n := range nodes {
		names = append(names, n.Name())
	}
	if err := cp.WaitNodesReady(ctx, names...); err != nil {
		return err
	}
	d.say("nodes Ready: %v (each with a CSINode listing the five Dell CSI drivers)", names)
	return nil
}

// startArrays starts the five simulators from one fixture built from the
// nodes' identities, with a listener per replica.
func (d *demo) startArrays() error {
	var specs []testbed.NodeSpec
	for _, n := range d.nodes {
		specs = append(specs, n.Spec)
	}
	fx, err := e2e.MakeFixture(specs, arraysYAML)
	if err != nil {
		return err
	}
	ids := make([]string, 0, len(d.replicas))
	for _, r := range d.replicas {
		ids = append(ids, r.id)
	}
	arrays, err := e2e.StartArrays(fx, ids, filepath.Join(d.dir, "array-certs"), slog.New(slog.DiscardHandler))
	if err != nil {
		return fmt.Errorf("start the array simulators: %w", err)
	}
	d.arrays = arrays
	// Each simulator keeps its own record, as an array's audit log would:
	// <dir>/arrays/<array>.jsonl.
	if err := e2e.RecordAudits(arrays, filepath.Join(d.dir, e2e.ArraysDir)); err != nil {
		return err
	}
	// The workload's volumes are made and published by the emulated CSI
	// drivers, as the Dell drivers would on real arrays.
	if err := e2e.StartDrivers(context.Background(), arrays, filepath.Join(d.dir, "array-certs"), d.cp); err != nil {
		return fmt.Errorf("start the emulated CSI drivers: %w", err)
	}
	for _, a := range sortedArrays(arrays) {
		d.say("array %-9s %-10s simulator on %s (and one listener per replica); knows all %d nodes",
			a.Name, a.Family, a.Listeners[ids[0]].URL, len(fx.Nodes))
	}
	return nil
}

// startReplicas writes the replicas' configurations and starts them.
func (d *demo) startReplicas(ctx context.Context) error {
	ca, err := clustertest.NewCA("fenced-demo")
	if err != nil {
		return fmt.Errorf("create the replicas' CA: %w", err)
	}
	d.tokenFile = filepath.Join(d.dir, "api-token")
	if err := os.WriteFile(d.tokenFile, []byte(randomHex(24)+"\n"), 0o600); err != nil {
		return fmt.Errorf("write the API token: %w", err)
	}
	env := configEnv{ca: ca, apiServer: d.cp.APIServerURL, apiCAFile: d.cp.CAFile, tokenFile: d.tokenFile,
		cluster: clusterName, timing: demoTiming, arrays: d.arrays, allReplica: d.replicas}
	for _, r := range d.replicas {
		if err := r.writeConfig(env); err != nil {
			return err
		}
	}
	for _, r := range d.replicas {
		if err := r.run(d.sp, d.fenced); err != nil {
			return err
		}
	}
	d.say("started 3 fenced replicas (Raft on %s, %s, %s with mutual TLS from a throwaway CA)",
		d.replicas[0].raftAddr, d.replicas[1].raftAddr, d.replicas[2].raftAddr)
	leader, err := d.waitLeader(ctx)
	if err != nil {
		return err
	}
	d.say("replica %s leads the Raft group; every replica is ready", leader.id)
	return nil
}

// close stops everything the demo started, children first.
func (d *demo) close() {
	var wg sync.WaitGroup
	for _, r := range d.replicas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.stop(10 * time.Second)
		}()
	}
	wg.Wait()
	for _, a := range d.arrays {
		a.Close()
	}
	if d.cp != nil {
		d.cp.Stop()
	}
	if d.sp != nil {
		d.sp.close()
	}
	if d.removeDir && d.dir != "" {
		_ = os.RemoveAll(d.dir)
	}
	d.say("stopped the replicas, the array simulators and the control plane")
}
