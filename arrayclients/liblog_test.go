package arrayclients

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/akutz/gournal"
	sclog "github.com/dell/goscaleio/log"
	"github.com/dell/gounity/gounityutil"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRouteLibraryLogs: each Dell library's logger, as the library itself
// calls it, ends up as a JSON record of fenced's logger naming the library.
func TestRouteLibraryLogs(t *testing.T) {
	var buf syncBuf
	l := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	restore := RouteLibraryLogs(l)
	defer restore()

	ctx := context.Background()
	logrus.WithError(assert.AnError).Error("Unable to read certificate file") // gopowermax, gounity/api
	gounityutil.GetRunIDLogger(ctx).Debugf("Executing BasicSystemInfo REST client")
	gounityutil.GetRunIDLogger(WithUnityLogger(ctx, UnityLogger(l.With("array", "unity-1")))).Infof("Delete NFS Share: %s Successful", "nfs_1")
	sclog.Log.Info("Basic Authentication")
	gournal.Error(ctx, "Error is not a type of \"*JSONError or *HTMLError\". Error:", assert.AnError)
	gournal.Debug(WithIsilonLogger(ctx, l.With("array", "isilon-1")), "Authentication response code: %d", 200)
	PowerStoreLogger{l: l.With("array", "pstore-1")}.Error(ctx, "request failed: %s\n", "boom")

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 7, buf.String())
	var got []string
	for _, line := range lines {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec), "not JSON: %s", line)
		lib, _ := rec["library"].(string)
		arr, _ := rec["array"].(string)
		got = append(got, lib+"/"+arr)
		assert.NotContains(t, rec["msg"], "\n")
	}
	assert.Equal(t, []string{"logrus/", "gounity/", "gounity/unity-1", "goscaleio/", "goisilon/", "goisilon/isilon-1", "gopowerstore/pstore-1"}, got)

	restore()
	before := buf.String()
	sclog.Log.Info("after")
	gournal.Error(ctx, "after")
	assert.Equal(t, before, buf.String(), "restored")
}

// TestLibraryLevels: a Dell library's ERROR is written at WARN (the
// adapter reports a failed call with what it was doing), and its report
// of an object it looked up and did not find at DEBUG: fenced looks up
// every candidate host name a driver may have used, and gopowermax logs
// each absent one at ERROR.
func TestLibraryLevels(t *testing.T) {
	var buf syncBuf
	l := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	restore := RouteLibraryLogs(l)
	defer restore()
	ctx := context.Background()
	logrus.Error("GetHostByID failed: Cannot find Host csi-node-E2E-worker-2-FC") // gopowermax
	logrus.Error("Unable to read certificate file")
	PowerStoreLogger{l: l}.Error(ctx, "request failed: %s", "boom")
	gournal.Error(ctx, "export not found")
	sclog.Log.Error("Volume not found")

	var levels []string
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec), line)
		levels = append(levels, rec["level"].(string))
	}
	assert.Equal(t, []string{"DEBUG", "WARN", "WARN", "DEBUG", "DEBUG"}, levels)
}
