package ops

import (
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

// maxPackagedExposure is the highest `systemd-analyze security` exposure
// accepted for the unit as installed by the package.
const maxPackagedExposure = 2.0

// buildDeb builds the Debian package of fenced with the packaging program
// (nfpm as a library) and returns its path.
func buildDeb(t *testing.T, version, out string) string {
	t.Helper()
	root := repoRoot(t)
	cmd := exec.Command("go", "run", ".", "-root", root, "-binary", fencedBinary(t),
		"-version", version, "-out", out, "-mtime", "2026-01-01T00:00:00Z")
	cmd.Dir = filepath.Join(root, "packaging")
	var stderr syncBuffer
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	require.NoError(t, err, "build the package: %s", stderr.String())
	path := strings.TrimSpace(string(stdout))
	require.FileExists(t, path)
	return path
}

// systemctlRecorder stands in for systemctl in the Debian root: systemd
// cannot run in a chroot, but the maintainer scripts' calls to it can be
// recorded. /run/systemd/system makes the scripts believe systemd runs.
const systemctlRecorder = `#!/bin/sh
echo "$*" >> /var/log/systemctl-calls
`

// systemctlCalls returns the recorded systemctl calls and clears them.
func systemctlCalls(t *testing.T, root string) []string {
	t.Helper()
	p := filepath.Join(root, "var/log/systemctl-calls")
	b, err := os.ReadFile(p)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	require.NoError(t, os.Remove(p))
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// TestDebianPackage builds the package, installs it with dpkg into a
// throwaway Debian root, checks what it created and the installed unit,
// upgrades it, removes it and purges it.
func TestDebianPackage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and installs a package into a Debian root: skipped under -short")
	}
	root := debianRoot(t, "bookworm")
	dist := t.TempDir()
	deb1 := buildDeb(t, "v1.0.0", dist)
	deb2 := buildDeb(t, "v1.0.1-3-gabc1234", dist)
	assert.Equal(t, "fenced_1.0.0_amd64.deb", filepath.Base(deb1))
	assert.Equal(t, "fenced_1.0.1+3.gabc1234_amd64.deb", filepath.Base(deb2))

	for _, d := range []string{"usr/local/sbin", "run/systemd/system", "var/log"} {
		require.NoError(t, os.MkdirAll(filepath.Join(root, d), 0o755))
	}
	require.NoError(t, os.WriteFile(filepath.Join(root, "usr/local/sbin/systemctl"), []byte(systemctlRecorder), 0o755))
	for _, p := range []string{deb1, deb2} {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(root, "tmp", filepath.Base(p)), b, 0o644))
	}

	out := mustInRoot(t, root, "dpkg-deb", "--info", "/tmp/"+filepath.Base(deb1), "conffiles")
	assert.Equal(t, "/etc/fenced/fenced.yaml", strings.TrimSpace(out), "the configuration is a conffile")

	// Install.
	mustInRoot(t, root, "dpkg", "-i", "/tmp/"+filepath.Base(deb1))
	assert.Equal(t, []string{"--system daemon-reload"}, systemctlCalls(t, root), "a fresh install reloads systemd and starts nothing")

	pw := strings.Split(strings.TrimSpace(mustInRoot(t, root, "getent", "passwd", "fenced")), ":")
	require.Len(t, pw, 7)
	assert.Equal(t, "/var/lib/fenced", pw[5])
	assert.Equal(t, "/usr/sbin/nologin", pw[6])
	uid, err := strconv.Atoi(pw[2])
	require.NoError(t, err)
	assert.Less(t, uid, 1000, "a system user")
	mustInRoot(t, root, "getent", "group", "fenced")
	statIs := func(path, want string) {
		t.Helper()
		assert.Equal(t, want, strings.TrimSpace(mustInRoot(t, root, "stat", "-c", "%U:%G %a %F", path)), path)
	}
	statIs("/etc/fenced", "root:root 755 directory")
	statIs("/etc/fenced/credentials", "root:root 700 directory")
	statIs("/etc/fenced/public", "root:root 755 directory")
	statIs("/var/lib/fenced", "fenced:fenced 700 directory")
	statIs("/etc/fenced/fenced.yaml", "root:root 644 regular file")
	statIs("/usr/bin/fenced", "root:root 755 regular file")
	statIs("/usr/lib/systemd/system/fenced.service", "root:root 644 regular file")
	statIs("/usr/lib/sysusers.d/fenced.conf", "root:root 644 regular file")
	statIs("/usr/lib/tmpfiles.d/fenced.conf", "root:root 644 regular file")
	statIs("/usr/share/fenced/kubernetes/rbac.yaml", "root:root 644 regular file")
	statIs("/usr/share/fenced/prometheus/fenced-alerts.yaml", "root:root 644 regular file")
	statIs("/usr/share/doc/fenced/copyright", "root:root 644 regular file")
	statIs("/usr/share/doc/fenced/changelog.gz", "root:root 644 regular file")
	statIs("/usr/share/doc/fenced/docs/operations.md", "root:root 644 regular file")
	statIs("/usr/share/man/man1/fenced.1.gz", "root:root 644 regular file")
	statIs("/usr/share/man/man1/fenced-pki-replica.1.gz", "root:root 644 regular file")
	statIs("/usr/share/man/man5/fenced.yaml.5.gz", "root:root 644 regular file")
	statIs("/usr/share/bash-completion/completions/fenced", "root:root 644 regular file")
	statIs("/usr/share/zsh/vendor-completions/_fenced", "root:root 644 regular file")
	// The guide's links to the examples and the alert rules resolve.
	for _, p := range []string{"/usr/share/doc/fenced/configs/dev-single.yaml", "/usr/share/doc/fenced/deploy/prometheus/fenced-alerts.yaml", "/usr/share/doc/fenced/deploy/kubernetes/rbac.yaml"} {
		mustInRoot(t, root, "test", "-f", p)
	}
	assert.Contains(t, mustInRoot(t, root, "sh", "-c", "zcat /usr/share/doc/fenced/changelog.gz"), "fenced (1.0.0) unstable; urgency=medium")
	// Static and stripped: nothing to declare but systemd.
	assert.Equal(t, "systemd", strings.TrimSpace(mustInRoot(t, root, "dpkg-query", "-W", "-f=${Depends}", "fenced")))
	assert.Contains(t, mustInRoot(t, root, "/usr/bin/fenced", "version"), "fenced ")
	assert.Contains(t, mustInRoot(t, root, "/usr/bin/fenced", "config", "validate", "/usr/share/doc/fenced/examples/dev-single.yaml"), ": valid: replica ")

	// The unit, as installed.
	out2 := mustInRoot(t, root, "systemd-analyze", "verify", "/usr/lib/systemd/system/fenced.service")
	assert.NotContains(t, out2, "fenced.service", "systemd-analyze verify complains about the unit")
	sec := mustInRoot(t, root, "systemd-analyze", "security", "--offline=true", "fenced.service")
	m := regexp.MustCompile(`Overall exposure level for fenced\.service: ([0-9.]+)`).FindStringSubmatch(sec)
	require.NotNil(t, m, "no exposure level in:\n%s", sec)
	exposure, err := strconv.ParseFloat(m[1], 64)
	require.NoError(t, err)
	t.Logf("installed unit: systemd-analyze security --offline=true exposure %.1f", exposure)
	assert.LessOrEqual(t, exposure, maxPackagedExposure, "%s", sec)

	// The operator configures it; fenced writes state.
	cfg := filepath.Join(root, "etc/fenced/fenced.yaml")
	edited := mustRead(t, cfg) + "# edited by the operator\n"
	require.NoError(t, os.WriteFile(cfg, []byte(edited), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, "etc/fenced/credentials/api-token"), []byte("t0ken\n"), 0o600))
	require.NoError(t, os.MkdirAll(filepath.Join(root, "var/lib/fenced/raft"), 0o700))
	ledger := filepath.Join(root, "var/lib/fenced/raft/raft.db")
	require.NoError(t, os.WriteFile(ledger, []byte("the fencing ledger"), 0o600))

	// Upgrade: the running service is restarted; the operator's
	// configuration and the state are kept.
	mustInRoot(t, root, "dpkg", "-i", "/tmp/"+filepath.Base(deb2))
	assert.Equal(t, []string{"--system daemon-reload", "try-restart fenced.service"}, systemctlCalls(t, root))
	assert.Equal(t, "1.0.1+3.gabc1234", strings.TrimSpace(mustInRoot(t, root, "dpkg-query", "-W", "-f=${Version}", "fenced")))
	assert.Equal(t, edited, mustRead(t, cfg))
	assert.FileExists(t, ledger)

	// Remove: the service is stopped; configuration and state stay.
	mustInRoot(t, root, "dpkg", "-r", "fenced")
	calls := systemctlCalls(t, root)
	require.NotEmpty(t, calls)
	assert.Equal(t, "stop fenced.service", calls[0])
	assert.NoFileExists(t, filepath.Join(root, "usr/bin/fenced"))
	assert.NoFileExists(t, filepath.Join(root, "usr/lib/systemd/system/fenced.service"))
	assert.Equal(t, edited, mustRead(t, cfg), "remove keeps /etc/fenced")
	assert.FileExists(t, filepath.Join(root, "etc/fenced/credentials/api-token"))
	assert.FileExists(t, ledger, "remove keeps the state directory")
	statIs("/var/lib/fenced", "fenced:fenced 700 directory")

	// Purge: the configuration goes; the ledger is never deleted.
	out3 := mustInRoot(t, root, "dpkg", "-P", "fenced")
	assert.NoDirExists(t, filepath.Join(root, "etc/fenced"))
	assert.FileExists(t, ledger, "purge keeps the fencing ledger")
	assert.Contains(t, out3, "kept /var/lib/fenced")
	mustInRoot(t, root, "getent", "passwd", "fenced")
	_, err = os.Lstat(filepath.Join(root, "etc/systemd/system/fenced.service"))
	assert.True(t, os.IsNotExist(err), "purge leaves no mask of the unit behind")
}

// TestDebianPackageLintian runs lintian on the package where lintian is
// installed: no error and no warning.
func TestDebianPackageLintian(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the package: skipped under -short")
	}
	lintian, err := exec.LookPath("lintian")
	if err != nil {
		t.Skip("lintian is not installed")
	}
	deb := buildDeb(t, "v1.0.0", t.TempDir())
	out, err := exec.Command(lintian, "--fail-on", "error,warning", "--tag-display-limit", "0", deb).CombinedOutput()
	require.NoError(t, err, "lintian %s:\n%s", deb, out)
	assert.NotRegexp(t, `(?m)^[EW]: `, string(out))
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}
