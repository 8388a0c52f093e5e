package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestGenerateDocs(t *testing.T) {
	dir := t.TempDir()
	code, out, errOut := runPKI(t, "generate-docs", "--out", dir, "--date", "2026-01-01T00:00:00Z")
	require.Equal(t, 0, code, out+errOut)

	for _, page := range []string{"fenced.1", "fenced-run.1", "fenced-status.1", "fenced-config-validate.1", "fenced-pki-replica.1", "fenced-pki-operator.1"} {
		assert.FileExists(t, filepath.Join(dir, "man1", page))
	}
	assert.NoFileExists(t, filepath.Join(dir, "man1", "fenced-generate-docs.1"), "the hidden command has no page")
	root, err := os.ReadFile(filepath.Join(dir, "man1", "fenced.1"))
	require.NoError(t, err)
	assert.Contains(t, string(root), `.TH "FENCED" "1" "Jan 2026"`)
	assert.Contains(t, string(root), `\fBfenced-pki(1)\fP`)
	assert.NotContains(t, string(root), "generate-docs")
	for _, section := range []string{".SH ENVIRONMENT", ".SH FILES", ".SH EXIT STATUS", `\fBfenced.yaml(5)\fP`} {
		assert.Contains(t, string(root), section)
	}
	status, err := os.ReadFile(filepath.Join(dir, "man1", "fenced-status.1"))
	require.NoError(t, err)
	assert.Contains(t, string(status), `.TH "FENCED-STATUS" "1"`, "each page is titled by its command")
	yamlPage, err := os.ReadFile(filepath.Join(dir, "man5", "fenced.yaml.5"))
	require.NoError(t, err)
	assert.Contains(t, string(yamlPage), `.TH "FENCED.YAML" "5" "Jan 2026"`)

	bash, err := os.ReadFile(filepath.Join(dir, "completions", "fenced.bash"))
	require.NoError(t, err)
	assert.Contains(t, string(bash), "complete -o default -F __start_fenced fenced")
	zsh, err := os.ReadFile(filepath.Join(dir, "completions", "_fenced"))
	require.NoError(t, err)
	assert.Contains(t, string(zsh), "#compdef fenced")
}
