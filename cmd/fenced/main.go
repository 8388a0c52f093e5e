// Command fenced is a STONITH-style fencing daemon for Kubernetes nodes
// whose stateful workloads keep their data on Dell storage arrays.
//
//	fenced run --config /etc/fenced/fenced.yaml   run a replica (under systemd)
//	fenced status [--config F] [-o table|json]      show a replica's status
//	fenced history [--cluster C] [--node N]         list finished fences
//	fenced config validate FILE...                  check configuration files
//	fenced fence NODE --cluster C --reason R        fence a node now
//	fenced unfence NODE --cluster C [--force --yes] restore a fenced node
//	fenced pause|resume [--cluster C]               pause or resume fencing
//	fenced confirm NODE --cluster C --array A       attest a fenced node cannot write to an array
//	fenced datadir recover --config F --rejoin      recover a refused data directory
//	fenced pki ca|replica|operator|show             make and check certificates
//	fenced version                                  print the version
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/fenced-project/fenced/configs"
)

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
	// exitDataDir is sysexits' EX_DATAERR: the Raft store is missing,
	// empty, unreadable or damaged after it held the ledger. The unit
	// does not restart on it; `fenced datadir recover` is the way out.
	exitDataDir = 65
	// exitConfig is sysexits' EX_CONFIG; the unit does not restart on it.
	exitConfig = 78
)

// exitError carries an exit code out of a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the command line and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRootCmd(stdout, stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil && ee.err.Error() != "" {
			fmt.Fprintln(stderr, "fenced:", ee.err)
		}
		return ee.code
	}
	fmt.Fprintln(stderr, "fenced:", err)
	return exitUsage
}

func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "fenced",
		Short:         "Fence failed Kubernetes nodes at their Dell storage arrays",
		Long:          "fenced fences failed Kubernetes nodes at their Dell storage arrays, then lets their stateful pods restart elsewhere.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	// A misspelled FENCED_* variable would be ignored without a word; the
	// commands that load a configuration report it with its warnings.
	root.PersistentPreRun = func(cmd *cobra.Command, _ []string) {
		if cmd.Name() == "run" || cmd.Name() == "validate" {
			return
		}
		for _, w := range configs.EnvWarnings(os.Environ()) {
			fmt.Fprintln(stderr, "fenced: warning:", w.Message)
		}
	}
	root.AddCommand(newRunCmd(), newStatusCmd(), newPlanCmd(), newConfigCmd(), newVersionCmd(),
		newHistoryCmd(), newFenceCmd(), newUnfenceCmd(), newPauseCmd(), newResumeCmd(), newConfirmCmd(), newDataDirCmd(), newPKICmd(), newGenerateDocsCmd())
	return root
}
