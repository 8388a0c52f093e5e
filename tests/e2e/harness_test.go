package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/tests/invariants"
)

// fastTiming makes a node fail within seconds.
func fastTiming() ClusterTiming {
	return ClusterTiming{HeartbeatGrace: 6 * time.Second, PollInterval: 500 * time.Millisecond,
		SettlePeriod: 5 * time.Second, StormCooldown: 30 * time.Second, StormLimit: "1", IOWindow: 2 * time.Second}
}

func startFast(t *testing.T) *Harness {
	if testing.Short() {
		t.Skip("end-to-end: starts a control plane and three fenced processes")
	}
	return Start(t, Options{Timing: fastTiming(), NodeLeaseDurationSeconds: 4})
}

// TestHarness checks the plumbing every scenario rests on: each replica's
// configuration validates, each replica runs and serves /status, a request
// through a replica's array proxy is attributed to it in the array's audit
// log, and a cut proxy stops traffic.
func TestHarness(t *testing.T) {
	h := startFast(t)
	for _, id := range h.IDs {
		out, err := exec.Command(os.Getenv(BinaryEnv), "config", "validate", h.Replicas[id].ConfigPath).CombinedOutput()
		require.NoError(t, err, "config of %s: %s", id, out)
	}
	for _, id := range h.IDs {
		h.wait(30*time.Second, "status of "+id, func() (bool, string) {
			st, err := h.Replicas[id].Status(context.Background())
			if err != nil {
				return false, err.Error()
			}
			return st.ReplicaID == id, "replica ID " + st.ReplicaID
		})
	}

	a := h.Arrays["pflex-1"]
	get := func(replica string) (*http.Response, error) {
		pem, err := os.ReadFile(a.Listeners[replica].CAFile)
		require.NoError(t, err)
		pool := x509.NewCertPool()
		require.True(t, pool.AppendCertsFromPEM(pem))
		c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
		return c.Get("https://" + h.Net.Addr(arrayProxy(replica, "pflex-1")) + "/api/version?e2e-probe=" + replica)
	}
	seq := a.Server.LastSeq()
	resp, err := get("b")
	require.NoError(t, err)
	_ = resp.Body.Close()
	var remotes []string
	for _, e := range a.Server.AuditSince(seq) {
		if e.Path == "/api/version?e2e-probe=b" {
			remotes = append(remotes, e.Remote)
		}
	}
	require.NotEmpty(t, remotes)
	for _, r := range remotes {
		if !strings.HasPrefix(r, "b/") {
			assert.Fail(t, "request through b's proxy not attributed to b", "remote %q", r)
		}
	}

	h.CutArray("b", "pflex-1")
	resp, err = get("b")
	if err == nil {
		_ = resp.Body.Close()
	}
	require.Error(t, err, "a cut proxy must stop traffic")
	h.HealArray("b", "pflex-1")
	resp, err = get("b")
	require.NoError(t, err)
	_ = resp.Body.Close()
}

// TestEvidenceOfAQuietRun gathers the evidence of a run in which nothing
// fails (a leader, learned identities, no fault) and checks it: the real
// apiserver audit log parses, the ledgers replay from the data directories,
// every array is back in its start state, and no invariant is broken.
func TestEvidenceOfAQuietRun(t *testing.T) {
	full(t)
	h := startFast(t)
	h.WaitLeader(waitLeader)
	in, opts, err := h.Inputs()
	require.NoError(t, err)
	require.NotEmpty(t, in.Kube[ClusterName], "apiserver audit events")
	require.NotEmpty(t, in.Ledger.Epochs, "leadership epochs replayed from the data directories")
	require.Len(t, in.ArrayEnd, len(h.Arrays))
	rep := invariants.Check(in, opts)
	t.Logf("%s", rep)
	require.True(t, rep.OK(), "%s", rep)
	assert.Positive(t, rep.Checked[invariants.RuleArrayRestored])
}
