package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"
)

// TestMain builds the fenced binary of this tree once for every test of the
// package, unless FENCED_E2E_BINARY names one already.
func TestMain(m *testing.M) {
	flag.Parse()
	if os.Getenv(BinaryEnv) == "" && !testing.Short() {
		dir, err := os.MkdirTemp("", "fenced-e2e-bin-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		bin, err := BuildFenced(ctx, dir)
		cancel()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		_ = os.Setenv(BinaryEnv, bin)
		code := m.Run()
		_ = os.RemoveAll(dir)
		os.Exit(code)
	}
	os.Exit(m.Run())
}
