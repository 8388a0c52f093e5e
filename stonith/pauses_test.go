package stonith

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/cluster/ledger"
	"github.com/fenced-project/fenced/detector"
)

// TestTwoPausesOneResume: two operators pause; one resumes; the other's
// pause stays in effect, the answer says so, and /v1/fences shows it.
func TestTwoPausesOneResume(t *testing.T) {
	w := newWorld(t)
	_, stop := w.lead()
	defer stop()
	ctx := context.Background()

	res, err := w.ctrl.SetPause(ctx, "token/alice", PauseRequest{Cluster: "c1", Reason: "array upgrade"}, true)
	require.NoError(t, err)
	require.NotNil(t, res.Paused)
	require.Len(t, *res.Paused, 1)
	alice := (*res.Paused)[0]
	assert.Equal(t, "c1", alice.Scope)
	assert.Equal(t, "token/alice", alice.Operator)
	assert.Contains(t, res.Message, "fencing paused for cluster c1: "+alice.ID)

	res, err = w.ctrl.SetPause(ctx, "token/bob", PauseRequest{Reason: "network change"}, true)
	require.NoError(t, err)
	require.Len(t, *res.Paused, 2)

	res, err = w.ctrl.SetPause(ctx, "token/bob", PauseRequest{Reason: "network change done"}, false)
	require.NoError(t, err)
	assert.Contains(t, res.Message, "ended pause-")
	assert.Contains(t, res.Message, "token/bob")
	require.Len(t, *res.Paused, 1, "alice's pause stays")
	assert.Equal(t, alice.ID, (*res.Paused)[0].ID)
	assert.Contains(t, StillPaused(*res.Paused), "still paused (1)")
	assert.Contains(t, StillPaused(*res.Paused), "cluster c1 by token/alice")
	body, err := json.Marshal(res)
	require.NoError(t, err)
	assert.Contains(t, string(body), `"stillPaused":[{"id":"`+alice.ID+`","scope":"c1","operator":"token/alice"`)

	// A verdict fence waits while alice's pause holds.
	w.verdict("n1", detector.Failed)
	require.Eventually(t, func() bool {
		st := w.ctrl.Status()
		return len(st.Held) > 0 && strings.Contains(st.Held[0].Note, "paused")
	}, 10*time.Second, 2*time.Millisecond, "the failed node is never held by the pause")
	st := w.ctrl.Status()
	require.Len(t, st.Pauses, 1)
	assert.Equal(t, []string{"c1"}, st.PausedClusters)
	assert.False(t, st.Paused)
	assert.Empty(t, st.Fences)

	// carol holds no pause: her resume ends nothing and says what stays.
	_, err = w.ctrl.SetPause(ctx, "token/carol", PauseRequest{Reason: "go"}, false)
	require.ErrorIs(t, err, ErrConflict)
	assert.Contains(t, err.Error(), "you (token/carol) hold no pause")
	assert.Contains(t, err.Error(), alice.ID)
	_, err = w.ctrl.SetPause(ctx, "token/carol", PauseRequest{Reason: "go", HeldBy: "token/bob"}, false)
	require.ErrorIs(t, err, ErrConflict)

	res, err = w.ctrl.SetPause(ctx, "token/carol", PauseRequest{Reason: "alice is away", ID: alice.ID}, false)
	require.NoError(t, err)
	assert.Empty(t, *res.Paused)
	assert.Equal(t, "nothing is paused: fencing runs for every cluster", StillPaused(*res.Paused))
	w.waitState(ledger.StateEvicted)

	var actions []ledger.Action
	w.group.fsm.Read(func(s *ledger.State) { actions = append(actions, s.Actions...) })
	var who []string
	for _, a := range actions {
		who = append(who, a.Action+" "+a.Operator)
	}
	assert.Equal(t, []string{"pause token/alice", "pause token/bob", "resume token/bob", "resume token/carol"}, who)
}

