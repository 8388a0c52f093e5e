// Command build builds the test bed's control-plane binaries (etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler, kwok) and the
// medik8s NodeHealthCheck operator into the repository's .cache directory,
// if they are not there yet, and prints the control plane's directory. Run it from anywhere inside the repository:
//
//	go run ./tests/testbed/cmd/build
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/fenced-project/fenced/tests/testbed"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	bins, err := testbed.EnsureBinaries(ctx, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "build:", err)
		os.Exit(1)
	}
	nhc, err := testbed.EnsureNHC(ctx, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "build:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "NodeHealthCheck operator: %s\n", nhc.Binary)
	fmt.Fprintf(os.Stderr, "binaries ready in %s\n", time.Since(start).Round(time.Second))
	fmt.Println(bins.Dir)
}
