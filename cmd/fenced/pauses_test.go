package main

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/cmd/fenced/status"
	"github.com/fenced-project/fenced/stonith"
)

// TestTwoPausesOneResumeThroughTheCLI runs three fenced processes and the
// CLI: alice pauses cluster lab, bob pauses every cluster, bob resumes.
// Alice's pause stays on every replica, and bob's resume says so (text
// and -o json); carol's resume ends nothing and says what stays; alice's
// own resume leaves nothing paused.
func TestTwoPausesOneResumeThroughTheCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three fenced processes")
	}
	bin, g, follower, cli := startTokenGroup(t)
	pausesOf := func(r *e2eReplica) []status.Pause {
		var st status.Status
		if !g.get(t, r, "/status", &st) || st.Raft == nil {
			return nil
		}
		return st.Raft.Pauses
	}

	out, err := cli("alice", "pause", "--cluster", "lab", "--reason", "array upgrade")
	require.NoError(t, err, out)
	assert.Contains(t, out, "fencing paused for cluster lab")
	assert.Contains(t, out, "still paused (1):")
	out, err = cli("bob", "pause", "--reason", "network change")
	require.NoError(t, err, out)
	assert.Contains(t, out, "still paused (2):")

	out, err = cli("bob", "resume", "--reason", "network change done", "-o", "json")
	require.NoError(t, err, out)
	var res stonith.ActionResult
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	assert.Contains(t, res.Message, "every cluster by token/bob")
	require.NotNil(t, res.Paused, out)
	require.Len(t, *res.Paused, 1, out)
	assert.Equal(t, "token/alice", (*res.Paused)[0].Operator)
	assert.Equal(t, "lab", (*res.Paused)[0].Scope)
	alice := (*res.Paused)[0].ID
	for _, r := range g.reps {
		require.Eventually(t, func() bool {
			ps := pausesOf(r)
			return len(ps) == 1 && ps[0].ID == alice && ps[0].Operator == "token/alice" && ps[0].Reason == "array upgrade (carried by replica "+follower.id+")"
		}, 10*time.Second, 50*time.Millisecond, "replica %s should hold alice's pause only: %v", r.id, pausesOf(r))
	}

	out, err = cli("carol", "resume", "--reason", "go")
	require.Error(t, err, out)
	assert.Contains(t, out, "you (token/carol) hold no pause")
	assert.Contains(t, out, alice+": cluster lab by token/alice")

	// status exits 3 (not ready: the cluster's API server is not there)
	// but prints the whole status.
	st, _ := exec.Command(bin, "status", "--addr", "https://"+follower.httpAddr, "--ca-file", g.files[follower.id].CAFile).CombinedOutput()
	assert.Contains(t, string(st), "Pauses (fenced resume --id ID ends one):")
	assert.Contains(t, string(st), alice)

	out, err = cli("alice", "resume", "--reason", "upgrade done")
	require.NoError(t, err, out)
	assert.Contains(t, out, "ended "+alice)
	assert.Contains(t, out, "nothing is paused: fencing runs for every cluster")
	for _, r := range g.reps {
		require.Eventually(t, func() bool { return len(pausesOf(r)) == 0 }, 10*time.Second, 50*time.Millisecond,
			"replica %s still shows a pause", r.id)
	}
}

