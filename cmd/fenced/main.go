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
//	fenced unfence NODE --cluster C --abandon-array A  finish an unfence without a gone array
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
	"gopkg.in/yaml.v3"

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
	out := &countingWriter{w: stdout}
	root := newRootCmd(out, stderr)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	code, msg := exitUsage, err.Error()
	var ee *exitError
	if errors.As(err, &ee) {
		code, msg = ee.code, ""
		if ee.err != nil {
			msg = ee.err.Error()
		}
	}
	if msg != "" {
		fmt.Fprintln(stderr, "fenced:", msg)
	}
	if cmd != nil && jsonOutput(cmd) && out.n == 0 {
		// A script that asked for JSON gets its error as JSON too, on
		// standard output, where it reads the answer (unless the
		// command wrote its JSON document, which says what failed).
		_ = writeJSON(stdout, struct {
			Error    string `json:"error"`
			ExitCode int    `json:"exitCode"`
		}{msg, code})
	}
	return code
}

// countingWriter counts what a command writes to standard output.
type countingWriter struct {
	w io.Writer
	n int
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += n
	return n, err
}

// jsonOutput reports whether the command was asked for -o json.
func jsonOutput(cmd *cobra.Command) bool {
	f := cmd.Flags().Lookup("output")
	return f != nil && f.Value.String() == "json"
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
	registerCompletions(root)
	return root
}

// defaultConfigPath is where the package installs the configuration.
const defaultConfigPath = "/etc/fenced/fenced.yaml"

// registerCompletions completes -o with its formats and --cluster with
// the cluster names of the configuration (--config, else the installed
// one) on every command that has them.
func registerCompletions(cmd *cobra.Command) {
	if cmd.Flags().Lookup("output") != nil {
		_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"table", "json"}, cobra.ShellCompDirectiveNoFileComp))
	}
	if cmd.Flags().Lookup("cluster") != nil {
		_ = cmd.RegisterFlagCompletionFunc("cluster", func(c *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
			path := defaultConfigPath
			if f := c.Flags().Lookup("config"); f != nil && f.Value.String() != "" {
				path = f.Value.String()
			}
			return configuredClusters(path), cobra.ShellCompDirectiveNoFileComp
		})
	}
	for _, sub := range cmd.Commands() {
		registerCompletions(sub)
	}
}

// configuredClusters names the clusters of a configuration file, read
// for completion only: nothing is checked, an unreadable file names none.
func configuredClusters(path string) []string {
	b, err := os.ReadFile(path)
	if err != nil || len(b) > 1<<20 {
		return nil
	}
	var doc struct {
		Clusters []struct {
			Name string `yaml:"name"`
		} `yaml:"clusters"`
	}
	if yaml.Unmarshal(b, &doc) != nil {
		return nil
	}
	var out []string
	for _, c := range doc.Clusters {
		if c.Name != "" {
			out = append(out, c.Name)
		}
	}
	return out
}
