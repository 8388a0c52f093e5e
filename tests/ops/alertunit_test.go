package ops

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestAlertRuleUnitTests runs the unit tests of the example alert rules
// (deploy/prometheus/fenced-alerts.test.yaml, promtool's format) with
// Prometheus's rule evaluation. Prometheus is a module of its own
// (tests/tools/promrules) so that the product never depends on it; its
// first run downloads it through the Go module proxy and builds it, at low
// CPU priority.
func TestAlertRuleUnitTests(t *testing.T) {
	if testing.Short() {
		t.Skip("builds Prometheus's rule evaluation")
	}
	root := repoRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	args := []string{"go", "test", "-mod=readonly", "-count=1", "."}
	if nice, err := exec.LookPath("nice"); err == nil {
		args = append([]string{nice, "-n", "10"}, args...)
	}
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Dir = filepath.Join(root, "tests", "tools", "promrules")
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly",
		"FENCED_ALERT_TESTS="+filepath.Join(root, "deploy", "prometheus", "fenced-alerts.test.yaml"))
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "alert rule unit tests (cd %s && go test .):\n%s", cmd.Dir, out)
	t.Logf("%s", out)
}
