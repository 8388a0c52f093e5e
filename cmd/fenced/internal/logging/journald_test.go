package logging

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-systemd/v22/journal"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestJournalRoundTrip sends a record the way the pipeline logs a fence
// step to the real journal and reads it back with journalctl: the fields
// the README and the guide advertise (CLUSTER, NODE, ARRAY, FENCE_ID) are
// there. It needs a running journald and journalctl; without them it is
// skipped (TestJournalFields covers the mapping with a fake journal).
func TestJournalRoundTrip(t *testing.T) {
	if !journal.Enabled() {
		t.Skip("no journald socket on this machine")
	}
	jctl, err := exec.LookPath("journalctl")
	if err != nil {
		t.Skip("no journalctl")
	}
	run := fmt.Sprintf("rt-%d", time.Now().UnixNano())
	l := slog.New(NewRedactingHandler(NewJournalHandler(slog.LevelInfo, journal.Send), NewRedactor()))
	l.Info("fence step", "cluster", "prod", "node", "worker-1", "array", "pstore-1", "fenceID", "f-1",
		"duration", 1500*time.Millisecond, "testRun", run)

	var fields map[string]any
	require.Eventually(t, func() bool {
		out, err := exec.Command(jctl, "-o", "json", "--no-pager", "TEST_RUN="+run).Output()
		if err != nil || len(strings.TrimSpace(string(out))) == 0 {
			return false
		}
		return json.Unmarshal([]byte(strings.SplitN(string(out), "\n", 2)[0]), &fields) == nil
	}, 10*time.Second, 100*time.Millisecond, "the entry never showed in journalctl")
	for f, want := range map[string]string{"CLUSTER": "prod", "NODE": "worker-1", "ARRAY": "pstore-1", "FENCE_ID": "f-1",
		"DURATION": "1.5", "SYSLOG_IDENTIFIER": "fenced", "MESSAGE": "fence step", "PRIORITY": "6"} {
		assert.Equal(t, want, fields[f], f)
	}
}
