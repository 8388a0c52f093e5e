package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/cluster/ledger"
	"github.com/fenced-project/fenced/cmd/fenced/internal/opclient"
	"github.com/fenced-project/fenced/cmd/fenced/internal/replica"
	"github.com/fenced-project/fenced/cmd/fenced/internal/tables"
)

// historyLedger is a ledger holding two finished fences of w-1 and one of
// w-2 in cluster prod, and one of w-1 in cluster lab.
func historyLedger(t *testing.T) *ledger.FSM {
	t.Helper()
	t0 := time.Date(2026, 11, 20, 8, 0, 0, 0, time.UTC)
	rec := func(id, cluster, node string, opened time.Duration, state ledger.FenceState, steps ...ledger.Step) *ledger.Fence {
		at := t0.Add(opened)
		all := append([]ledger.Step{{To: ledger.StateIntent, At: at, By: "mgmt1", Index: 1, Term: 1}}, steps...)
		return &ledger.Fence{ID: id, Cluster: cluster, Node: node, Kind: ledger.KindFence, Origin: ledger.OriginVerdict,
			Reason: "node failed", State: state, Steps: all, OpenedAt: at, UpdatedAt: all[len(all)-1].At}
	}
	closed := func(at time.Duration, by string, forced bool) []ledger.Step {
		return []ledger.Step{
			{To: ledger.StateUnfenceIntent, At: t0.Add(at), By: "mgmt1", Operator: by, Forced: forced, Index: 2, Term: 1},
			{To: ledger.StateClosed, At: t0.Add(at + time.Minute), By: "mgmt1", Index: 3, Term: 1},
		}
	}
	st := ledger.NewState()
	st.Index, st.Term = 40, 1
	st.Clusters["prod"] = &ledger.ClusterState{Nodes: map[string]*ledger.NodeState{
		"w-1": {History: []*ledger.Fence{
			rec("fence-10", "prod", "w-1", 0, ledger.StateClosed, closed(time.Hour, "alice@mgmt2", true)...),
			rec("fence-20", "prod", "w-1", 24*time.Hour, ledger.StateAborted,
				ledger.Step{To: ledger.StateAborted, At: t0.Add(24*time.Hour + time.Second), By: "mgmt1", Note: "no array changed\nnode back", Index: 21, Term: 1}),
		}},
		"w-2": {History: []*ledger.Fence{rec("fence-15", "prod", "w-2", 2*time.Hour, ledger.StateClosed, closed(3*time.Hour, "", false)...)}},
	}}
	st.Clusters["lab"] = &ledger.ClusterState{Nodes: map[string]*ledger.NodeState{
		"w-1": {History: []*ledger.Fence{rec("fence-30", "lab", "w-1", 48*time.Hour, ledger.StateClosed, closed(49*time.Hour, "bob@mgmt1", false)...)}},
	}}
	// fence-30's unfence computed its scope again: one volume moved away.
	f30 := st.Clusters["lab"].Nodes["w-1"].History[0]
	f30.Scopes = []ledger.ScopeRecord{
		{At: t0.Add(49 * time.Hour), By: "mgmt1", Index: 2, Term: 1, Note: "unfence intent",
			Restore: map[string]arrayclients.RestoreScope{"pflex-1": {Wanted: []string{"pv-a", "pv-b"}}}},
		{At: t0.Add(49*time.Hour + time.Second), By: "mgmt1", Index: 3, Term: 1, Note: "no longer wanted on the node: pv-b (pflex-1)",
			Restore: map[string]arrayclients.RestoreScope{"pflex-1": {Wanted: []string{"pv-a"}}}},
	}
	l, err := ledger.FromState(st)
	require.NoError(t, err)
	return l
}

