package stonith

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
)

// lockedBuffer is a log sink safe for concurrent writers.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestScanDriftReportsVolumesOnNoConfiguredArray(t *testing.T) {
	logs := &lockedBuffer{}
	w := newWorld(t, func(cfg *Config) { cfg.Logger = slog.New(slog.NewTextHandler(logs, nil)) })
	// Attached to nobody: one on an array no configuration lists, one on a
	// configured array, one of a driver that is not Dell's.
	w.fp.mu.Lock()
	w.fp.pvs = []arrayclients.KubeVolume{
		{PV: "pv-orphan", Driver: arrayclients.DriverPowerFlex, Handle: "a9-0001"},
		{PV: "pv-placed", Driver: arrayclients.DriverPowerFlex, Handle: "a2-0002"},
		{PV: "pv-ebs", Driver: "ebs.csi.aws.com", Handle: "vol-0a"},
	}
	w.fp.mu.Unlock()
	gauge := func(reason arrayclients.DriftReason) float64 {
		return testutil.ToFloat64(w.ctrl.metrics.unplaced.WithLabelValues("c1", string(reason)))
	}

	w.ctrl.scanDrift()
	st := w.ctrl.Status()
	require.Len(t, st.Unplaced, 1, "%+v", st.Unplaced)
	u := st.Unplaced[0]
	assert.Equal(t, "c1", u.Cluster)
	assert.Equal(t, "pv-orphan", u.PV)
	assert.Equal(t, arrayclients.DriverPowerFlex, u.Driver)
	assert.Equal(t, "a9-0001", u.Handle)
	assert.Equal(t, arrayclients.DriftArray, u.Reason)
	assert.Contains(t, u.Missing, "a9")
	assert.False(t, u.Since.IsZero())
	assert.Empty(t, st.Unprotected, "a volume attached to nobody leaves every node protected")
	assert.InDelta(t, 1.0, gauge(arrayclients.DriftArray), 0)
	assert.InDelta(t, 0.0, gauge(arrayclients.DriftMetroPartner), 0, "every reason has a series")
	line := "level=WARN msg=\"persistent volume is on no configured array"
	assert.Equal(t, 1, strings.Count(logs.String(), line), logs.String())
	assert.Contains(t, logs.String(), "pv=pv-orphan driver=csi-vxflexos.dellemc.com handle=a9-0001 reason=array")

	// fenced plan of any node names the cluster's drift; the node stays
	// protected, the volume not being in its footprint.
	p, err := w.ctrl.PlanNode(t.Context(), PlanRequest{Cluster: "c1", Node: "n1"})
	require.NoError(t, err)
	assert.True(t, p.Protected, p.Gaps)
	require.Len(t, p.Drift, 1)
	assert.Equal(t, "pv-orphan", p.Drift[0].PV)

	// Scanning again reports nothing new; Since is kept.
	w.ctrl.scanDrift()
	assert.Equal(t, 1, strings.Count(logs.String(), line))
	assert.Equal(t, u.Since, w.ctrl.Status().Unplaced[0].Since)

	// Attached to a node, the same volume is also the node's gap.
	w.fp.attach("n1", "pv-orphan", "a9")
	p, err = w.ctrl.PlanNode(t.Context(), PlanRequest{Cluster: "c1", Node: "n1"})
	require.NoError(t, err)
	assert.False(t, p.Protected)

	// Gone: reported once, the gauge back to 0.
	w.fp.detach("n1")
	w.fp.mu.Lock()
	w.fp.pvs = w.fp.pvs[1:]
	w.fp.mu.Unlock()
	w.ctrl.scanDrift()
	assert.Empty(t, w.ctrl.Status().Unplaced)
	assert.InDelta(t, 0.0, gauge(arrayclients.DriftArray), 0)
	assert.Contains(t, logs.String(), "persistent volume is no longer unplaced")
}

func TestScanDriftWaitsForSyncAndRunsOnChange(t *testing.T) {
	w := newWorld(t, func(cfg *Config) { cfg.Resync = time.Hour })
	w.fp.mu.Lock()
	w.fp.broken = assert.AnError // not synced
	w.fp.pvs = []arrayclients.KubeVolume{{PV: "pv-orphan", Driver: arrayclients.DriverPowerFlex, Handle: "a9-0001"}}
	w.fp.mu.Unlock()
	done := make(chan struct{})
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		defer close(done)
		w.ctrl.WatchProtection(ctx)
	}()
	defer func() { cancel(); <-done }()
	time.Sleep(50 * time.Millisecond)
	assert.Empty(t, w.ctrl.Status().Unplaced, "nothing is known before the caches sync")

	// Synced (or a PersistentVolume changed): the scan runs without
	// waiting for the resync interval.
	w.fp.mu.Lock()
	w.fp.broken = nil
	w.fp.mu.Unlock()
	w.ctrl.VolumesChanged()
	require.Eventually(t, func() bool { return len(w.ctrl.Status().Unplaced) == 1 }, 5*time.Second, 5*time.Millisecond)
}

// TestUnprotectedGaugeFollowsEachNode: the gauge changes with the node's
// entry in /status, not at the end of a sweep over every node, so a
// scrape never disagrees with the status read just before it.
func TestUnprotectedGaugeFollowsEachNode(t *testing.T) {
	w := newWorld(t)
	w.fp.mu.Lock()
	w.fp.pvs = []arrayclients.KubeVolume{{PV: "pv-far", Driver: arrayclients.DriverPowerFlex, Handle: "a9-0001"}}
	w.fp.mu.Unlock()
	w.fp.attach("n1", "pv-far", "a9")
	gauge := func() float64 {
		return testutil.ToFloat64(w.ctrl.metrics.unprotected.WithLabelValues("c1", string(arrayclients.GapArrayNotConfigured)))
	}
	cl := w.ctrl.clusters["c1"]
	require.NotNil(t, cl)

	w.ctrl.evaluateProtection(t.Context(), cl, "n1")
	st := w.ctrl.Status()
	require.Len(t, st.Unprotected, 1, "%+v", st.Unprotected)
	assert.Equal(t, "n1", st.Unprotected[0].Node)
	assert.InDelta(t, 1.0, gauge(), 0, "the gauge moved with the status entry")

	w.fp.detach("n1")
	w.ctrl.evaluateProtection(t.Context(), cl, "n1")
	assert.Empty(t, w.ctrl.Status().Unprotected)
	assert.InDelta(t, 0.0, gauge(), 0, "the gauge moved back with the status entry")
}
