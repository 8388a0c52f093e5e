// Package systemd holds fenced's systemd units. Its tests check the shipped
// files with systemd's own tools.
package systemd

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// maxExposure is the highest `systemd-analyze security` exposure accepted.
const maxExposure = 2.5

// tool finds a systemd tool. Missing tools skip the test on a developer's
// machine but fail it in CI, where .ci/run installs them.
func tool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is missing; CI must install Debian's systemd package", name)
		}
		t.Skipf("%s is missing (install Debian's systemd package); CI=true makes this a failure", name)
	}
	return p
}

// unitWithBinary builds fenced and returns the shipped unit rewritten to run
// it: systemd-analyze verify checks that ExecStart's binary exists.
func unitWithBinary(t *testing.T) (unitPath, unitText string) {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "fenced")
	out, err := exec.Command("go", "build", "-o", bin, "../cmd/fenced").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	b, err := os.ReadFile("fenced.service")
	require.NoError(t, err)
	text := string(b)
	require.Contains(t, text, "ExecStart=/usr/bin/fenced ")
	text = strings.Replace(text, "ExecStart=/usr/bin/fenced ", "ExecStart="+bin+" ", 1)
	unitPath = filepath.Join(dir, "fenced.service")
	require.NoError(t, os.WriteFile(unitPath, []byte(text), 0o600))
	return unitPath, text
}

func TestUnitVerifies(t *testing.T) {
	analyze := tool(t, "systemd-analyze")
	unit, _ := unitWithBinary(t)
	var out bytes.Buffer
	cmd := exec.Command(analyze, "verify", unit)
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Run(), "systemd-analyze verify:\n%s", out.String())
	for _, line := range strings.Split(out.String(), "\n") {
		assert.NotContains(t, line, "fenced.service", "verify complains about the unit")
	}
}

func TestUnitSecurityExposure(t *testing.T) {
	analyze := tool(t, "systemd-analyze")
	unit, _ := unitWithBinary(t)
	out, err := exec.Command(analyze, "security", "--offline=true", unit).CombinedOutput()
	require.NoError(t, err, "systemd-analyze security:\n%s", out)
	m := regexp.MustCompile(`Overall exposure level for fenced\.service: ([0-9.]+)`).FindSubmatch(out)
	require.NotNil(t, m, "no exposure level in:\n%s", out)
	exposure, err := strconv.ParseFloat(string(m[1]), 64)
	require.NoError(t, err)
	t.Logf("systemd-analyze security --offline=true: exposure %.1f", exposure)
	assert.LessOrEqual(t, exposure, maxExposure, "%s", out)
}

// TestUnitSettings pins the settings the daemon relies on, so a later edit
// cannot drop one silently.
func TestUnitSettings(t *testing.T) {
	b, err := os.ReadFile("fenced.service")
	require.NoError(t, err)
	lines := map[string]bool{}
	for _, l := range strings.Split(string(b), "\n") {
		lines[strings.TrimSpace(l)] = true
	}
	for _, want := range []string{
		"Type=notify", "NotifyAccess=main", "WatchdogSec=30s", "Restart=on-failure", "RestartPreventExitStatus=78 65",
		"User=fenced", "Group=fenced", "StateDirectory=fenced", "ConfigurationDirectory=fenced",
		"LoadCredential=fenced:/etc/fenced/credentials", "UMask=0077",
		"ProtectSystem=strict", "ProtectHome=yes", "PrivateTmp=yes", "PrivateDevices=yes", "NoNewPrivileges=yes",
		"CapabilityBoundingSet=", "AmbientCapabilities=", "SystemCallFilter=@system-service",
		"SystemCallArchitectures=native", "RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX",
		"MemoryDenyWriteExecute=yes", "ExecStart=/usr/bin/fenced run --config /etc/fenced/fenced.yaml",
	} {
		assert.True(t, lines[want], "fenced.service lacks %q", want)
	}
	assert.False(t, lines["DynamicUser=yes"], "state persists across restarts: no DynamicUser")
}

func TestSysusersAndTmpfiles(t *testing.T) {
	sysusers := tool(t, "systemd-sysusers")
	tmpfiles := tool(t, "systemd-tmpfiles")
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "etc"), 0o755))

	conf, err := filepath.Abs("sysusers.d/fenced.conf")
	require.NoError(t, err)
	out, err := exec.Command(sysusers, "--root="+root, "--dry-run", conf).CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "Creating user 'fenced'")

	conf, err = filepath.Abs("tmpfiles.d/fenced.conf")
	require.NoError(t, err)
	if os.Geteuid() != 0 {
		t.Skip("creating root-owned directories needs root")
	}
	out, err = exec.Command(tmpfiles, "--create", "--root="+root, conf).CombinedOutput()
	require.NoError(t, err, "%s", out)
	st, err := os.Stat(filepath.Join(root, "etc/fenced/credentials"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), st.Mode().Perm())
}