// TestPauseInAnOlderGroup: a group that runs a ledger version before pause
// holders keeps the single pause slot, says so, and refuses a resume by id.
func TestPauseInAnOlderGroup(t *testing.T) {
	w := newWorldOn(t, newLegacyGroup())
	_, stop := w.lead()
	defer stop()
	ctx := context.Background()
	res, err := w.ctrl.SetPause(ctx, "token/alice", PauseRequest{Cluster: "c1", Reason: "upgrade"}, true)
	require.NoError(t, err)
	assert.Contains(t, res.Message, "a pause is one slot per scope")
	assert.Contains(t, res.Message, "version 5")
	require.Len(t, *res.Paused, 1)
	assert.Equal(t, ledger.LegacyPauseID+"-c1", (*res.Paused)[0].ID)

	_, err = w.ctrl.SetPause(ctx, "token/alice", PauseRequest{ID: ledger.LegacyPauseID + "-c1", Reason: "done"}, false)
	require.ErrorIs(t, err, ErrLedgerVersion)
	assert.Contains(t, err.Error(), "needs ledger version 5")

	res, err = w.ctrl.SetPause(ctx, "token/alice", PauseRequest{Cluster: "c1", Reason: "done"}, false)
	require.NoError(t, err)
	assert.Empty(t, *res.Paused)

	_, err = w.ctrl.Confirm(ctx, "token/alice", ConfirmRequest{Cluster: "c1", Node: "n1", Array: "a1", Reason: "gone"})
	require.ErrorIs(t, err, ErrLedgerVersion)
	assert.Contains(t, err.Error(), "needs ledger version 5")
}

// TestConfirmTakesTheFencePastAGoneArray: array a3 is gone for good, so
// the fence of n1 cannot be read back there and holds in fencing. An
// operator confirms that n1 cannot write to a3: the ledger records who,
// why and when; the fence goes on to taint and evict; the node's Event,
// the log and the fence's status say so. The other arrays are still cut
// and read back.
func TestConfirmTakesTheFencePastAGoneArray(t *testing.T) {
	logs := &lockedBuffer{}
	w := newWorld(t, func(cfg *Config) { cfg.Logger = slog.New(slog.NewJSONHandler(logs, nil)) })
	gone := errors.New("dial tcp 192.0.2.3:443: connect: no route to host")
	w.arrays["a3"].set(func(a *fakeArray) { a.planErr, a.applyErr, a.verifyErr = gone, gone, gone })
	_, stop := w.lead()
	defer stop()
	ctx := context.Background()

	_, err := w.ctrl.Confirm(ctx, "token/alice", ConfirmRequest{Cluster: "c1", Node: "n1", Array: "a3", Reason: "x"})
	require.ErrorIs(t, err, ErrConflict, "no open fence yet")

	w.verdict("n1", detector.Failed)
	require.Eventually(t, func() bool {
		st := w.ctrl.Status()
		return len(st.Fences) == 1 && strings.Contains(st.Fences[0].Blocked, "a3")
	}, 10*time.Second, 2*time.Millisecond, "the fence never blocked on the gone array")
	assert.Equal(t, ledger.StateFencing, w.state())
	assert.False(t, w.arrays["a1"].hasAccess("n1"))
	assert.False(t, w.arrays["a2"].hasAccess("n1"))

	_, err = w.ctrl.Confirm(ctx, "token/alice", ConfirmRequest{Cluster: "c1", Node: "n1", Array: "a9", Reason: "x"})
	require.ErrorIs(t, err, ErrBadRequest, "an array not configured")
	_, err = w.ctrl.Confirm(ctx, "token/alice", ConfirmRequest{Cluster: "c1", Node: "n1", Array: "a3"})
	require.ErrorIs(t, err, ErrBadRequest, "no reason")

	reason := "array a3 destroyed in the machine-room flood; ticket OPS-4711"
	res, err := w.ctrl.Confirm(ctx, "token/alice", ConfirmRequest{Cluster: "c1", Node: "n1", Array: "a3", Reason: reason})
	require.NoError(t, err)
	assert.Contains(t, res.Message, "operator token/alice confirmed")
	assert.Contains(t, res.Message, "for this fence only")
	w.waitState(ledger.StateEvicted)

	f := w.group.fence("c1", "n1")
	require.Len(t, f.Confirmations, 1)
	cf := f.Confirmations[0]
	assert.Equal(t, "token/alice", cf.Operator)
	assert.Equal(t, reason, cf.Reason)
	assert.Equal(t, "a3", cf.Array)
	assert.False(t, cf.At.IsZero())
	assert.True(t, f.Results["a1"].Verified)
	assert.True(t, f.Results["a2"].Verified)
	var fenced ledger.Step
	for _, s := range f.Steps {
		if s.To == ledger.StateFenced {
			fenced = s
		}
	}
	assert.Contains(t, fenced.Note, "verified fenced on a1, a2")
	assert.Contains(t, fenced.Note, "operator token/alice confirmed")
	var actions []ledger.Action
	w.group.fsm.Read(func(s *ledger.State) { actions = s.Node("c1", "n1").Actions })
	require.NotEmpty(t, actions)
	assert.Equal(t, "confirm", actions[len(actions)-1].Action)
	assert.Equal(t, "token/alice", actions[len(actions)-1].Operator)

	msgs := w.kube.eventMessages(EventFenceConfirmed)
	require.Len(t, msgs, 1)
	assert.Contains(t, msgs[0], "token/alice")
	assert.Contains(t, msgs[0], "cannot write to array a3")
	assert.Contains(t, msgs[0], reason)

	out := logs.String()
	assert.Contains(t, out, `"level":"WARN","msg":"operator confirmed a fenced node cannot write to an array"`)
	assert.Contains(t, out, `"operator":"token/alice"`)
	assert.Contains(t, out, `"level":"WARN","msg":"fence goes on past arrays an operator confirmed the node cannot write to"`)

	st := w.ctrl.Status()
	require.Len(t, st.Fences, 1)
	require.Len(t, st.Fences[0].Confirmations, 1)
	for _, a := range st.Fences[0].Arrays {
		if a.Array == "a3" {
			assert.Equal(t, StepConfirmed, a.Step)
			assert.Contains(t, a.Confirmed, "token/alice")
		} else {
			assert.Equal(t, "verified", a.Step)
		}
	}
}

