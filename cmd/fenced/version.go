package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/fenced-project/fenced/cmd/fenced/internal/buildinfo"
)

// versionInfo is `fenced version -o json`.
type versionInfo struct {
	Version   string `json:"version"`
	Revision  string `json:"revision,omitempty"`
	GoVersion string `json:"goVersion"`
}

func newVersionCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version [-o table|json]",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			b := buildinfo.Get()
			if output == "json" {
				return writeJSON(cmd.OutOrStdout(), versionInfo{Version: b.Version, Revision: b.Revision, GoVersion: b.GoVersion})
			}
			rev := b.Revision
			if rev == "" {
				rev = "unknown"
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "fenced %s (revision %s, %s)\n", b.Version, rev, b.GoVersion)
			return err
		},
	}
	registerOutput(cmd, &output)
	return cmd
}
