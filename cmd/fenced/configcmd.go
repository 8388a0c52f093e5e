package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

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
		Long: `Check configuration files. A valid file prints a one-line summary; an invalid
one prints every problem, each naming the field and its YAML line, and the
command exits 1.

credential:NAME references are checked in --credentials-dir (default
$CREDENTIALS_DIRECTORY); without one they are reported as not checked.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, files []string) error {
			failed := 0
			for _, f := range files {
				cfg, err := configs.Load(f, configs.Options{CredentialsDir: credDir})
				var pe *configs.ProblemsError
				switch {
				case errors.As(err, &pe):
					failed++
					fmt.Fprintln(cmd.ErrOrStderr(), pe.Error())
				case err != nil:
					failed++
					fmt.Fprintf(cmd.ErrOrStderr(), "%s: %v\n", f, err)
				default:
					fmt.Fprintf(cmd.OutOrStdout(), "%s: valid: %s\n", f, cfg.Summary())
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