// TestUnfenceWaitsForAConfirmedGoneArray: the unfence of a fence that went
// past a gone array on an operator's confirmation gives access back on the
// arrays that answer and stays in unfence-intent while the gone one does
// not (a cut of the fence may still be in place there, and fenced never
// closes a fence over one): the block names the confirmation and what ends
// the wait. When the array answers again the unfence restores it there
// and finishes.
func TestUnfenceWaitsForAConfirmedGoneArray(t *testing.T) {
	w := newWorld(t)
	gone := errors.New("dial tcp 192.0.2.3:443: connect: no route to host")
	// a3 planned, then gone before its cut was written or read back.
	w.arrays["a3"].set(func(a *fakeArray) { a.applyErr, a.verifyErr, a.undoErr = gone, gone, gone })
	_, stop := w.lead()
	defer stop()
	ctx := context.Background()

	w.verdict("n1", detector.Failed)
	require.Eventually(t, func() bool {
		st := w.ctrl.Status()
		return len(st.Fences) == 1 && strings.Contains(st.Fences[0].Blocked, "a3")
	}, 10*time.Second, 2*time.Millisecond, "the fence never blocked on the gone array")
	_, err := w.ctrl.Confirm(ctx, "token/alice", ConfirmRequest{Cluster: "c1", Node: "n1", Array: "a3", Reason: "a3 destroyed; OPS-4711"})
	require.NoError(t, err)
	w.waitState(ledger.StateEvicted)

	w.verdict("n1", detector.Healthy)
	_, err = w.ctrl.Unfence(ctx, "token/bob", UnfenceRequest{Cluster: "c1", Node: "n1", Reason: "node repaired", Force: true})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		st := w.ctrl.Status()
		return len(st.Fences) == 1 && strings.Contains(st.Fences[0].Blocked, "confirmed gone by token/alice")
	}, 10*time.Second, 2*time.Millisecond, "the unfence never named the confirmed array")
	st := w.ctrl.Status()
	assert.Contains(t, st.Fences[0].Blocked, "a3 (confirmed gone by token/alice: a3 destroyed; OPS-4711)")
	assert.Contains(t, st.Fences[0].Blocked, "until then the node stays fenced")
	assert.Equal(t, ledger.StateUnfenceIntent, w.state(), "no restore is proven on a3")
	f := w.group.fence("c1", "n1")
	for _, a := range []string{"a1", "a2"} {
		require.NotNil(t, f.Results[a])
		assert.True(t, f.Results[a].RestoreVerified, a)
		assert.True(t, w.arrays[a].hasAccess("n1"), a)
	}

	w.arrays["a3"].set(func(a *fakeArray) { a.applyErr, a.verifyErr, a.undoErr = nil, nil, nil })
	w.waitClosed()
	assert.True(t, w.arrays["a3"].hasAccess("n1"))
}

