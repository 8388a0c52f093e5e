package stonith

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/cluster/ledger"
	"github.com/fenced-project/fenced/detector"
)

// A node that comes back under a new name for its array object (a
// PowerStore node with a new IP registers a new host): the array's Undo
// recognises it by the identity learned from the node's current CSINode,
// which the controller hands it before each undo. Until that identity is
// learned the initiators are on a host that is not known to be the
// node's: a permanent conflict, tried once per reconcile and retried with
// the record's backoff, never within one reconcile.
func TestRestoreSettlesOnceTheNewHostIsLearned(t *testing.T) {
	w := newWorld(t, func(cfg *Config) { cfg.ArrayBackoff = time.Hour })
	var (
		mu    sync.Mutex
		calls []time.Time
	)
	newHost := arrayclients.Identity{Array: "a1", Family: arrayclients.PowerFlex, Node: "n1", ObjectID: "host-n1-new", ObjectName: "csi-node-m1-10.0.0.2"}
	w.arrays["a1"].set(func(a *fakeArray) {
		a.undoFn = func(_ arrayclients.Plan, scope arrayclients.RestoreScope) error {
			mu.Lock()
			calls = append(calls, time.Now())
			mu.Unlock()
			if scope.Learned == nil || scope.Learned.ObjectID != newHost.ObjectID {
				return fmt.Errorf("%w: initiator iqn.n1 is registered with host %s, not with host csi-node-m1-10.0.0.1",
					arrayclients.ErrIdentityConflict, newHost.ObjectName)
			}
			return nil
		}
	})
	_, stop := w.lead()
	defer stop()
	w.verdict("n1", detector.Failed)
	w.waitState(ledger.StateEvicted)
	w.reboot("boot-2")

	require.Eventually(t, func() bool {
		st := w.ctrl.Status()
		return len(st.Fences) == 1 && strings.Contains(st.Fences[0].Blocked, newHost.ObjectName)
	}, 10*time.Second, 2*time.Millisecond, "the conflict was not reported: %+v", w.ctrl.Status())
	// An array retry within one reconcile would first wait ArrayBackoff
	// (an hour here): three calls are three reconciles, each trying once.
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(calls) >= 3
	}, 10*time.Second, 2*time.Millisecond, "the blocked restore was not retried, or was retried within a reconcile")
	assert.Equal(t, ledger.StateUnfenceIntent, w.state())

	// The node's identity is learned from its new CSINode ID.
	ids := map[string]arrayclients.Identity{"a1": newHost}
	for _, name := range []string{"a2", "a3"} {
		ids[name] = arrayclients.Identity{Array: name, Family: arrayclients.PowerFlex, Node: "n1", ObjectID: "sdc-n1"}
	}
	w.group.must(t, &ledger.SetIdentities{Meta: w.group.meta(), Cluster: "c1", Node: "n1", BootID: "boot-2", Identities: ids})
	w.waitClosed()
	assert.Empty(t, w.ctrl.Status().Fences)
	w.group.fsm.Read(func(s *ledger.State) {
		assert.Equal(t, newHost.ObjectID, s.Node("c1", "n1").Identities["a1"].ObjectID)
	})
}
