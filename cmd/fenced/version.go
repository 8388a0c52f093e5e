package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/fenced-project/fenced/cmd/fenced/internal/buildinfo"
)

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b := buildinfo.Get()
			rev := b.Revision
			if rev == "" {
				rev = "unknown"
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "fenced %s (revision %s, %s)\n", b.Version, rev, b.GoVersion)
			return err
		},
	}
}
