package stonith

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/cluster/ledger"
	"github.com/fenced-project/fenced/detector"
)

// A PowerStore CHAP initiator is given back as a placeholder that the CSI
// node plugin sets its own secret on (arrayclients TestChapNodeUnfence):
// until it has, the restore read-back names what it waits for, /status
// shows it on the fence, fenced's taint stays, and the fence closes once
// the read-back shows the node plugin's credentials.
func TestChapRestoreWaitsForTheNodePlugin(t *testing.T) {
	w := newWorld(t)
	const waiting = "initiator iqn.n1 (iSCSI) on host csi-node-m1-10.0.0.1: waiting for the CSI node plugin to set its own CHAP secret on it " +
		"(csi-powerstore's node plugin does so when it starts: restart its pod on the node if it started before the unfence)"
	var pluginSet atomic.Bool
	w.arrays["a1"].set(func(a *fakeArray) {
		a.verifyRestoreFn = func(arrayclients.Plan) arrayclients.Verification {
			if !pluginSet.Load() {
				return arrayclients.Verification{Missing: []string{waiting}, CheckedAt: time.Now().UTC()}
			}
			return arrayclients.Verification{Restored: true, CheckedAt: time.Now().UTC()}
		}
	})
	_, stop := w.lead()
	defer stop()
	w.verdict("n1", detector.Failed)
	w.waitState(ledger.StateEvicted)
	w.reboot("boot-2")

	require.Eventually(t, func() bool {
		st := w.ctrl.Status()
		return len(st.Fences) == 1 && strings.Contains(st.Fences[0].Blocked, "waiting for the CSI node plugin to set its own CHAP secret")
	}, 10*time.Second, 2*time.Millisecond, "the wait is not shown: %+v", w.ctrl.Status())
	assert.Equal(t, ledger.StateUnfenceIntent, w.state(), "the unfence waits")
	assert.Equal(t, []string{"fenced.io/fenced=" + w.group.fence("c1", "n1").ID + ":NoSchedule"}, w.kube.taints("n1"),
		"fenced's taint stays while the restore waits")

	// The node plugin's pod restarts and sets its secret.
	pluginSet.Store(true)
	w.waitClosed()
	assert.Empty(t, w.ctrl.Status().Fences)
}
