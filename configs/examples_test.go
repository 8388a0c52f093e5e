package configs

import (
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/configs/configstest"
)

// exampleFiles lists every YAML file shipped in this directory.
func exampleFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	for _, pat := range []string{"*.yaml", "*.yml"} {
		m, err := filepath.Glob(pat)
		require.NoError(t, err)
		files = append(files, m...)
	}
	require.NotEmpty(t, files)
	return files
}

// TestExamplesValidate loads every example as shipped (credential
// references cannot be checked without a credentials directory) and again
// with a credentials directory holding every credential it names.
func TestExamplesValidate(t *testing.T) {
	for _, f := range exampleFiles(t) {
		t.Run(f, func(t *testing.T) {
			cfg, err := Load(f, Options{})
			require.NoError(t, err)
			assert.NotEmpty(t, cfg.Replica.ID)
			assert.NotEmpty(t, cfg.Summary())

			// With every credential it names, usable, the contents check
			// as `fenced config validate` makes it passes too.
			dir := t.TempDir()
			var names []string
			for _, ref := range cfg.UncheckedCredentials() {
				names = append(names, strings.TrimPrefix(ref, CredentialPrefix))
			}
			site := configstest.NewSite(t)
			site.ReplicaID = cfg.Replica.ID
			site.Host, _, _ = net.SplitHostPort(cfg.Replica.RaftAdvertiseAddress)
			site.Credentials(t, dir, names)
			cfg, err = Load(f, Options{CredentialsDir: dir, CheckContents: true})
			require.NoError(t, err)
			assert.Empty(t, cfg.UncheckedCredentials())
			// The production examples' only warnings are their empty
			// placeholders (TestShippedExampleProtects checks them).
			for _, w := range cfg.Warnings() {
				assert.Contains(t, w.Message, "can place no volume", "%s", w)
			}
		})
	}
}

// TestProductionExampleUsesAllFamilies checks the three-replica example is
// what it claims to be.
func TestProductionExampleUsesAllFamilies(t *testing.T) {
	ids := map[string]bool{}
	for _, f := range []string{"production-mgmt1.yaml", "production-mgmt2.yaml", "production-mgmt3.yaml"} {
		cfg, err := Load(f, Options{})
		require.NoError(t, err)
		require.Len(t, cfg.Peers, 2, f)
		ids[cfg.Replica.ID] = true
		for _, p := range cfg.Peers {
			ids[p.ID] = true
		}
		fams := map[string]bool{}
		for _, a := range cfg.Arrays {
			fams[string(a.Family)] = true
		}
		assert.Len(t, fams, 5, f)
	}
	assert.Len(t, ids, 3)
}

// TestDevExampleNeedsNothing checks the development example names no
// cluster, array or file, so it runs on any machine.
func TestDevExampleNeedsNothing(t *testing.T) {
	cfg, err := Load("dev-single.yaml", Options{})
	require.NoError(t, err)
	assert.Empty(t, cfg.Clusters)
	assert.Empty(t, cfg.Arrays)
	assert.Empty(t, cfg.Peers)
	assert.Empty(t, cfg.UncheckedCredentials())
}