// TestUnfenceAbandonsAConfirmedGoneArray: the unfence of a fence that went
// past a gone array on an operator's confirmation waits for that array
// until an operator abandons its restore; the fence then closes with the
// other arrays restored, the gone array never written to and recorded as
// not restored by that operator, with a WARN log and an Event. The
// abandonment is refused without a confirmation of the array, for an
// array not in the plan, and outside unfence-intent.
func TestUnfenceAbandonsAConfirmedGoneArray(t *testing.T) {
	logs := &lockedBuffer{}
	w := newWorld(t, func(cfg *Config) { cfg.Logger = slog.New(slog.NewJSONHandler(logs, nil)) })
	gone := errors.New("dial tcp 192.0.2.3:443: connect: no route to host")
	w.arrays["a3"].set(func(a *fakeArray) { a.applyErr, a.verifyErr, a.undoErr = gone, gone, gone })
	_, stop := w.lead()
	defer stop()
	ctx := context.Background()
	abandon := func(array string) error {
		_, err := w.ctrl.Abandon(ctx, "token/carol", AbandonRequest{Cluster: "c1", Node: "n1", Array: array,
			Reason: "a3 decommissioned; OPS-4712"})
		return err
	}

	w.verdict("n1", detector.Failed)
	require.Eventually(t, func() bool {
		st := w.ctrl.Status()
		return len(st.Fences) == 1 && strings.Contains(st.Fences[0].Blocked, "a3")
	}, 10*time.Second, 2*time.Millisecond, "the fence never blocked on the gone array")
	err := abandon("a3")
	require.ErrorIs(t, err, ErrConflict, "not in unfence-intent")
	assert.Contains(t, err.Error(), "unfence-intent")
	_, err = w.ctrl.Confirm(ctx, "token/alice", ConfirmRequest{Cluster: "c1", Node: "n1", Array: "a3", Reason: "a3 destroyed; OPS-4711"})
	require.NoError(t, err)
	w.waitState(ledger.StateEvicted)

	w.verdict("n1", detector.Healthy)
	_, err = w.ctrl.Unfence(ctx, "token/bob", UnfenceRequest{Cluster: "c1", Node: "n1", Reason: "node repaired", Force: true})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		st := w.ctrl.Status()
		return len(st.Fences) == 1 && strings.Contains(st.Fences[0].Blocked, "--abandon-array a3")
	}, 10*time.Second, 2*time.Millisecond, "the blocked unfence never named the way out")
	require.Equal(t, ledger.StateUnfenceIntent, w.state())

	err = abandon("a9")
	require.ErrorIs(t, err, ErrBadRequest, "not in the plan")
	assert.Contains(t, err.Error(), `array "a9"`)
	err = abandon("a1")
	require.ErrorIs(t, err, ErrConflict, "a1 was not confirmed gone")
	assert.Contains(t, err.Error(), "fenced confirm")
	_, err = w.ctrl.Abandon(ctx, "token/carol", AbandonRequest{Cluster: "c1", Node: "n1", Array: "a3"})
	require.ErrorIs(t, err, ErrBadRequest, "no reason")

	undos, applies := 0, 0
	w.arrays["a3"].set(func(a *fakeArray) { undos, applies = a.undos, a.applies })
	res, err := w.ctrl.Abandon(ctx, "token/carol", AbandonRequest{Cluster: "c1", Node: "n1", Array: "a3",
		Reason: "a3 decommissioned; OPS-4712"})
	require.NoError(t, err)
	calls := 0
	w.arrays["a3"].set(func(a *fakeArray) {
		// From here on every Undo on a3 is counted (and still fails).
		a.undoErr = nil
		a.undoFn = func(arrayclients.Plan, arrayclients.RestoreScope) error { calls++; return gone }
	})
	assert.Contains(t, res.Message, "not restored: abandoned by token/carol")
	w.waitClosed()

	h := w.group.history("c1", "n1")
	f := h[len(h)-1]
	ab, ok := f.AbandonedRestore("a3")
	require.True(t, ok)
	assert.Equal(t, "token/carol", ab.Operator)
	assert.Equal(t, "a3 decommissioned; OPS-4712", ab.Reason)
	for _, a := range []string{"a1", "a2"} {
		require.NotNil(t, f.Results[a])
		assert.True(t, f.Results[a].RestoreVerified, a)
		assert.True(t, w.arrays[a].hasAccess("n1"), a)
	}
	assert.False(t, f.Results["a3"] != nil && f.Results["a3"].RestoreVerified)
	w.arrays["a3"].set(func(a *fakeArray) {
		assert.Equal(t, undos, a.undos, "no restore written to a3 after the abandonment")
		assert.Equal(t, applies, a.applies, "no cut written to a3 after the abandonment")
		assert.Zero(t, calls, "no restore tried on a3 after the abandonment")
	})
	var note string
	for _, s := range f.Steps {
		if s.To == ledger.StateRestored {
			note = s.Note
		}
	}
	assert.Contains(t, note, "restored and verified on a1, a2")
	assert.Contains(t, note, "a3 not restored: abandoned by token/carol")
	fs := fenceStatus(f)
	for _, as := range fs.Arrays {
		if as.Array == "a3" {
			assert.Equal(t, StepAbandoned, as.Step)
			assert.Contains(t, as.Abandoned, "OPS-4712")
		}
	}
	msgs := w.kube.eventMessages(EventFenceRestoreAbandoned)
	require.Len(t, msgs, 1)
	assert.Contains(t, msgs[0], "a3 not restored: abandoned by token/carol")
	assert.Contains(t, logs.String(), "operator abandoned the restore of an array confirmed gone")
}

// TestAbandonInAVersion5Group: a group that still runs ledger version 5
// refuses an abandonment, naming version 6.
func TestAbandonInAVersion5Group(t *testing.T) {
	g := newLegacyGroup()
	g.index++
	m := g.meta()
	m.V = 5
	buf, err := ledger.Encode(&ledger.SetLedgerVersion{Meta: m, LedgerVersion: 5})
	require.NoError(t, err)
	require.Nil(t, g.fsm.Apply(&raft.Log{Index: g.index, Term: g.term, Type: raft.LogCommand, Data: buf}))
	w := newWorldOn(t, g)
	_, stop := w.lead()
	defer stop()
	_, err = w.ctrl.Abandon(context.Background(), "token/alice", AbandonRequest{Cluster: "c1", Node: "n1", Array: "a1", Reason: "gone"})
	require.ErrorIs(t, err, ErrLedgerVersion)
	assert.Contains(t, err.Error(), "needs ledger version 6, the group runs 5")
}
