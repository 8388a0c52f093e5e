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
fenced_fencing_paused{cluster="prod"} 0
`, pair.Leaf.NotAfter.Unix())
	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(want)))
}
