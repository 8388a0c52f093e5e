package tables

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/cmd/fenced/status"
)

func TestOneLineKeepsTheTable(t *testing.T) {
	assert.Equal(t, "plain", oneLine("plain"))
	assert.Equal(t, "Post \"https://a\": dial | retry\tbody", strings.ReplaceAll(oneLine("Post \"https://a\": dial\r\n  retry\tbody\n"), " body", "\tbody"))
	assert.Equal(t, "a | b", oneLine("a\n\n\nb"))
	assert.NotContains(t, oneLine("x\x1b[31my\tz"), "\x1b")
}

func TestStatusTableShowsWhatOperatorsActOn(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	yes, no := true, false
	seen := now.Add(-42 * time.Second)
	st := status.Status{ReplicaID: "mgmt1", Version: "v1", Uptime: "1h0m0s", StartedAt: now.Add(-time.Hour), Ready: false,
		Checks: []status.Check{{Name: "cluster/prod", Error: "Get \"https://api:6443/version\":\n  dial tcp: i/o timeout"}},
		Raft: &status.Raft{State: "Leader", Term: 7, LeaderID: "mgmt1", FencingPaused: true,
			Pause: &status.Pause{Scope: status.PauseScopeAll, Operator: "alice@mgmt2", Reason: "array upgrade", At: now.Add(-2 * time.Hour)},
			Members: []status.RaftMember{
				{ID: "mgmt1", Address: "10.0.0.1:7441", Suffrage: "Voter", Self: true},
				{ID: "mgmt2", Address: "10.0.0.2:7441", Suffrage: "Voter", Reachable: &yes},
				{ID: "mgmt3", Address: "10.0.0.3:7441", Suffrage: "Voter", Reachable: &no, LastContact: &seen},
			}},
		Clusters: []status.Cluster{
			{Name: "prod", Paused: true, Pause: &status.Pause{Scope: status.PauseScopeAll, Operator: "alice@mgmt2"},
				Error: "first line\nsecond line", Nodes: &status.NodeCounts{Total: 3, Healthy: 3, Unprotected: 1},
				Unprotected: []status.UnprotectedNode{{Name: "w-2", Gaps: []status.Gap{{Volume: "pvc-9", Array: "unity-1", Reason: "cut-unsupported", Detail: "NFS share\nwithout host access"}}}},
				Unplaced: []status.UnplacedVolume{{PV: "pvc-5", Driver: "csi-unity.dellemc.com", Handle: "v-iSCSI-APM009-sv_5", Reason: "array",
					Missing: "unity array APM009 is not configured (arrays[].unity.arrayID)"}}},
			{Name: "lab", Paused: true, Pause: &status.Pause{Scope: "lab", Operator: "bob@mgmt1", Reason: "rebuild", At: now.Add(-time.Minute)}},
		},
		Arrays: []status.Array{{Name: "unity-1", Family: "unity", Error: "line one\nline two"}},
	}
	var b bytes.Buffer
	require.NoError(t, Status(&b, st, now))
	out := b.String()
	t.Log("\n" + out)
	assert.Regexp(t, `Fencing paused:\s+yes, every cluster: by alice@mgmt2 at \S+ \(2h0m0s ago\): array upgrade\n`, out)
	assert.Regexp(t, `mgmt2\s+10\.0\.0\.2:7441\s+Voter\s+Follower\s+yes\s+-\s*\n`, out)
	assert.Regexp(t, `mgmt3\s+10\.0\.0\.3:7441\s+Voter\s+down\s+no\s+42s ago\s*\n`, out)
	assert.Regexp(t, `mgmt1\s+10\.0\.0\.1:7441\s+Voter\s+Leader\s+yes\s+-\s+\(this replica\)\n`, out)
	assert.Regexp(t, `lab\s+bob@mgmt1\s+\S+\s+rebuild\n`, out)
	assert.Regexp(t, `w-2\s+pvc-9\s+unity-1\s+cut-unsupported\s+NFS share \| without host access\n`, out)
	assert.Regexp(t, `Configuration drift[^\n]*\n\s*CLUSTER\s+VOLUME\s+DRIVER\s+HANDLE\s+MISSING\n\s*prod\s+pvc-5\s+csi-unity.dellemc.com\s+v-iSCSI-APM009-sv_5\s+unity array APM009 is not configured`, out)
	assert.Contains(t, out, "[-] cluster/prod: Get \"https://api:6443/version\": | dial tcp: i/o timeout\n")
	assert.Regexp(t, `unity-1\s+unity\s+no\s+-\s+line one \| line two\n`, out)
	for _, l := range strings.Split(out, "\n") {
		assert.False(t, strings.HasPrefix(l, "second line") || strings.HasPrefix(l, "without") || strings.HasPrefix(l, "line two"), "a value broke its row: %q", l)
	}
}

// TestStatusTableOnAFollower checks the member table of a follower's
// status: the leader's view (named under the table) or why it is missing.
func TestStatusTableOnAFollower(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	yes, no := true, false
	seen := now.Add(-10 * time.Second)
	follower := func(from, why string) status.Status {
		return status.Status{ReplicaID: "mgmt2", Ready: true, Raft: &status.Raft{State: "Follower", LeaderID: "mgmt1",
			MembersFrom: from, MembersError: why,
			Members: []status.RaftMember{
				{ID: "mgmt1", Address: "10.0.0.1:7441", Suffrage: "Voter", Reachable: &yes},
				{ID: "mgmt2", Address: "10.0.0.2:7441", Suffrage: "Voter", Self: true},
				{ID: "mgmt3", Address: "10.0.0.3:7441", Suffrage: "Voter", Reachable: &no, LastContact: &seen},
			}}}
	}
	var b bytes.Buffer
	require.NoError(t, Status(&b, follower("mgmt1", ""), now))
	out := b.String()
	assert.Regexp(t, `mgmt1\s+10\.0\.0\.1:7441\s+Voter\s+Leader\s+yes\s+-\s+\(leader\)\n`, out)
	assert.Regexp(t, `mgmt2\s+10\.0\.0\.2:7441\s+Voter\s+Follower\s+yes\s+-\s+\(this replica\)\n`, out)
	assert.Regexp(t, `mgmt3\s+10\.0\.0\.3:7441\s+Voter\s+down\s+no\s+10s ago\s*\n`, out)
	assert.Contains(t, out, "(reachability as the leader mgmt1 sees it)\n")

	b.Reset()
	require.NoError(t, Status(&b, follower("", "status from https://mgmt1:7440: connection refused"), now))
	assert.Contains(t, b.String(), "(peer reachability is known on the leader, which could not be asked: status from https://mgmt1:7440: connection refused)\n")
}
