package ops

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// debianMirror is where debootstrap fetches packages from.
const debianMirror = "http://deb.debian.org/debian"

// debianRoot returns a fresh minimal Debian root (minbase plus systemd) of
// the suite in a temporary directory, with /proc mounted, for the test to
// install packages into with chroot. The root is made by debootstrap once
// and cached as a tarball keyed by suite in .cache/debroot/ at the
// repository root; later calls unpack the tarball (a few seconds).
func debianRoot(t *testing.T, suite string) string {
	t.Helper()
	prerequisite(t, os.Geteuid() == 0, "installing packages into a Debian root needs root")
	for _, tool := range []string{"tar", "chroot", "mount", "umount"} {
		requireTool(t, tool)
	}
	tarball := cachedDebianRoot(t, suite)

	dir := filepath.Join(t.TempDir(), "root")
	require.NoError(t, os.Mkdir(dir, 0o755))
	out, err := exec.Command("tar", "-C", dir, "--numeric-owner", "-xzf", tarball).CombinedOutput()
	require.NoError(t, err, "unpack %s: %s", tarball, out)
	// Real hosts have /proc; systemd-tmpfiles refuses to run without it.
	proc := filepath.Join(dir, "proc")
	out, err = exec.Command("mount", "-t", "proc", "proc", proc).CombinedOutput()
	require.NoError(t, err, "mount /proc in the root: %s", out)
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", proc).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", proc, err, out)
		}
	})
	return dir
}

// cachedDebianRoot returns the cached root tarball of the suite, making it
// with debootstrap first if needed. A file lock keeps test binaries running
// in parallel from making it twice.
func cachedDebianRoot(t *testing.T, suite string) string {
	t.Helper()
	cache := filepath.Join(repoRoot(t), ".cache", "debroot")
	require.NoError(t, os.MkdirAll(cache, 0o755))
	tarball := filepath.Join(cache, suite+".tar.gz")
	if _, err := os.Stat(tarball); err == nil {
		return tarball
	}
	lock, err := os.OpenFile(filepath.Join(cache, suite+".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	require.NoError(t, err)
	defer lock.Close()
	require.NoError(t, syscall.Flock(int(lock.Fd()), syscall.LOCK_EX))
	defer func() { _ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) }()
	if _, err := os.Stat(tarball); err == nil {
		return tarball // made while we waited
	}

	debootstrap := requireTool(t, "debootstrap")
	build, err := os.MkdirTemp(cache, "build-"+suite+"-")
	require.NoError(t, err)
	defer func() { _ = os.RemoveAll(build) }()
	root := filepath.Join(build, "root")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Minute)
	defer cancel()
	t.Logf("debootstrap %s into %s (once; cached as %s)", suite, root, tarball)
	start := time.Now()
	cmd := exec.CommandContext(ctx, debootstrap, "--variant=minbase", "--include=systemd", suite, root, debianMirror)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "debootstrap: %s", tail(string(out), 4000))
	tmp := filepath.Join(build, suite+".tar.gz")
	out, err = exec.CommandContext(ctx, "tar", "-C", root, "--numeric-owner", "-czf", tmp, ".").CombinedOutput()
	require.NoError(t, err, "tar: %s", out)
	require.NoError(t, os.Rename(tmp, tarball))
	t.Logf("Debian %s root made and cached in %s", suite, time.Since(start).Round(time.Second))
	return tarball
}

// inRoot runs a command in the Debian root with a clean environment and
// returns its combined output.
func inRoot(root string, args ...string) (string, error) {
	full := append([]string{root, "/usr/bin/env", "-i",
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"}, args...)
	out, err := exec.Command("chroot", full...).CombinedOutput()
	return string(out), err
}

// mustInRoot is inRoot that fails the test on error.
func mustInRoot(t *testing.T, root string, args ...string) string {
	t.Helper()
	out, err := inRoot(root, args...)
	require.NoError(t, err, "%s: %s", strings.Join(args, " "), out)
	return out
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
