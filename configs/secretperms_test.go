package configs

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestExposedSecretFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, mode fs.FileMode) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte("x\n"), 0o600))
		require.NoError(t, os.Chmod(p, mode))
		return p
	}
	c := &Config{}
	c.HTTP.TokenFile = write("token", 0o644)
	c.HTTP.TLS.KeyFile = write("http.key", 0o600)
	c.HTTP.TLS.CertFile = write("http.crt", 0o644) // public: never reported
	c.Clusters = []Cluster{{Name: "a", Kubeconfig: write("kc", 0o640)}}
	c.Arrays = []Array{{Name: "u", PasswordFile: "credential:pw", CAFile: write("ca.crt", 0o644)}}
	credDir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(credDir, "pw"), []byte("x\n"), 0o604))

	got := c.ExposedSecretFiles(credDir)
	assert.Equal(t, []ExposedSecretFile{
		{Field: "http.tokenFile", Path: filepath.Join(dir, "token"), Mode: 0o644},
		{Field: "clusters[0].kubeconfig", Path: filepath.Join(dir, "kc"), Mode: 0o640},
		{Field: "arrays[0].passwordFile", Path: filepath.Join(credDir, "pw"), Mode: 0o604},
	}, got)

	require.NoError(t, os.Chmod(filepath.Join(dir, "token"), 0o600))
	require.NoError(t, os.Chmod(filepath.Join(dir, "kc"), 0o400))
	require.NoError(t, os.Chmod(filepath.Join(credDir, "pw"), 0o400))
	assert.Empty(t, c.ExposedSecretFiles(credDir))
	c.HTTP.TokenFile = filepath.Join(dir, "missing")
	assert.Empty(t, c.ExposedSecretFiles(credDir), "missing files are validation's business")
}

// TestSecretPastedAsFileNotRepeated checks a password typed where its file
// belongs is not echoed by validation, while a missing file given as a path
// still is.
func TestSecretPastedAsFileNotRepeated(t *testing.T) {
	dir := t.TempDir()
	kc := filepath.Join(dir, "kc")
	require.NoError(t, os.WriteFile(kc, []byte("x\n"), 0o600))
	const pasted = "hunter2-PLANTED-s3cret"
	doc := "replica:\n  id: r1\n  raftBindAddress: 127.0.0.1:7441\n" +
		"clusters:\n  - name: c1\n    kubeconfig: " + kc + "\n    arrays: [a1]\n" +
		"arrays:\n  - name: a1\n    family: powerscale\n    endpoint: https://127.0.0.1:8080\n    username: u\n    passwordFile: " + pasted + "\n"
	_, err := Parse([]byte(doc), dir, Options{})
	require.Error(t, err)
	assert.NotContains(t, err.Error(), pasted)
	assert.Contains(t, err.Error(), "arrays[0].passwordFile: no file by this name exists")
	assert.Contains(t, err.Error(), "(line 13)")

	missing := filepath.Join(dir, "sub", "a1.password")
	_, err = Parse([]byte(strings.Replace(doc, pasted, missing, 1)), dir, Options{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "file "+missing+" does not exist", "a path is shown: it helps and is no secret")
}
