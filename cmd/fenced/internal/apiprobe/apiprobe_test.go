package apiprobe

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/configs"
)

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

func kubeconfig(t *testing.T, server string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kubeconfig")
	doc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "%s", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: abc}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`, server)
	require.NoError(t, os.WriteFile(p, []byte(doc), 0o600))
	return p
}

func TestUnreachableAPIServerIsNotReady(t *testing.T) {
	c := configs.DefaultCluster()
	c.Name = "prod"
	c.Kubeconfig = kubeconfig(t, "https://"+closedPort(t))
	p := New(c, "", slog.New(slog.DiscardHandler))
	require.ErrorIs(t, p.Check(context.Background()), errNotProbed)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	require.Eventually(t, func() bool { return p.Status().CheckedAt != nil }, 10*time.Second, 20*time.Millisecond)
	err := p.Check(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "/version")
	st := p.Status()
	assert.Equal(t, "prod", st.Name)
	assert.False(t, st.Ready)
	assert.NotEmpty(t, st.Error)
	assert.Contains(t, st.APIServer, "127.0.0.1")

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not stop")
	}
}

func TestMissingKubeconfigIsNotReady(t *testing.T) {
	c := configs.DefaultCluster()
	c.Name = "prod"
	c.Kubeconfig = filepath.Join(t.TempDir(), "missing")
	p := New(c, "", slog.New(slog.DiscardHandler))
	p.probe(context.Background())
	err := p.Check(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "load kubeconfig")

	c.Kubeconfig = "credential:kc"
	p = New(c, "", slog.New(slog.DiscardHandler))
	p.probe(context.Background())
	require.ErrorIs(t, p.Check(context.Background()), configs.ErrNoCredentialsDir)
}
