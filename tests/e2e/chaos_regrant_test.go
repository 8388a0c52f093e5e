package e2e

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/fenced-project/fenced/cluster/ledger"
	"github.com/fenced-project/fenced/stonith"
	"github.com/fenced-project/fenced/tests/invariants"
)

// The figures match each injected publish with the access the checker
// found regained within it, by array and node, and say who cut it.
func TestHeldFiguresMatchFaults(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	faults := []RegrantFault{
		{Node: "w1", PV: "pv-1", Array: "pstore-1", From: at(1000), To: at(1100)},
		{Node: "w1", PV: "pv-2", Array: "pflex-1", From: at(2000), To: at(2100), Err: errors.New("already published")},
		{Node: "w2", PV: "pv-3", Array: "pstore-1", From: at(3000), To: at(3100)},
		{Node: "w2", PV: "pv-3", Array: "pstore-1", From: at(5000), To: at(5100)},
		// Its publish changed nothing: the node had the access already.
		{Node: "w2", PV: "pv-3", Array: "pstore-1", From: at(7000), To: at(7100)},
	}
	held := []invariants.HeldAccess{
		{Fence: "f1", Subject: "e2e/w1", Array: "pstore-1", GrantAt: at(1050), GrantBy: "csi/127.0.0.1:1", CutAt: at(4050), CutBy: "a/127.0.0.1:2"},
		// Another node's access in the same moment is not the fault's.
		{Fence: "f9", Subject: "e2e/w9", Array: "pstore-1", GrantAt: at(3050), GrantBy: "csi/127.0.0.1:1"},
		{Fence: "f2", Subject: "e2e/w2", Array: "pstore-1", GrantAt: at(3050), GrantBy: "csi/127.0.0.1:1", CutAt: at(3550), CutBy: "csi/127.0.0.1:1"},
		{Fence: "f2", Subject: "e2e/w2", Array: "pstore-1", GrantAt: at(5050), GrantBy: "csi/127.0.0.1:1"},
		// fenced's own write (an unfence) is no fault's grant.
		{Fence: "f2", Subject: "e2e/w2", Array: "pstore-1", GrantAt: at(7050), GrantBy: "b/127.0.0.1:3", CutAt: at(7060), CutBy: "b/127.0.0.1:3"},
	}
	fences := []*ledger.Fence{{ID: "f1", Steps: []ledger.Step{
		{To: ledger.StateEvicted}, {To: ledger.StateFencing, Note: stonith.RegressionNote + " (was evicted): pstore-1: x"},
		{To: ledger.StateFencing, Note: "something else"},
	}}}
	fig := heldFigures(faults, held, fences, 5*time.Second)
	assert.Equal(t, HeldFigures{Period: 5 * time.Second, Injected: 5, Refused: 1, Granted: 3, CutByFenced: 1, CutByDriver: 1,
		NotCut: 1, MaxCut: 3 * time.Second, MedianCut: 3 * time.Second, Regressions: 1}, fig)
	assert.Contains(t, fig.String(), "5 injected, 1 refused or failed, 3 gave access while held")
}
