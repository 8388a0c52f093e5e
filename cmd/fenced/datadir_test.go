package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/cluster"
	"github.com/fenced-project/fenced/cmd/fenced/internal/replica"
	"github.com/fenced-project/fenced/configs"
)

// TestRunRefusesAnEmptyStore: a replica whose raft.db was emptied after it
// held the log exits 65 with a message naming the file and the way out;
// `fenced datadir recover` asks before it moves anything, then moves the
// store aside.
func TestRunRefusesAnEmptyStore(t *testing.T) {
	cfgPath := devConfig(t, freeAddr(t), "")
	cfg, err := configs.Load(cfgPath, configs.Options{})
	require.NoError(t, err)
	rc, err := replica.RaftConfig(cfg, "")
	require.NoError(t, err)
	n, err := cluster.Open(rc, nil, nil)
	require.NoError(t, err)
	require.Eventually(t, func() bool { _, ok := n.Leader(); return ok }, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, n.Close())
	store := filepath.Join(cfg.Replica.DataDir, "raft", "raft.db")
	require.NoError(t, os.Truncate(store, 0))

	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"run", "--config", cfgPath, "--log-format", "text"}, &out, &errb)
	assert.Equal(t, exitDataDir, code, errb.String())
	assert.Contains(t, errb.String(), store+" is empty (0 bytes) but this data directory held the group's log")
	assert.Contains(t, errb.String(), "fenced datadir recover --rejoin")

	// Without --yes and without "yes" typed, nothing is moved.
	root := newRootCmd(&out, &errb)
	root.SetIn(strings.NewReader("no\n"))
	root.SetArgs([]string{"datadir", "recover", "--config", cfgPath, "--rejoin"})
	require.Error(t, root.Execute())
	assert.FileExists(t, store)
	assert.Equal(t, exitUsage, run(context.Background(), []string{"datadir", "recover", "--config", cfgPath}, &out, &errb), "a mode is required")

	out.Reset()
	root = newRootCmd(&out, &errb)
	root.SetIn(strings.NewReader("yes\n"))
	root.SetArgs([]string{"datadir", "recover", "--config", cfgPath, "--rejoin"})
	require.NoError(t, root.Execute())
	assert.Contains(t, out.String(), "moved the old Raft state to "+filepath.Join(cfg.Replica.DataDir, "raft.damaged-"))
	assert.Contains(t, out.String(), "will wait for the running group's leader")
	assert.NoFileExists(t, store)
}
