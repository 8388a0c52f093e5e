package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/fenced-project/fenced/cmd/fenced/internal/daemon"
	"github.com/fenced-project/fenced/cmd/fenced/internal/replica"
	"github.com/fenced-project/fenced/configs"
	"github.com/fenced-project/fenced/kube"
)

func newConfigCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Work with configuration files",
	}
	cmd.AddCommand(newValidateCmd())
	return cmd
}

// validateResult is one file's result in `config validate -o json`.
type validateResult struct {
	File     string            `json:"file"`
	Valid    bool              `json:"valid"`
	Summary  string            `json:"summary,omitempty"`
	Problems []validateProblem `json:"problems,omitempty"`
	Warnings []validateProblem `json:"warnings,omitempty"`
	// Error is a failure that is not a list of problems (an unreadable
	// file, or what fenced run refuses).
	Error string `json:"error,omitempty"`
}

// validateProblem is a configs.Problem with JSON names.
type validateProblem struct {
	Field   string `json:"field,omitempty"`
	Line    int    `json:"line,omitempty"`
	Env     string `json:"env,omitempty"`
	Message string `json:"message"`
}

func jsonProblems(ps []configs.Problem) []validateProblem {
	var out []validateProblem
	for _, p := range ps {
		out = append(out, validateProblem{Field: p.Path, Line: p.Line, Env: p.Env, Message: p.Message})
	}
	return out
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
			var results []validateResult
			for _, f := range files {
				r := validateFile(f, credDir)
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

// validateFile checks one configuration file: the loader's checks with the
// contents of every file it names, then, when every credential could be
// read, what the runtime checks before it starts (daemon.New and
// preflight, the code fenced run uses).
func validateFile(f, credDir string) validateResult {
	r := validateResult{File: f}
	cfg, err := configs.Load(f, configs.Options{CredentialsDir: credDir, CheckContents: true, CheckKubeconfig: kube.CheckKubeconfig})
	var pe *configs.ProblemsError
	switch {
	case errors.As(err, &pe):
		r.Problems, r.Error = jsonProblems(pe.Problems), pe.Error()
		return r
	case err != nil:
		r.Error = fmt.Sprintf("%s: %v", f, err)
		return r
	}
	r.Warnings = jsonProblems(cfg.Warnings())
	if len(cfg.UncheckedCredentials()) == 0 {
		d, err := daemon.New(cfg, daemon.Options{CredentialsDir: credDir})
		if err == nil {
			err = replica.Preflight(d)
		}
		if err != nil {
			r.Error = fmt.Sprintf("configuration %s: fenced run refuses it: %v", f, err)
			return r
		}
	}
	r.Valid, r.Summary = true, cfg.Summary()
	return r
}
