package cluster

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRejoinedReplicaDoesNotVoteBeforeCaughtUp: entries committed by the
// leader and a second replica C while the third, B, lags behind a
// partition. C then loses its store and rejoins without state, and the
// leader dies. B and C are a majority, but B lacks the committed entries
// and C has nothing: C must neither vote for B nor stand itself, so no
// leader is elected (Raft would let an empty replica elect B, and the
// committed entries would be lost). When the old leader returns, a leader
// with the whole log is elected, C catches up and votes again, and every
// replica holds the entries.
func TestRejoinedReplicaDoesNotVoteBeforeCaughtUp(t *testing.T) {
	g := newGroup(t, 3)
	fn := newFaultNet(t, g)
	g.startAll()
	leader, l := waitLeader(t, g.running(), waitLong)
	waitSameLedger(t, g.running(), applyNotes(t, leader, l, "before", 1))
	var b, c string
	for _, id := range g.ids() {
		switch {
		case id == leader.ID():
		case b == "":
			b = id
		default:
			c = id
		}
	}
	fn.isolate(t, b)
	index := applyNotes(t, leader, l, "committed-without-b", 3)
	waitSameLedger(t, []*Node{leader, g.node(c)}, index)

	// C loses its store and rejoins without state; the leader dies.
	g.stop(c)
	require.NoError(t, os.Truncate(storePath(g.cfgs[c].DataDir), 0))
	_, err := RecoverDataDir(g.cfgs[c].DataDir, Rejoin, time.Now())
	require.NoError(t, err)
	old := leader.ID()
	g.stop(old)
	fn.heal(t)
	rejoined := g.start(c)
	require.True(t, rejoined.Catching())

	// Many election rounds: B asks for votes, C withholds its own, and
	// nobody leads.
	assert.Never(t, func() bool {
		for _, n := range g.running() {
			if n.IsLeader() {
				return true
			}
		}
		return false
	}, 10*g.cfgs[b].Timings.ElectionTimeout, 20*time.Millisecond, "a replica without the log elected a leader")
	assert.True(t, rejoined.Catching())
	assert.FileExists(t, filepath.Join(g.cfgs[c].DataDir, "raft", markerRejoin))

	// The old leader returns: one with the whole log leads, C catches up.
	g.start(old)
	leader, l = waitLeader(t, g.running(), waitLong)
	index = applyNotes(t, leader, l, "after", 1)
	final := waitSameLedger(t, g.running(), index)
	assert.Contains(t, final, "committed-without-b-2", "a committed entry was lost")
	require.Eventually(t, func() bool { return !rejoined.Catching() }, waitLong, 20*time.Millisecond)
	require.Eventually(t, func() bool {
		_, err := os.Stat(filepath.Join(g.cfgs[c].DataDir, "raft", markerRejoin))
		return os.IsNotExist(err)
	}, waitLong, 20*time.Millisecond, "the rejoin marker goes once the replica has caught up")

	// Caught up, C votes and may lead again: without the old leader, B and C elect one.
	g.stop(leader.ID())
	waitLeader(t, g.running(), waitLong)
}
