package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/tests/arraysim/simcore"
	"github.com/fenced-project/fenced/tests/csidriver"
	"github.com/fenced-project/fenced/tests/invariants"
)

// Inputs stops every replica and gathers the evidence of the run for the
// invariant checker, with the options that attribute it to replicas.
func (h *Harness) Inputs() (invariants.Inputs, invariants.Options, error) {
	for _, id := range h.IDs {
		_ = h.Replicas[id].Stop()
	}
	in := invariants.Inputs{
		Arrays:     map[string][]simcore.AuditEntry{},
		ArrayStart: h.arrayStart,
		ArrayEnd:   h.arrayStates(),
		Placements: map[string][]invariants.Placement{},
		Kube:       map[string][]invariants.KubeEvent{},
		Timeline:   h.Timeline.Events(),
		DryRun:     h.opts.Timing.DryRun,
	}
	for name, a := range h.Arrays {
		in.Arrays[name] = a.Server.Audit()
	}
	for name, cp := range h.CPs {
		in.Placements[name] = h.placements[name].Placements()
		evs, err := kubeAudit(cp.AuditLogPath)
		if err != nil {
			return in, invariants.Options{}, fmt.Errorf("cluster %s: %w", name, err)
		}
		in.Kube[name] = evs
	}
	var hs []*invariants.History
	for _, id := range h.IDs {
		hist, err := invariants.ReplayDataDir(h.Replicas[id].DataDir, 10*time.Second)
		if err != nil {
			return in, invariants.Options{}, err
		}
		hs = append(hs, hist)
	}
	in.Ledger = invariants.Merge(hs...)
	opts := invariants.Options{FencedUsers: h.Users, Remotes: map[string]string{}, DetectionSlack: detectionSlack(h.opts.Timing),
		DriverRemotes: []string{csidriver.AuditTag}, HeldPeriod: h.opts.Timing.HeldPeriod}
	for _, id := range h.IDs {
		opts.Remotes[id] = id
	}
	return in, opts, nil
}

// Check gathers the evidence and fails the test on any violation. It stops
// the replicas.
func (h *Harness) Check() *invariants.Report {
	h.t.Helper()
	in, opts, err := h.Inputs()
	require.NoError(h.t, err)
	rep := invariants.Check(in, opts)
	h.t.Logf("invariants: %s", rep)
	require.True(h.t, rep.OK(), "invariant violations:\n%s", rep)
	return rep
}

// ArraysDir is the directory of an artifact directory (and of the demo's
// --dir) that holds every simulator's audit file, <array>.jsonl.
const ArraysDir = "arrays"

// saveEvidence writes the array audit files and states, the timeline and
// placements, and with logs also every replica's directory (logs,
// configuration) and the control plane's logs and audit log, into dir.
func (h *Harness) saveEvidence(dir string, logs bool) error {
	write := func(name string, v any) error {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, name), b, 0o644)
	}
	if err := os.MkdirAll(filepath.Join(dir, ArraysDir), 0o755); err != nil {
		return err
	}
	for name := range h.Arrays {
		if h.opts.NoArrayAuditFiles {
			break
		}
		f := filepath.Join(ArraysDir, AuditFileName(name))
		if err := copyFile(filepath.Join(h.Dir, f), filepath.Join(dir, f)); err != nil {
			return err
		}
	}
	if err := write("array-states-start.json", h.arrayStart); err != nil {
		return err
	}
	if err := write("timeline.json", h.Timeline.Events()); err != nil {
		return err
	}
	if err := write("placements.json", h.placements[ClusterName].Placements()); err != nil {
		return err
	}
	if !logs {
		return nil
	}
	for _, id := range h.IDs {
		r := h.Replicas[id]
		for _, f := range []string{r.LogPath, r.ConfigPath} {
			if err := copyFile(f, filepath.Join(dir, "replica-"+id+"-"+filepath.Base(f))); err != nil {
				return err
			}
		}
	}
	matches, _ := filepath.Glob(filepath.Join(h.CP.Dir, "*.log"))
	for _, m := range matches {
		if err := copyFile(m, filepath.Join(dir, "testbed-"+filepath.Base(m))); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(from, to string) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return fmt.Errorf("copy %s: %w", from, err)
	}
	return os.WriteFile(to, data, 0o644)
}

// detectionSlack is how long a replica may take to notice that it lost the
// apiserver with the cluster's timing: its API check interval (the poll
// interval, at least 1 s, at most 5 s; cmd/fenced's mapping onto the
// detector policy) plus the check's timeout (2 s).
func detectionSlack(t ClusterTiming) time.Duration {
	poll := t.PollInterval
	if poll == 0 {
		poll = 2 * time.Second
	}
	return min(max(poll, time.Second), 5*time.Second) + 2*time.Second
}

// kubeAudit parses an apiserver audit log (leaving out a line still being
// written).
func kubeAudit(path string) ([]invariants.KubeEvent, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read apiserver audit log: %w", err)
	}
	if i := bytes.LastIndexByte(data, '\n'); i+1 < len(data) {
		data = data[:i+1]
	}
	return invariants.ParseKubeAudit(bytes.NewReader(data))
}
