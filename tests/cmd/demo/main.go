// Command demo shows fenced at work on one machine with only Go installed.
//
// It builds fenced from this tree, starts a real Kubernetes control plane
// (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, and kwok
// playing the kubelets of a few worker nodes; see tests/testbed), simulators
// of the five Dell array families seeded from one fixture so that every node
// has an identity on every array, and three `fenced run` replicas forming a
// Raft group over loopback with mutual TLS. It deploys a StatefulSet with one
// pod per node on PowerFlex CSI volumes, powers off the node of one pod and
// prints what happened, from fenced's ledger and the API server: the last
// heartbeat, the verdicts, the fence record's steps, the read-back on each
// array, the taints, the pod's forced deletion and its replacement running
// on another node. Then it keeps everything running, with the status URLs
// and the commands to try, until Ctrl-C or SIGTERM, and cleans up.
//
//	go run ./tests/cmd/demo [--nodes 4] [--keep] [--timeout 5m] [--exit-after-recovery] [--dir DIR]
//
// The first run builds the Kubernetes binaries into .cache/k8s (once; they
// are reused). Every child process runs in a process group of its own and
// is killed if the demo dies (Pdeathsig), so nothing outlives it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// options are the command-line flags.
type options struct {
	nodes             int
	keep              bool
	timeout           time.Duration
	exitAfterRecovery bool
	dir               string
}

func parseFlags(args []string, errOut io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.IntVar(&o.nodes, "nodes", 4, "worker nodes (kwok); at least 4: three for the StatefulSet's pods and one to take over")
	fs.BoolVar(&o.keep, "keep", false, "do not power off a node: just start everything and keep it running")
	fs.DurationVar(&o.timeout, "timeout", 5*time.Minute,
		"bound on starting the test bed and replicas and on the recovery after the node dies (not on the first build)")
	fs.BoolVar(&o.exitAfterRecovery, "exit-after-recovery", false,
		"exit (status 0) once the replacement pod runs, instead of waiting for Ctrl-C")
	fs.StringVar(&o.dir, "dir", "", "working directory for configurations, data and logs (kept); default a temporary one, removed on exit")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if o.nodes < 4 || o.nodes > 50 {
		return o, fmt.Errorf("--nodes: %d is not between 4 and 50", o.nodes)
	}
	if o.timeout <= 0 {
		return o, fmt.Errorf("--timeout: %s is not positive", o.timeout)
	}
	return o, nil
}

func main() {
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	stopWithParent()
	d := newDemo(o, os.Stdout)
	err = d.run(ctx)
	interrupted := ctx.Err() != nil
	stop() // a second Ctrl-C now kills the demo; Pdeathsig takes the children with it
	if interrupted {
		d.say("stopping everything")
	}
	d.close()
	switch {
	case err != nil && !interrupted:
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	case err != nil:
		fmt.Fprintln(os.Stderr, "demo: interrupted before it finished")
		os.Exit(130)
	}
}

// stopWithParent asks the kernel to send the demo SIGTERM when the process
// that started it dies: `go run` itself ignores Ctrl-C (the demo gets it
// from the terminal) but dies of a SIGTERM without passing it on, which
// would otherwise leave the demo and everything it started running.
func stopWithParent() {
	ppid := os.Getppid()
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGTERM), 0); errno != 0 {
		return
	}
	if os.Getppid() != ppid { // the parent died before the request took effect
		_ = syscall.Kill(os.Getpid(), syscall.SIGTERM)
	}
}
