package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/fenced-project/fenced/cmd/fenced/internal/daemon"
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
	var credDir string
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
			failed := 0
			for _, f := range files {
				if err := validateFile(cmd, f, credDir); err != nil {
					failed++
					fmt.Fprintln(cmd.ErrOrStderr(), err)
				}
			}
			if failed > 0 {
				return &exitError{code: exitFailure, err: fmt.Errorf("%d of %d configuration files invalid", failed, len(files))}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&credDir, "credentials-dir", os.Getenv("CREDENTIALS_DIRECTORY"), "directory credential:NAME references resolve in")
	return cmd
}

// validateFile checks one configuration file: the loader's checks with the
// contents of every file it names, then, when every credential could be
// read, what the runtime checks before it starts (daemon.New and
// preflight, the code fenced run uses). It prints the summary and the
// warnings and returns what is wrong.
func validateFile(cmd *cobra.Command, f, credDir string) error {
	cfg, err := configs.Load(f, configs.Options{CredentialsDir: credDir, CheckContents: true})
	var pe *configs.ProblemsError
	switch {
	case errors.As(err, &pe):
		return pe
	case err != nil:
		return fmt.Errorf("%s: %w", f, err)
	}
	for _, w := range cfg.Warnings() {
		fmt.Fprintf(cmd.ErrOrStderr(), "%s: warning: %s\n", f, w)
	}
	if len(cfg.UncheckedCredentials()) == 0 {
		d, err := daemon.New(cfg, daemon.Options{CredentialsDir: credDir})
		if err == nil {
			err = preflight(d)
		}
		if err != nil {
			return fmt.Errorf("configuration %s: fenced run refuses it: %w", f, err)
		}
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%s: valid: %s\n", f, cfg.Summary())
	return nil
}
