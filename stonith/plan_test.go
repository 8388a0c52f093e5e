package stonith

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
)

func TestPlanNodeShowsCutsAndGaps(t *testing.T) {
	w := newWorld(t)
	// A volume of a driver fenced does not know, and one on an array no
	// configuration claims: both gaps, named with their reasons.
	w.fp.add("n1", arrayclients.KubeVolume{PV: "pv-nfs", Driver: "nfs.example.com", Handle: "x", Attached: true})
	w.fp.attach("n1", "pv-far", "a9")
	before := w.log.list()

	p, err := w.ctrl.PlanNode(t.Context(), PlanRequest{Cluster: "c1", Node: "n1"})
	require.NoError(t, err)
	assert.False(t, p.Protected)
	assert.Len(t, p.Footprint, 5)
	reasons := map[string]arrayclients.GapReason{}
	for _, g := range p.Gaps {
		reasons[g.Volume] = g.Reason
	}
	assert.Equal(t, map[string]arrayclients.GapReason{"pv-nfs": arrayclients.GapUnknownDriver,
		"pv-far": arrayclients.GapArrayNotConfigured}, reasons)
	require.Len(t, p.Arrays, 3)
	for _, a := range p.Arrays {
		require.Len(t, a.Volumes, 1, a.Array)
		assert.Equal(t, "pv-"+a.Array, a.Volumes[0].Volume)
		assert.Equal(t, arrayclients.CutSDCUnmap, a.Volumes[0].Cut)
		assert.Equal(t, "sdc-n1", a.Identity)
		assert.Empty(t, a.Error)
	}
	assert.Equal(t, before, w.log.list(), "planning wrote nothing")

	// A node with only cuttable volumes is protected.
	w.fp.detach("n1")
	w.fp.attach("n1", "pv-a1", "a1")
	p, err = w.ctrl.PlanNode(t.Context(), PlanRequest{Cluster: "c1", Node: "n1"})
	require.NoError(t, err)
	assert.True(t, p.Protected, p.Gaps)
	assert.Empty(t, p.Gaps)
}

func TestPlanNodeUnlearnedAndUnreadable(t *testing.T) {
	w := newWorld(t)
	// n2's identities were never learned: a node-wide gap.
	w.fp.attach("n2", "pv-x", "a1")
	p, err := w.ctrl.PlanNode(t.Context(), PlanRequest{Cluster: "c1", Node: "n2"})
	require.NoError(t, err)
	assert.False(t, p.Protected)
	require.NotEmpty(t, p.Gaps)
	assert.Equal(t, arrayclients.GapIdentitiesNotLearned, p.Gaps[0].Reason)

	// An array that cannot be read leaves the node not proven protected.
	w.arrays["a2"].set(func(a *fakeArray) { a.planErr = assert.AnError })
	p, err = w.ctrl.PlanNode(t.Context(), PlanRequest{Cluster: "c1", Node: "n1"})
	require.NoError(t, err)
	assert.False(t, p.Protected)
	for _, a := range p.Arrays {
		if a.Array == "a2" {
			assert.Contains(t, a.Error, assert.AnError.Error())
		}
	}

	_, err = w.ctrl.PlanNode(t.Context(), PlanRequest{Cluster: "nope", Node: "n1"})
	require.ErrorIs(t, err, ErrUnknownCluster)
	_, err = w.ctrl.PlanNode(t.Context(), PlanRequest{Cluster: "c1"})
	require.ErrorIs(t, err, ErrBadRequest)
}

func TestPlanRouteNeedsCredentials(t *testing.T) {
	w := newWorld(t)
	srv := newAPIServer(t, w)
	c := &Client{BaseURL: srv.URL}
	_, err := c.Plan(t.Context(), PlanRequest{Cluster: "c1", Node: "n1"})
	var ae *APIError
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, http.StatusUnauthorized, ae.StatusCode)

	c.Token = testToken
	p, err := c.Plan(t.Context(), PlanRequest{Cluster: "c1", Node: "n1"})
	require.NoError(t, err)
	assert.True(t, p.Protected)
	assert.Len(t, p.Arrays, 3)

	_, err = c.Plan(t.Context(), PlanRequest{Cluster: "c9", Node: "n1"})
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, http.StatusNotFound, ae.StatusCode)
}

func TestRestoreShortfallNamesWhatIsWrong(t *testing.T) {
	assert.Equal(t, "read-back shows entries missing: initiator iqn.x",
		restoreShortfall(arrayclients.Verification{Missing: []string{"initiator iqn.x"}}))
	assert.Equal(t, "read-back shows entries missing: a; access the node must not have: volume pv-1 (moved to host h2)",
		restoreShortfall(arrayclients.Verification{Missing: []string{"a"}, Remaining: []string{"volume pv-1 (moved to host h2)"}}))
	assert.Equal(t, "read-back does not show the node restored", restoreShortfall(arrayclients.Verification{}))
}
