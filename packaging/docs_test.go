package main

import (
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/goreleaser/nfpm/v2"
	"github.com/goreleaser/nfpm/v2/files"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestShippedDocsLinks checks that every relative link in every Markdown
// file the package installs leads to something the package installs, so
// the guide read on a host has no dead links.
func TestShippedDocsLinks(t *testing.T) {
	env := map[string]string{"FENCED_BINARY": "bin/fenced", "FENCED_VERSION": "1.0.0", "FENCED_ARCH": "amd64"}
	cfg, err := nfpm.ParseFileWithEnvMapping("nfpm.yaml", func(k string) string { return env[k] })
	require.NoError(t, err)
	info, err := cfg.Get("deb")
	require.NoError(t, err)

	installed := map[string]bool{}
	links := map[string]string{} // symlink -> absolute target
	var docs []*files.Content
	for _, c := range info.Contents {
		installed[c.Destination] = true
		if c.Type == files.TypeSymlink {
			links[c.Destination] = path.Join(path.Dir(c.Destination), c.Source)
			continue
		}
		if strings.HasSuffix(c.Destination, ".md") {
			docs = append(docs, c)
		}
	}
	require.NotEmpty(t, docs)
	for _, want := range []string{"/usr/share/doc/fenced/docs/operations.md", "/usr/share/doc/fenced/README.md", "/usr/share/doc/fenced/copyright"} {
		assert.True(t, installed[want], "%s is installed", want)
	}
	exists := func(p string) bool {
		for i := 0; i < 8; i++ { // follow symlinks in the path
			changed := false
			for l, target := range links {
				if p == l || strings.HasPrefix(p, l+"/") {
					p = target + strings.TrimPrefix(p, l)
					changed = true
				}
			}
			if !changed {
				break
			}
		}
		for d := range installed {
			if d == p || strings.HasPrefix(d, p+"/") {
				return true
			}
		}
		return false
	}

	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, d := range docs {
		b, err := os.ReadFile(filepath.Join("..", d.Source))
		require.NoError(t, err)
		for _, m := range link.FindAllStringSubmatch(string(b), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") || strings.HasPrefix(target, "#") {
				continue
			}
			target, _, _ = strings.Cut(target, "#")
			resolved := path.Join(path.Dir(d.Destination), target)
			assert.True(t, exists(resolved), "%s links %s (%s), which the package does not install", d.Source, m[1], resolved)
		}
	}
}
