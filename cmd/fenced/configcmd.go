package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

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

func newValidateCmd() *cobra.Command {
	var credDir, output string
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
$CREDENTIALS_DIRECTORY); without one they are reported as not checked.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, files []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			failed := 0
			var results []replica.ValidateResult
			for _, f := range files {
				r := replica.ValidateFile(f, credDir)
				results = append(results, r)
				if !r.Valid {
					failed++
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
			}
			if output == "json" {
				if err := writeJSON(cmd.OutOrStdout(), results); err != nil {
					return err
				}
			}
			if failed > 0 {
				return &exitError{code: exitFailure, err: fmt.Errorf("%d of %d configuration files invalid", failed, len(files))}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&credDir, "credentials-dir", os.Getenv("CREDENTIALS_DIRECTORY"), "directory credential:NAME references resolve in")
	registerOutput(cmd, &output)
	return cmd
}
