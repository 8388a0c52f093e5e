package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
	"gopkg.in/yaml.v3"

	"github.com/fenced-project/fenced/cluster/ledger"
)

// OldBinaryEnv names a fenced binary of the previous ledger version to
// upgrade from; without it the test builds PreviousLedgerRev.
const OldBinaryEnv = "FENCED_E2E_OLD_BINARY"

// PreviousLedgerRev is the last commit before ledger versions were
// negotiated: its builds write ledger version 2 and advertise nothing.
const PreviousLedgerRev = "26dc5c4"

// buildAt builds fenced from the tree of a commit of this repository.
func buildAt(t *testing.T, rev string) string {
	t.Helper()
	root, err := ModuleRoot()
	require.NoError(t, err)
	src := filepath.Join(t.TempDir(), "src")
	out, err := exec.Command("git", "-C", root, "worktree", "add", "--detach", src, rev).CombinedOutput()
	require.NoError(t, err, "check out %s: %s", rev, out)
	t.Cleanup(func() { _ = exec.Command("git", "-C", root, "worktree", "remove", "--force", src).Run() })
	bin := filepath.Join(t.TempDir(), "fenced-"+rev)
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/fenced")
	cmd.Dir = src
	out, err = cmd.CombinedOutput()
	require.NoError(t, err, "build %s: %s", rev, out)
	return bin
}

// snapshotOften rewrites a replica's configuration so that Raft snapshots
// after a few entries.
func snapshotOften(t *testing.T, r *Replica) {
	t.Helper()
	b, err := os.ReadFile(r.ConfigPath)
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, yaml.Unmarshal(b, &doc))
	rf, _ := doc["raft"].(map[string]any)
	if rf == nil {
		rf = map[string]any{}
	}
	rf["snapshotThreshold"], rf["snapshotInterval"] = 16, "500ms"
	doc["raft"] = rf
	b, err = yaml.Marshal(doc)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(r.ConfigPath, b, 0o600))
}

// snapshotHeaders are the first lines of a replica's snapshots.
func snapshotHeaders(r *Replica) []string {
	files, _ := filepath.Glob(filepath.Join(r.DataDir, "raft", "snapshots", "snapshots", "*", "state.bin"))
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		line, _, _ := strings.Cut(string(b), "\n")
		out = append(out, line)
	}
	return out
}

// TestRollingLedgerUpgrade: a group of three replicas of the previous
// ledger version is upgraded one replica at a time while a node is fenced,
// with snapshots taken on the way. The group keeps writing version 2 until
// the last replica runs this build, then runs this build's newest version
// (ledger.Version); every replica's log replays to the same ledger with
// nothing refused. A replica rolled back to the previous build afterwards
// refuses to start on the new version's snapshot rather than diverge.
func TestRollingLedgerUpgrade(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds an older fenced, starts a control plane and three fenced processes")
	}
	newBin := os.Getenv(BinaryEnv)
	require.NotEmpty(t, newBin)
	oldBin := os.Getenv(OldBinaryEnv)
	if oldBin == "" {
		oldBin = buildAt(t, PreviousLedgerRev)
	}
	t.Setenv(BinaryEnv, oldBin)
	h := startFast(t)
	h.WaitLeader(waitLeader)
	pods := deployStatefulSet(t, h, "web", 1)
	victims := withPods(pods, 1)

	groupVersions := func() map[string]int {
		out := map[string]int{}
		for _, id := range h.IDs {
			st, err := h.Replicas[id].Status(h.ctx)
			if err != nil || st.Raft == nil {
				continue
			}
			out[id] = st.Raft.GroupLedgerVersion
		}
		return out
	}

	for i, id := range h.IDs {
		if i == 1 {
			// A fence opened in a mixed group, in flight through the
			// next upgrades (one node: two of five would be a storm).
			h.KillNode(victims[0])
			h.WaitFence(victims[0], waitFence, phasesFencing...)
		}
		r := h.Replicas[id]
		h.Timeline.Record(ReplicaKill, id)
		require.NoError(t, r.Stop())
		r.binary = newBin
		snapshotOften(t, r)
		h.StartReplica(id)
		h.WaitLeader(waitLeader)
		h.wait(waitLeader, "replica "+id+" ready", func() (bool, string) {
			st, err := r.Status(h.ctx)
			if err != nil {
				return false, err.Error()
			}
			return st.Ready && st.Raft != nil && st.Raft.LedgerHalted == "", "not ready"
		})
		if i < len(h.IDs)-1 {
			for rid, v := range groupVersions() {
				if v != 0 {
					assert.Equal(t, ledger.LegacyVersion, v, "%s: the group stays at version 2 while a replica runs the previous build", rid)
				}
			}
		}
	}
	h.wait(2*time.Minute, fmt.Sprintf("group ledger version %d on every replica", ledger.Version), func() (bool, string) {
		v := groupVersions()
		for _, id := range h.IDs {
			if v[id] != ledger.Version {
				return false, "not yet"
			}
		}
		return true, ""
	})
	requireVerified(t, h, h.WaitFence(victims[0], waitFence, phasesEvicted...))
	rollback := ""
	leader := h.WaitLeader(waitLeader)
	for _, id := range h.IDs {
		if id != leader {
			rollback = id
		}
	}
	// Entries at the new version (operator pauses through a follower)
	// until every snapshot the replica keeps is of it: Raft would restore
	// an older one it can read.
	i := 0
	newest := fmt.Sprintf(`"ledgerVersion":%d`, ledger.Version)
	h.wait(3*time.Minute, fmt.Sprintf("only version %d snapshots on %s", ledger.Version, rollback), func() (bool, string) {
		hdrs := snapshotHeaders(h.Replicas[rollback])
		all := len(hdrs) > 0
		for _, hdr := range hdrs {
			all = all && strings.Contains(hdr, newest)
		}
		if all {
			return true, ""
		}
		for _, cmd := range []string{"pause", "resume"} {
			out, err := h.CLI(rollback, cmd, "--reason", fmt.Sprintf("e2e: after the upgrade %d", i), "--operator", "e2e")
			require.NoError(t, err, out)
		}
		i++
		return false, strings.Join(hdrs, "; ") + " | " + snapshotLog(h.Replicas[rollback])
	})

	// Every replica's log replays to the same ledger, nothing refused,
	// compared at the last index every replica holds.
	for _, id := range h.IDs {
		h.Timeline.Record(ReplicaKill, id)
		require.NoError(t, h.Replicas[id].Stop())
	}
	upTo := uint64(0)
	for _, id := range h.IDs {
		last := lastLogIndex(t, h.Replicas[id].DataDir)
		if upTo == 0 || last < upTo {
			upTo = last
		}
	}
	var want string
	for _, id := range h.IDs {
		fsm := replayTo(t, h.Replicas[id].DataDir, upTo)
		require.Nil(t, fsm.Halted(), id)
		st := fsm.Copy()
		require.Equal(t, upTo, st.Index, id)
		assert.Zero(t, st.Rejected, "%s refused entries: %v", id, st.Rejections)
		assert.Equal(t, ledger.Version, st.GroupVersion(), id)
		d, err := fsm.Dump()
		require.NoError(t, err)
		if want == "" {
			want = string(d)
			continue
		}
		assert.JSONEq(t, want, string(d), "%s's ledger differs", id)
	}

	// Roll one replica back to the previous build: it refuses the new
	// version's snapshot and does not run.
	r := h.Replicas[rollback]
	r.binary = oldBin
	h.StartReplica(rollback)
	h.wait(time.Minute, rollback+" to exit", func() (bool, string) { return !r.Running(), "still running" })
	logb, err := os.ReadFile(r.LogPath)
	require.NoError(t, err)
	assert.Contains(t, string(logb), "ledger snapshot: version 2, this ledger reads 1..1")
}