// startTokenGroup starts three fenced processes serving HTTPS with the API
// token, and returns a follower and a CLI runner that calls it with the
// token as the named operator.
func startTokenGroup(t *testing.T) (string, *httpsGroup, *e2eReplica, func(operator string, args ...string) (string, error)) {
	t.Helper()
	bin := buildFenced(t)
	g := writeHTTPSGroupConfigs(t, 3, func(dir string) string { return absentCluster(t, dir) })
	tokenFile := filepath.Join(g.dir, "api-token")
	require.NoError(t, os.WriteFile(tokenFile, []byte(callersToken+"\n"), 0o600))
	for _, r := range g.reps {
		doc, err := os.ReadFile(r.config)
		require.NoError(t, err)
		withToken := strings.Replace(string(doc), "\nhttp:\n", "\nhttp:\n  tokenFile: "+tokenFile+"\n", 1)
		require.NoError(t, os.WriteFile(r.config, []byte(withToken), 0o600))
		r.proc = start(t, bin, "run", "--config", r.config)
	}
	leader := g.leader(t)
	var follower *e2eReplica
	for _, r := range g.reps {
		if r != leader {
			follower = r
			break
		}
	}
	cli := func(operator string, args ...string) (string, error) {
		args = append(args, "--addr", "https://"+follower.httpAddr, "--ca-file", g.files[follower.id].CAFile,
			"--token-file", tokenFile, "--operator", operator)
		out, err := exec.Command(bin, args...).CombinedOutput()
		return string(out), err
	}
	return bin, g, follower, cli
}

// TestConfirmThroughTheCLI runs fenced confirm against three fenced
// processes: without --yes, or without --array or --powered-off, the CLI
// refuses (exit 2) and sends nothing; with them the call reaches the
// leader, which refuses a node without an open fence (nothing to confirm,
// exit 1) and an array that is not configured, naming them. The confirm
// path itself (a fence past a gone array) is TestConfirmTakesTheFencePastAGoneArray.
func TestConfirmThroughTheCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three fenced processes")
	}
	_, _, _, cli := startTokenGroup(t)
	out, err := cli("alice", "confirm", "worker-7", "--cluster", "lab", "--array", "unity-1", "--reason", "array gone")
	assert.Equal(t, exitUsage, exitCode(err), out)
	assert.Contains(t, out, "--yes")
	out, err = cli("alice", "confirm", "worker-7", "--cluster", "lab", "--reason", "array gone", "--yes")
	assert.Equal(t, exitUsage, exitCode(err), out)
	assert.Contains(t, out, "--array A, or --powered-off")

	out, err = cli("alice", "confirm", "worker-7", "--cluster", "lab", "--array", "unity-1", "--reason", "array gone", "--yes")
	assert.Equal(t, exitFailure, exitCode(err), out)
	assert.Contains(t, out, "lab/worker-7 has no open fence to confirm")
	out, err = cli("alice", "confirm", "worker-7", "--cluster", "lab", "--array", "unity-9", "--reason", "array gone", "--yes")
	assert.Equal(t, exitFailure, exitCode(err), out)
	assert.Contains(t, out, `array "unity-9" is not configured`)
}

// exitCode is the exit status of a command the test ran (0 without an
// *exec.ExitError).
func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return 0
}

// TestAbandonThroughTheCLI: `fenced unfence --abandon-array` needs --yes
// and a reason, does not go with --force, and reaches the leader, which
// refuses it with the reason (no open fence here).
func TestAbandonThroughTheCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three fenced processes")
	}
	_, _, _, cli := startTokenGroup(t)
	out, err := cli("alice", "unfence", "worker-7", "--cluster", "lab", "--abandon-array", "unity-1", "--reason", "array decommissioned")
	assert.Equal(t, exitUsage, exitCode(err), out)
	assert.Contains(t, out, "--yes")
	out, err = cli("alice", "unfence", "worker-7", "--cluster", "lab", "--abandon-array", "unity-1", "--yes")
	assert.Equal(t, exitUsage, exitCode(err), out)
	assert.Contains(t, out, "--abandon-array needs --reason")
	out, err = cli("alice", "unfence", "worker-7", "--cluster", "lab", "--abandon-array", "unity-1", "--force", "--reason", "x", "--yes")
	assert.Equal(t, exitUsage, exitCode(err), out)

	out, err = cli("alice", "unfence", "worker-7", "--cluster", "lab", "--abandon-array", "unity-1", "--reason", "array decommissioned", "--yes")
	assert.Equal(t, exitFailure, exitCode(err), out)
	assert.Contains(t, out, "lab/worker-7 has no open fence")
}