func TestHistoryFromTheLedger(t *testing.T) {
	l := historyLedger(t)
	ids := func(cluster, node string, limit int) []string {
		var out []string
		for _, f := range replica.ReadHistory(l, cluster, node, limit).Fences {
			out = append(out, f.ID)
		}
		return out
	}
	assert.Equal(t, []string{"fence-30", "fence-20", "fence-15", "fence-10"}, ids("", "", 0), "newest first")
	assert.Equal(t, []string{"fence-20", "fence-15", "fence-10"}, ids("prod", "", 0))
	assert.Equal(t, []string{"fence-20", "fence-10"}, ids("prod", "w-1", 0))
	assert.Equal(t, []string{"fence-30", "fence-20", "fence-10"}, ids("", "w-1", 0))
	assert.Equal(t, []string{"fence-30"}, ids("", "", 1))
	assert.Empty(t, ids("nope", "", 0))

	h := replica.ReadHistory(l, "prod", "w-1", 0)
	assert.Equal(t, uint64(40), h.AppliedIndex)
	require.Len(t, h.Fences, 2)
	assert.Equal(t, "alice@mgmt2", h.Fences[1].UnfenceOperator)
	assert.True(t, h.Fences[1].ForcedUnfence)
	assert.Equal(t, []string{"intent", "unfence-intent", "closed"}, func() []string {
		var s []string
		for _, st := range h.Fences[1].Steps {
			s = append(s, st.To)
		}
		return s
	}())

	// Every restore scope the unfence computed, in order.
	lab := replica.ReadHistory(l, "lab", "w-1", 0)
	require.Len(t, lab.Fences, 1)
	require.Len(t, lab.Fences[0].Scopes, 2)
	assert.Equal(t, map[string][]string{"pflex-1": {"pv-a", "pv-b"}}, lab.Fences[0].Scopes[0].Wanted)
	assert.Equal(t, map[string][]string{"pflex-1": {"pv-a"}}, lab.Fences[0].Scopes[1].Wanted)
	assert.Equal(t, "no longer wanted on the node: pv-b (pflex-1)", lab.Fences[0].Scopes[1].Note)
	assert.Empty(t, h.Fences[1].Scopes, "a record of an older version has none")

	// Served over HTTP and rendered by `fenced history`.
	srv := httptest.NewServer(replica.HistoryHandler("mgmt1", l, []string{"prod", "staging"}))
	t.Cleanup(srv.Close)
	e := &opclient.Endpoint{Base: srv.URL, HTTP: srv.Client()}
	got, err := e.History(context.Background(), "prod", "", 0)
	require.NoError(t, err)
	assert.Equal(t, "mgmt1", got.ReplicaID)
	require.Len(t, got.Fences, 3)
	var b bytes.Buffer
	require.NoError(t, tables.History(&b, got))
	out := b.String()
	t.Log("\n" + out)
	assert.Regexp(t, `fence-10\s+prod\s+w-1\s+fence\s+verdict\s+closed\s+\S+\s+\S+\s+alice@mgmt2 \(forced\)\s+node failed\n`, out)
	assert.Regexp(t, `fence-15\s+prod\s+w-2\s+fence\s+verdict\s+closed\s+\S+\s+\S+\s+-\s+node failed\n`, out)
	assert.Regexp(t, `fence-20\s+prod\s+w-1\s+fence\s+verdict\s+aborted\s+`, out)
	assert.Equal(t, 4, strings.Count(out, "\n"), "one line per record and the header")

	_, err = e.History(context.Background(), "", "", -1)
	require.NoError(t, err, "a non-positive limit is not sent")
	resp, err := http.Get(srv.URL + "/?limit=x")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)

	b.Reset()
	require.NoError(t, tables.History(&b, replica.ReadHistory(l, "nope", "", 0)))
	assert.Contains(t, b.String(), "No finished fence")

	// A cluster the replica does not know is an error naming those it
	// knows, not an empty history; a configured one without records is.
	_, err = e.History(context.Background(), "nosuch", "", 0)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `no cluster "nosuch" on replica mgmt1: its clusters are`)
	assert.Contains(t, err.Error(), "prod, staging")
	got, err = e.History(context.Background(), "staging", "", 0)
	require.NoError(t, err)
	assert.Empty(t, got.Fences)
}