func openStore(t *testing.T, dataDir string) *raftboltdb.BoltStore {
	t.Helper()
	store, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dataDir, "raft", "raft.db"),
		BoltOptions: &bolt.Options{ReadOnly: true, Timeout: 10 * time.Second}})
	require.NoError(t, err, "open the log of %s", dataDir)
	return store
}

func lastLogIndex(t *testing.T, dataDir string) uint64 {
	t.Helper()
	store := openStore(t, dataDir)
	defer store.Close()
	last, err := store.LastIndex()
	require.NoError(t, err)
	return last
}

// replayTo builds a replica's ledger at index upTo from its newest
// snapshot at or before it and its log, as the replica would.
func replayTo(t *testing.T, dataDir string, upTo uint64) *ledger.FSM {
	t.Helper()
	fsm := ledger.New()
	var from uint64
	snaps, err := raft.NewFileSnapshotStoreWithLogger(filepath.Join(dataDir, "raft", "snapshots"), 10, hclog.NewNullLogger())
	require.NoError(t, err)
	list, err := snaps.List()
	require.NoError(t, err)
	for _, m := range list { // newest first
		if m.Index > upTo {
			continue
		}
		_, rc, err := snaps.Open(m.ID)
		require.NoError(t, err)
		require.NoError(t, fsm.Restore(rc), "restore snapshot %s of %s", m.ID, dataDir)
		from = m.Index
		break
	}
	store := openStore(t, dataDir)
	defer store.Close()
	first, err := store.FirstIndex()
	require.NoError(t, err)
	require.LessOrEqual(t, first, from+1, "%s: the log starts at %d, the snapshot ends at %d", dataDir, first, from)
	for idx := from + 1; idx <= upTo; idx++ {
		var l raft.Log
		require.NoError(t, store.GetLog(idx, &l), "%s: entry %d", dataDir, idx)
		fsm.Apply(&l)
	}
	return fsm
}

// snapshotLog is what a replica's log says of snapshots, last lines first.
func snapshotLog(r *Replica) string {
	b, _ := os.ReadFile(r.LogPath)
	var out []string
	lines := strings.Split(string(b), "\n")
	for i := len(lines) - 1; i >= 0 && len(out) < 4; i-- {
		if strings.Contains(strings.ToLower(lines[i]), "snapshot") {
			out = append(out, lines[i])
		}
	}
	entries, _ := os.ReadDir(filepath.Join(r.DataDir, "raft", "snapshots", "snapshots"))
	for _, e := range entries {
		out = append(out, "dir "+e.Name())
	}
	cfg, _ := os.ReadFile(r.ConfigPath)
	_, raftCfg, _ := strings.Cut(string(cfg), "raft:")
	raftCfg, _, _ = strings.Cut(raftCfg, "replica:")
	return strings.Join(out, " || ") + " || raft:" + raftCfg
}
