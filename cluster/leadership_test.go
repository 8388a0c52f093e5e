package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/cluster/ledger"
)

func TestLeadershipWaitOut(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	since := time.Now()
	l := Leadership{Leader: true, Replica: "r1", Term: 7, Since: since, Ctx: ctx, lease: 200 * time.Millisecond}
	assert.Equal(t, since.Add(300*time.Millisecond), l.SafeAt(100*time.Millisecond))

	require.NoError(t, l.WaitOut(context.Background(), 100*time.Millisecond))
	assert.False(t, time.Now().Before(l.SafeAt(100*time.Millisecond)), "returned before the previous leader's lease and request ran out")

	m := l.Meta()
	assert.Equal(t, ledger.Meta{V: ledger.Version, Term: 7, At: m.At, By: "r1"}, m)

	l.Since = time.Now()
	short, stop := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer stop()
	require.ErrorIs(t, l.WaitOut(short, time.Hour), context.DeadlineExceeded)
	cancel()
	require.ErrorIs(t, l.WaitOut(context.Background(), time.Hour), ErrNotLeader, "losing leadership ends the wait")
	require.ErrorIs(t, Leadership{}.WaitOut(context.Background(), 0), ErrNotLeader)
}

func TestLeadershipChangesAreSignalled(t *testing.T) {
	g := newGroup(t, 3)
	g.startAll()
	leader, l := waitLeader(t, g.running(), waitLong)
	got, changed := leader.Leadership()
	assert.Equal(t, l.Term, got.Term)
	select {
	case <-changed:
		t.Fatal("changed closed without a change")
	default:
	}
	id := leader.ID()
	g.stop(id)
	select {
	case <-changed:
	case <-time.After(waitLong):
		t.Fatal("changed not closed when leadership ended")
	}
	after, _ := leader.Leadership()
	assert.False(t, after.Leader)
	require.Error(t, after.Ctx.Err())
	_, err := leader.Apply(context.Background(), note(l, "after close"))
	require.Error(t, err)
}
