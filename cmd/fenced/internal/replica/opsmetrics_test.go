package replica

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/cluster/clustertest"
	"github.com/fenced-project/fenced/cluster/ledger"
	"github.com/fenced-project/fenced/configs"
)

func TestOpsMetrics(t *testing.T) {
	st := ledger.NewState()
	st.Index, st.Term = 5, 1
	st.Clusters["lab"] = &ledger.ClusterState{Pause: ledger.Pause{Paused: true, Operator: "bob", Reason: "rebuild", At: time.Unix(100, 0).UTC()},
		Nodes: map[string]*ledger.NodeState{}}
	st.Pauses = []ledger.PauseHolder{{ID: "pause-4", Operator: "token/alice", Reason: "network change", At: time.Unix(200, 0).UTC()}}
	l, err := ledger.FromState(st)
	require.NoError(t, err)

	creds := t.TempDir()
	ca, err := clustertest.NewCA("ca")
	require.NoError(t, err)
	leaf, err := ca.Issue("mgmt1")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(creds, "fenced_raft.crt"), leaf.CertPEM, 0o600))
	pair, err := leaf.TLSCertificate()
	require.NoError(t, err)
	cfg := &configs.Config{Clusters: []configs.Cluster{{Name: "prod", DryRun: true}, {Name: "lab"}}}
	cfg.Replica.TLS.CertFile = "credential:raft.crt"
	c := newOpsCollector(cfg, l, creds, slog.New(slog.DiscardHandler))

	want := fmt.Sprintf(`
# HELP fenced_certificate_expiry_timestamp_seconds When the replica's certificate expires (its notAfter, Unix seconds), by use: raft (replica.tls.certFile) or http (http.tls.certFile).
# TYPE fenced_certificate_expiry_timestamp_seconds gauge
fenced_certificate_expiry_timestamp_seconds{use="raft"} %d
# HELP fenced_dry_run 1 when the cluster is configured dryRun: fenced decides and reports but changes nothing.
# TYPE fenced_dry_run gauge
fenced_dry_run{cluster="lab"} 0
fenced_dry_run{cluster="prod"} 1
# HELP fenced_fencing_paused 1 while fencing on verdicts is paused for the cluster (fenced pause, for the cluster or all), else 0.
# TYPE fenced_fencing_paused gauge
fenced_fencing_paused{cluster="lab"} 1
fenced_fencing_paused{cluster="prod"} 1
# HELP fenced_pause_holders How many pauses are in effect for the cluster: its own and those of every cluster (fenced pause); fencing on verdicts is paused while it is above 0.
# TYPE fenced_pause_holders gauge
fenced_pause_holders{cluster="lab"} 2
fenced_pause_holders{cluster="prod"} 1
# HELP fenced_pause_started_timestamp_seconds When each pause in effect began (Unix seconds), by its ID, scope (a cluster, or all) and operator; fenced resume --id ID ends it.
# TYPE fenced_pause_started_timestamp_seconds gauge
fenced_pause_started_timestamp_seconds{id="pause-4",operator="token/alice",scope="all"} 200
fenced_pause_started_timestamp_seconds{id="pause-legacy-lab",operator="bob",scope="lab"} 100
`, pair.Leaf.NotAfter.Unix())
	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(want)))
}
