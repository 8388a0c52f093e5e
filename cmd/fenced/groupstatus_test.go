package main

import (
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/cmd/fenced/status"
)

// TestStatusFromFollowerShowsWholeGroup runs three fenced processes and
// `fenced status` against a follower: it shows every member's role and
// reachability as the leader sees them; once the other follower is
// stopped, the same command on the first follower shows it as down.
func TestStatusFromFollowerShowsWholeGroup(t *testing.T) {
	bin := buildFenced(t)
	reps := writeGroupConfigs(t, 3)
	for _, r := range reps {
		r.proc = start(t, bin, "run", "--config", r.config)
	}
	for _, r := range reps {
		waitHealthy(t, r.proc, "http://"+r.httpAddr)
	}
	leader := agreedLeader(t, reps, 30*time.Second)
	var followers []*e2eReplica
	for _, r := range reps {
		if r != leader {
			followers = append(followers, r)
		}
	}
	asked, stopped := followers[0], followers[1]

	cli := func(args ...string) (string, status.Status) {
		t.Helper()
		out, err := exec.CommandContext(t.Context(), bin, append([]string{"status", "--addr", "http://" + asked.httpAddr}, args...)...).Output()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) { // an exit code says the status; anything else is a failure
			t.Errorf("fenced status %v: %v", args, err)
			return "", status.Status{}
		}
		var st status.Status
		if len(args) > 0 {
			require.NoError(t, json.Unmarshal(out, &st), string(out))
		}
		return string(out), st
	}
	reachable := func(st status.Status) map[string]string {
		out := map[string]string{}
		if st.Raft == nil {
			return out
		}
		for _, m := range st.Raft.Members {
			switch {
			case m.Self:
				out[m.ID] = "self"
			case m.Reachable == nil:
				out[m.ID] = "unknown"
			case *m.Reachable:
				out[m.ID] = "up"
			default:
				out[m.ID] = "down"
			}
		}
		return out
	}

	var last status.Status
	require.Eventually(t, func() bool {
		_, last = cli("-o", "json")
		r := reachable(last)
		return last.Raft != nil && last.Raft.MembersFrom == leader.id &&
			r[asked.id] == "self" && r[leader.id] == "up" && r[stopped.id] == "up"
	}, 30*time.Second, 200*time.Millisecond, "status on the follower %s never showed the whole group up: %+v", asked.id, last.Raft)
	table, _ := cli()
	assert.Contains(t, table, "(reachability as the leader "+leader.id+" sees it)", table)
	assert.Regexp(t, leader.id+`\s+\S+\s+Voter\s+Leader\s+yes`, table)
	assert.Regexp(t, stopped.id+`\s+\S+\s+Voter\s+Follower\s+yes`, table)

	code, took := stopped.proc.stop(t)
	require.Equal(t, 0, code)
	t.Logf("stopped %s in %s", stopped.id, took)
	require.Eventually(t, func() bool {
		_, last = cli("-o", "json")
		r := reachable(last)
		return last.Raft != nil && last.Raft.MembersFrom == leader.id && r[stopped.id] == "down" && r[leader.id] == "up"
	}, 60*time.Second, 200*time.Millisecond, "status on the follower %s never showed the stopped %s as down: %+v", asked.id, stopped.id, last.Raft)
	table, _ = cli()
	t.Logf("fenced status on the follower %s, %s stopped:\n%s", asked.id, stopped.id, table)
	assert.Regexp(t, stopped.id+`\s+\S+\s+Voter\s+down\s+no`, table)
	for _, line := range strings.Split(table, "\n") {
		if strings.HasPrefix(line, stopped.id+" ") {
			assert.Contains(t, line, "ago", "the stopped member's last contact: %s", line)
		}
	}
}
