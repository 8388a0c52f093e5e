package configs

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A FENCED_* variable that is no setting and no client flag is named in a
// warning, with the closest known name; settings, client flags and the
// test harnesses' variables are not.
func TestUnknownFencedEnvironmentVariablesWarn(t *testing.T) {
	got := envWarnings([]string{
		"FENCED_ADRR=http://x",              // misspelled client flag
		"FENCED_REPLICA_DATADIRR=/tmp/x",    // misspelled setting
		"FENCED_SOMETHING_ELSE_ENTIRELY=1",  // nothing close
		"FENCED_REPLICA_DATADIR=/var/lib/x", // a setting
		"FENCED_HTTP_LISTEN=127.0.0.1:1",    // a setting
		"FENCED_ADDR=http://y",              // a client flag
		"FENCED_E2E=full", "FENCED_TEST_DEBUG=1", "FENCED_CHAOS_SEED=3",
		"PATH=/usr/bin", "FENCEDX=1",
	})
	require.Len(t, got, 3)
	assert.Contains(t, got[0].Message, "variable FENCED_ADRR is not a setting")
	assert.Contains(t, got[0].Message, "did you mean FENCED_ADDR?")
	assert.Contains(t, got[1].Message, "variable FENCED_REPLICA_DATADIRR is not a setting")
	assert.Contains(t, got[1].Message, "did you mean FENCED_REPLICA_DATADIR?")
	assert.Contains(t, got[2].Message, "variable FENCED_SOMETHING_ELSE_ENTIRELY is not a setting")
	assert.Contains(t, got[2].Message, "e.g. FENCED_REPLICA_DATADIR")
}

// Parse reports them among the configuration's warnings.
func TestParseWarnsOfUnknownFencedVariable(t *testing.T) {
	t.Setenv("FENCED_HTTP_LISTN", "127.0.0.1:9")
	cfg, err := Parse([]byte("replica: {id: r1, dataDir: /tmp/x, raftBindAddress: 127.0.0.1:7441}\n"), t.TempDir(), Options{})
	require.NoError(t, err)
	var msgs []string
	for _, w := range cfg.Warnings() {
		msgs = append(msgs, w.String())
	}
	assert.Contains(t, msgs, "environment variable FENCED_HTTP_LISTN is not a setting and is ignored (did you mean FENCED_HTTP_LISTEN?)")
}
