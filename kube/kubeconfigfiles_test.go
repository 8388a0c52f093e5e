package kube

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A kubeconfig that names /dev/zero as its CA, client certificate, key or
// token file is refused before client-go reads it, naming the file, the
// field and the bound; so is a kubeconfig that is /dev/zero itself.
func TestKubeconfigFilesAreReadWithABound(t *testing.T) {
	dir := t.TempDir()
	for _, field := range []string{"certificate-authority", "client-certificate", "client-key", "tokenFile"} {
		cluster, user := "server: https://127.0.0.1:6443", ""
		if field == "certificate-authority" {
			cluster += "\n    certificate-authority: /dev/zero"
		} else {
			user = field + ": /dev/zero"
		}
		kc := filepath.Join(dir, field+".kubeconfig")
		require.NoError(t, os.WriteFile(kc, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    %s
users:
- name: u
  user:
    %s
contexts:
- name: x
  context: {cluster: c, user: u}
current-context: x
`, cluster, user)), 0o600))
		_, err := NewClients(Config{Kubeconfig: kc})
		require.Error(t, err, field)
		assert.Contains(t, err.Error(), fmt.Sprintf("/dev/zero is larger than %d bytes", MaxKubeconfigRefBytes), field)
		assert.Contains(t, err.Error(), field)
		_, err = CheckKubeconfig(kc)
		require.Error(t, err, field)
	}
	_, err := NewClients(Config{Kubeconfig: "/dev/zero"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), fmt.Sprintf("/dev/zero is larger than %d bytes", MaxKubeconfigBytes))
}
