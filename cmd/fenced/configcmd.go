package main

import (
	"fmt"
	"io"
	"log"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/fenced-project/fenced/cmd/fenced/internal/online"
	"github.com/fenced-project/fenced/cmd/fenced/internal/replica"
	"github.com/fenced-project/fenced/configs"
)

func newConfigCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Work with configuration files",
	}
	cmd.AddCommand(newValidateCmd())
	return cmd
}

// exitOnline is validate --online's exit code when a valid file's array or
// API server failed its check.
const exitOnline = 3

func newValidateCmd() *cobra.Command {
	var credDir, output string
	var connect bool
	cmd := &cobra.Command{
		Use:   "validate FILE...",
		Short: "Check configuration files and report every problem with its field and line",
		Long: `Check configuration files the way fenced run does, and the files they name:
certificates and keys match, are valid now (a warning inside 30 days) and
carry the names and extended key usages peers and clients check; CA
bundles, secrets, the API token and CHAP secrets parse; kubeconfigs load
and name a server; each array family's client accepts its settings. A valid
file prints a one-line summary (and warnings on stderr); an invalid one
prints every problem, each naming the field and its YAML line, and the
command exits 1. A file that validates starts.

credential:NAME references are checked in --credentials-dir (default
$CREDENTIALS_DIRECTORY); without one they are reported as not checked.

With --online a valid file's targets are tried too, with read-only calls:
each array is logged in to with its family's client and its system read;
each cluster's API server is asked for its version and, with
SelfSubjectAccessReviews as fenced's own user, for every verb on every
resource fenced uses. Each target is reported reachable, refused
(connection refused), unreachable (no answer, unknown name, TLS failure),
wrong-credentials, missing-rbac (naming each missing permission) or error.
--online needs every credential (--credentials-dir).

Exit status: 0 every file valid (and, with --online, every target
reachable); 1 a file invalid; 2 a usage error; 3 with --online, every file
valid but a target not reachable or missing RBAC.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, files []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			if credDir != "" {
				if fi, err := os.Stat(credDir); err != nil || !fi.IsDir() {
					why := "not a directory"
					if err != nil {
						why = err.Error()
					}
					return &exitError{code: exitUsage, err: fmt.Errorf("--credentials-dir %s: %s", credDir, why)}
				}
			}
			// The report is the output: what the Dell libraries print
			// through the standard log package while the configuration
			// is checked and the arrays are tried is dropped.
			prev := log.Writer()
			log.SetOutput(io.Discard)
			defer log.SetOutput(prev)
			failed, offline := 0, 0
			var results []replica.ValidateResult
			for _, f := range files {
				r := replica.ValidateFileOnline(cmd.Context(), f, credDir, connect)
				results = append(results, r)
				if !r.Valid {
					failed++
				}
				if r.OnlineFailed() {
					offline++
				}
				if output == "json" {
					continue
				}
				for _, w := range r.Warnings {
					fmt.Fprintf(cmd.ErrOrStderr(), "%s: warning: %s\n", f, configs.Problem{Path: w.Field, Line: w.Line, Env: w.Env, Message: w.Message})
				}
				if r.Valid {
					fmt.Fprintf(cmd.OutOrStdout(), "%s: valid: %s\n", f, r.Summary)
				} else {
					fmt.Fprintln(cmd.ErrOrStderr(), r.Error)
				}
				writeTargets(cmd.OutOrStdout(), f, r.Targets)
			}
			if output == "json" {
				if err := writeJSON(cmd.OutOrStdout(), results); err != nil {
					return err
				}
			}
			if failed > 0 {
				return &exitError{code: exitFailure, err: fmt.Errorf("%d of %d configuration files invalid", failed, len(files))}
			}
			if offline > 0 {
				return &exitError{code: exitOnline, err: fmt.Errorf("%d of %d configuration files have a target that failed its online check", offline, len(files))}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&connect, "online", false, "also log in to every array and API server (read-only calls) and check fenced's RBAC")
	cmd.Flags().StringVar(&credDir, "credentials-dir", os.Getenv("CREDENTIALS_DIRECTORY"), "directory credential:NAME references resolve in")
	registerOutput(cmd, &output)
	return cmd
}

// writeTargets prints one line per online check: the target, its outcome
// and what failed.
func writeTargets(w io.Writer, file string, targets []online.Target) {
	for _, t := range targets {
		line := fmt.Sprintf("%s: %s %s (%s): %s", file, t.Kind, t.Name, t.Endpoint, t.Outcome)
		if t.Version != "" {
			line += ", version " + t.Version
		}
		if len(t.Missing) > 0 {
			var names []string
			for _, m := range t.Missing {
				names = append(names, m.String())
			}
			line += ": not allowed to " + strings.Join(names, "; ")
		} else if t.Error != "" {
			line += ": " + strings.Join(strings.Fields(t.Error), " ")
		}
		fmt.Fprintln(w, line)
	}
}
