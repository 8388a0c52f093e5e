package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	"github.com/fenced-project/fenced/cmd/fenced/internal/buildinfo"
)

// newGenerateDocsCmd is the hidden command the package build runs to make
// the man pages and shell completions from the command tree, so that they
// always match the binary they ship with.
func newGenerateDocsCmd() *cobra.Command {
	var out, date string
	cmd := &cobra.Command{
		Use:    "generate-docs --out DIR",
		Short:  "Write man pages (DIR/man1, DIR/man5) and bash and zsh completions (DIR/completions)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			when, err := docDate(date)
			if err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			root := cmd.Root()
			man := filepath.Join(out, "man1")
			comp := filepath.Join(out, "completions")
			for _, d := range []string{man, comp} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					return &exitError{code: exitFailure, err: fmt.Errorf("generate docs: %w", err)}
				}
			}
			root.DisableAutoGenTag = true
			// No title: cobra titles each page by its command
			// (FENCED-STATUS), not every page FENCED.
			header := &doc.GenManHeader{
				Section: "1",
				Source:  "fenced " + buildinfo.Get().Version,
				Manual:  "fenced manual",
				Date:    &when,
			}
			if err := doc.GenManTree(root, header, man); err != nil {
				return &exitError{code: exitFailure, err: fmt.Errorf("generate man pages into %s: %w", man, err)}
			}
			if err := addManSections(man, when, header.Source); err != nil {
				return &exitError{code: exitFailure, err: err}
			}
			if err := writeWith(filepath.Join(comp, "fenced.bash"), func(f *os.File) error { return root.GenBashCompletionV2(f, true) }); err != nil {
				return &exitError{code: exitFailure, err: err}
			}
			if err := writeWith(filepath.Join(comp, "_fenced"), func(f *os.File) error { return root.GenZshCompletion(f) }); err != nil {
				return &exitError{code: exitFailure, err: err}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", ".", "directory to write into")
	cmd.Flags().StringVar(&date, "date", "", "date in the man pages, RFC 3339 (default: SOURCE_DATE_EPOCH, else now)")
	return cmd
}

// docDate is the date the man pages carry: reproducible builds set
// SOURCE_DATE_EPOCH.
func docDate(flag string) (time.Time, error) {
	if flag != "" {
		t, err := time.Parse(time.RFC3339, flag)
		if err != nil {
			return time.Time{}, fmt.Errorf("--date %q: %w", flag, err)
		}
		return t.UTC(), nil
	}
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH %q: %w", s, err)
		}
		return time.Unix(n, 0).UTC(), nil
	}
	return time.Now().UTC(), nil
}

func writeWith(path string, write func(*os.File) error) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := write(f); err != nil {
		_ = f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
