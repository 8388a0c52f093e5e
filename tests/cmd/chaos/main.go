// Command chaos runs fenced under a seeded random schedule of faults and
// checks the safety invariants over what happened.
//
//	go run ./tests/cmd/chaos -seed 42 -duration 30m
//
// It starts the end-to-end harness (tests/e2e: three fenced processes
// built from this tree, the test bed, the five array simulators, fault
// proxies), injects faults for the duration — replica kill -9 and restart,
// partitions, apiserver cuts and restarts, array outages, node deaths,
// hangs, reboots and returns without reboot — then heals everything, waits
// for every fence to be undone and runs the invariant checker.
//
// With -transient it runs the product's default timing with early verdicts
// on, injects only the faults that must never fence (replica kill -9 and
// partitions, apiserver cuts, restarts and outages, array API outages,
// kubelet restarts, cuts of the management network from most nodes, each
// shorter than the heartbeat grace) and real node deaths, and counts a
// fence of a node that was not dead as a false fence. It also makes the
// emulated CSI drivers publish a fenced node's volumes to it again while
// its fence is held (held period 5 s), and the checker's held rule
// requires fenced to cut each such access within the period:
//
//	go run ./tests/cmd/chaos -transient -duration 30m
//
// It prints
// the seed, the fault timeline, the fences performed and every violation,
// and exits 1 on any violation or a fence left open, 2 when the run could
// not be set up.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/fenced-project/fenced/tests/e2e"
)

func main() {
	os.Exit(run())
}

func run() int {
	seed := flag.Uint64("seed", 0, "seed of the schedule (0: from the clock, printed)")
	duration := flag.Duration("duration", 2*time.Minute, "how long faults are injected")
	nodes := flag.Int("nodes", 5, "worker nodes of the test bed")
	gap := flag.Duration("gap", 6*time.Second, "mean time between faults")
	transient := flag.Bool("transient", false, "only faults that must never fence, plus node deaths, at the product's default timing with early verdicts on; a fence of a node that was not dead fails the run")
	keep := flag.String("keep", "", "directory to keep the run's logs, audit logs and ledgers in (default: removed unless the run fails)")
	flag.Parse()
	if *seed == 0 {
		*seed = uint64(time.Now().UnixNano())
	}
	fmt.Printf("chaos seed %d (rerun with -seed %d)\n", *seed, *seed)
	t, err := e2e.NewStandalone(*keep)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		return 2
	}
	code := 0
	err = t.Run(func() error {
		opts := e2e.Options{Nodes: *nodes, Timing: e2e.ChaosTiming(), NodeLeaseDurationSeconds: 4}
		if *transient {
			opts.Timing, opts.NodeLeaseDurationSeconds = e2e.TransientTiming(), 40
		}
		h := e2e.Start(t, opts)
		res, err := e2e.RunChaos(h, e2e.ChaosConfig{Seed: *seed, Duration: *duration, MeanGap: *gap, Out: os.Stdout, Transient: *transient})
		if err != nil {
			return err
		}
		if !res.OK() {
			t.Fail() // keeps the evidence
			code = 1
		}
		return nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		return 2
	}
	if *keep != "" {
		fmt.Printf("evidence kept in %s\n", t.Root())
	}
	return code
}
