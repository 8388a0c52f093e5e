package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/cluster/clustertest"
	"github.com/fenced-project/fenced/cmd/fenced/status"
)

// e2eReplica is one fenced process of a test group.
type e2eReplica struct {
	id, raftAddr, httpAddr, config string
	proc                           *proc
}

func (r *e2eReplica) status(t *testing.T) (status.Status, bool) {
	code, body := httpGet(t, "http://"+r.httpAddr+"/status")
	if code != http.StatusOK {
		return status.Status{}, false
	}
	var st status.Status
	if err := json.Unmarshal([]byte(body), &st); err != nil || st.Raft == nil {
		return status.Status{}, false
	}
	return st, true
}

// writeGroupConfigs writes one configuration file per replica: mutual TLS
// from a CA made here, each listing the others as peers.
func writeGroupConfigs(t *testing.T, n int) []*e2eReplica {
	ca, err := clustertest.NewCA("fenced e2e CA")
	require.NoError(t, err)
	dir := t.TempDir()
	reps := make([]*e2eReplica, n)
	for i := range reps {
		reps[i] = &e2eReplica{id: fmt.Sprintf("mgmt%d", i+1), raftAddr: freeAddr(t), httpAddr: freeAddr(t)}
	}
	for _, r := range reps {
		files, err := ca.WriteFiles(dir, r.id)
		require.NoError(t, err)
		doc := fmt.Sprintf(`replica:
  id: %s
  dataDir: %s
  raftBindAddress: %s
  tls:
    certFile: %s
    keyFile: %s
    caFile: %s
peers:
`, r.id, filepath.Join(dir, r.id), r.raftAddr, files.CertFile, files.KeyFile, files.CAFile)
		for _, p := range reps {
			if p != r {
				doc += fmt.Sprintf("  - id: %s\n    raftAddress: %s\n    httpAddress: http://%s\n", p.id, p.raftAddr, p.httpAddr)
			}
		}
		doc += fmt.Sprintf("http:\n  listen: %s\nlog:\n  level: info\nclusters: []\narrays: []\n", r.httpAddr)
		r.config = filepath.Join(dir, r.id+".yaml")
		require.NoError(t, os.WriteFile(r.config, []byte(doc), 0o600))
	}
	return reps
}

// agreedLeader returns the leader every given replica names in /status, once
// they agree and the leader itself reports the Leader state.
func agreedLeader(t *testing.T, reps []*e2eReplica, within time.Duration) *e2eReplica {
	t.Helper()
	var leader *e2eReplica
	require.Eventually(t, func() bool {
		leader = nil
		var id string
		for _, r := range reps {
			st, ok := r.status(t)
			if !ok || st.Raft.LeaderID == "" || (id != "" && st.Raft.LeaderID != id) {
				return false
			}
			id = st.Raft.LeaderID
			if r.id == id && st.Raft.State == "Leader" {
				leader = r
			}
		}
		return leader != nil
	}, within, 50*time.Millisecond, "replicas do not agree on a leader")
	return leader
}

// TestRunRaftGroupOfThree runs three fenced processes from three
// configuration files: they form one group and name the same leader in
// /status; kill -9 of the leader gives a new leader (the time is logged);
// the killed replica, restarted, rejoins as a follower.
func TestRunRaftGroupOfThree(t *testing.T) {
	bin := buildFenced(t)
	reps := writeGroupConfigs(t, 3)
	for _, r := range reps {
		r.proc = start(t, bin, "run", "--config", r.config)
	}
	for _, r := range reps {
		waitHealthy(t, r.proc, "http://"+r.httpAddr)
	}
	leader := agreedLeader(t, reps, 30*time.Second)
	for _, r := range reps {
		code, body := httpGet(t, "http://"+r.httpAddr+"/readyz")
		assert.Equal(t, http.StatusOK, code, "%s /readyz: %s", r.id, body)
		st, ok := r.status(t)
		require.True(t, ok)
		assert.Len(t, st.Raft.Members, 3)
	}

	var rest []*e2eReplica
	for _, r := range reps {
		if r != leader {
			rest = append(rest, r)
		}
	}
	killed := time.Now()
	require.NoError(t, leader.proc.cmd.Process.Kill()) // SIGKILL
	<-leader.proc.exited
	next := agreedLeader(t, rest, 10*time.Second)
	elapsed := time.Since(killed)
	t.Logf("FAILOVER (processes): kill -9 of %s -> %s leads, named by both survivors in /status, after %s", leader.id, next.id, elapsed)
	require.NotEqual(t, leader.id, next.id)

	// The new leader reports the killed member as unreachable.
	require.Eventually(t, func() bool {
		st, ok := next.status(t)
		if !ok {
			return false
		}
		for _, m := range st.Raft.Members {
			if m.ID == leader.id {
				return m.Reachable != nil && !*m.Reachable && m.LastContact != nil
			}
		}
		return false
	}, 10*time.Second, 50*time.Millisecond, "the leader's /status should show %s unreachable", leader.id)

	leader.proc = start(t, bin, "run", "--config", leader.config)
	require.Eventually(t, func() bool {
		st, ok := leader.status(t)
		return ok && st.Raft.State == "Follower" && st.Raft.LeaderID == next.id
	}, 30*time.Second, 50*time.Millisecond, "the restarted replica did not rejoin as a follower:\n%s", leader.proc.stderr)
	assert.Equal(t, next.id, agreedLeader(t, reps, 10*time.Second).id)

	for _, r := range reps {
		code, _ := r.proc.stop(t)
		assert.Equal(t, 0, code, "%s exit status", r.id)
	}
}
