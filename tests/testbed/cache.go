package testbed

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// mainModule is the module path of the product, whose go.mod marks the
// repository root.
const mainModule = "github.com/fenced-project/fenced"

// Binaries is a directory holding the built control-plane binaries.
type Binaries struct {
	// Dir is the bin directory: <repo root>/.cache/k8s/<version key>/bin.
	Dir string
}

// Path returns the path of the binary name (one of the Bin* constants).
func (b Binaries) Path(name string) string {
	return filepath.Join(b.Dir, name)
}

// toolBuild is one `go build` run in one tools module.
type toolBuild struct {
	module   string   // directory of the tools module, relative to tests/tools
	packages []string // main packages to build
	ldflags  string
	outputs  []string // binary names it produces
}

// toolBuilds lists what the cache holds and how each binary is built.
func toolBuilds() []toolBuild {
	kubeLDFlags := strings.Join([]string{
		"-s -w",
		"-X k8s.io/component-base/version.gitVersion=" + KubernetesVersion,
		"-X k8s.io/component-base/version.gitMajor=1",
		"-X k8s.io/component-base/version.gitMinor=34",
		"-X k8s.io/component-base/version.gitTreeState=clean",
	}, " ")
	return []toolBuild{
		{module: "etcd", packages: []string{"go.etcd.io/etcd/server/v3"}, ldflags: "-s -w", outputs: []string{BinEtcd}},
		{
			module: ".",
			packages: []string{
				"k8s.io/kubernetes/cmd/kube-apiserver",
				"k8s.io/kubernetes/cmd/kube-controller-manager",
				"k8s.io/kubernetes/cmd/kube-scheduler",
			},
			ldflags: kubeLDFlags,
			outputs: []string{BinKubeAPIServer, BinControllerManager, BinScheduler},
		},
		{module: "kwok", packages: []string{"sigs.k8s.io/kwok/cmd/kwok"}, ldflags: "-s -w", outputs: []string{BinKwok}},
	}
}

// RepoRoot walks up from the working directory to the directory holding the
// go.mod of the product's module.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find repository root: %w", err)
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && modulePath(data) == mainModule {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("find repository root: no go.mod of module %s above the working directory", mainModule)
		}
		dir = parent
	}
}

// modulePath returns the module path declared in a go.mod file.
func modulePath(gomod []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(gomod))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if rest, ok := strings.CutPrefix(line, "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

// EnsureBinaries returns the cache of control-plane binaries for this
// repository, building it first if it is missing or was built from other
// inputs. Concurrent callers, in this or other processes, wait for one
// build. Build output goes to logw (may be nil) and to build.log in the cache.
func EnsureBinaries(ctx context.Context, logw io.Writer) (Binaries, error) {
	root, err := RepoRoot()
	if err != nil {
		return Binaries{}, err
	}
	return ensureBinariesIn(ctx, root, logw)
}

func ensureBinariesIn(ctx context.Context, root string, logw io.Writer) (Binaries, error) {
	cacheRoot := filepath.Join(root, ".cache")
	dir := filepath.Join(cacheRoot, "k8s", versionKey())
	bins := Binaries{Dir: filepath.Join(dir, "bin")}
	toolsDir := filepath.Join(root, "tests", "tools")

	stamp, err := buildStamp(toolsDir)
	if err != nil {
		return Binaries{}, err
	}
	if upToDate(bins, stamp) {
		return bins, nil
	}
	if err := os.MkdirAll(bins.Dir, 0o755); err != nil {
		return Binaries{}, fmt.Errorf("create binary cache %s: %w", bins.Dir, err)
	}
	// The cache is build output: keep it out of git even without a
	// .gitignore at the repository root.
	ignore := filepath.Join(cacheRoot, ".gitignore")
	if _, err := os.Stat(ignore); errors.Is(err, os.ErrNotExist) {
		if err := os.WriteFile(ignore, []byte("*\n"), 0o644); err != nil {
			return Binaries{}, fmt.Errorf("write %s: %w", ignore, err)
		}
	}

	unlock, err := lockFile(ctx, filepath.Join(dir, ".lock"))
	if err != nil {
		return Binaries{}, err
	}
	defer unlock()
	if upToDate(bins, stamp) { // another process built it while we waited
		return bins, nil
	}

	// Temporary directories of builds that were killed midway.
	if stale, err := filepath.Glob(filepath.Join(bins.Dir, ".build-*")); err == nil {
		for _, d := range stale {
			_ = os.RemoveAll(d)
		}
	}
	stampPath := filepath.Join(dir, "stamp")
	if err := os.Remove(stampPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return Binaries{}, fmt.Errorf("remove stale stamp: %w", err)
	}
	logFile, err := os.Create(filepath.Join(dir, "build.log"))
	if err != nil {
		return Binaries{}, fmt.Errorf("create build log: %w", err)
	}
	defer logFile.Close()
	out := io.Writer(logFile)
	if logw != nil {
		out = io.MultiWriter(logFile, logw)
	}
	for _, b := range toolBuilds() {
		if err := runToolBuild(ctx, toolsDir, bins.Dir, b, out); err != nil {
			return Binaries{}, fmt.Errorf("build %s (log: %s): %w", strings.Join(b.outputs, ", "), logFile.Name(), err)
		}
	}
	if err := os.WriteFile(stampPath, []byte(stamp+"\n"), 0o644); err != nil {
		return Binaries{}, fmt.Errorf("write stamp: %w", err)
	}
	return bins, nil
}

// buildStamp hashes everything the binaries are built from: the versions,
// the build flags and the go.mod and go.sum files of the tools modules.
func buildStamp(toolsDir string) (string, error) {
	h := sha256.New()
	fmt.Fprintln(h, versionKey())
	for _, b := range toolBuilds() {
		fmt.Fprintln(h, b.module, b.packages, b.ldflags, b.outputs)
		for _, f := range []string{"go.mod", "go.sum"} {
			p := filepath.Join(toolsDir, b.module, f)
			data, err := os.ReadFile(p)
			if err != nil {
				return "", fmt.Errorf("read tools module file: %w", err)
			}
			fmt.Fprintf(h, "%s %d\n", p[len(toolsDir):], len(data))
			h.Write(data)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// upToDate reports whether every binary is present and the stamp matches.
func upToDate(bins Binaries, stamp string) bool {
	data, err := os.ReadFile(filepath.Join(filepath.Dir(bins.Dir), "stamp"))
	if err != nil || strings.TrimSpace(string(data)) != stamp {
		return false
	}
	for _, b := range toolBuilds() {
		for _, name := range b.outputs {
			st, err := os.Stat(bins.Path(name))
			if err != nil || !st.Mode().IsRegular() || st.Mode().Perm()&0o100 == 0 {
				return false
			}
		}
	}
	return true
}

// runToolBuild runs one `go build`, at low CPU priority, writing the
// binaries under temporary names and renaming them into place.
func runToolBuild(ctx context.Context, toolsDir, binDir string, b toolBuild, out io.Writer) error {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("find the go command: %w", err)
	}
	tmpDir, err := os.MkdirTemp(binDir, ".build-")
	if err != nil {
		return fmt.Errorf("create temporary build directory: %w", err)
	}
	defer os.RemoveAll(tmpDir)

	args := []string{"build", "-mod=readonly", "-ldflags", b.ldflags, "-o", tmpDir + string(filepath.Separator)}
	if len(b.packages) == 1 {
		args = []string{"build", "-mod=readonly", "-ldflags", b.ldflags, "-o", filepath.Join(tmpDir, b.outputs[0])}
	}
	args = append(args, b.packages...)
	name, cmdArgs := goBin, args
	if nice, err := exec.LookPath("nice"); err == nil {
		name, cmdArgs = nice, append([]string{"-n", "10", goBin}, args...)
	}
	cmd := exec.CommandContext(ctx, name, cmdArgs...)
	cmd.Dir = filepath.Join(toolsDir, b.module)
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	start := time.Now()
	fmt.Fprintf(out, "+ (cd %s && go %s)\n", cmd.Dir, strings.Join(args, " "))
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build in %s: %w", cmd.Dir, err)
	}
	fmt.Fprintf(out, "built %s in %s\n", strings.Join(b.outputs, ", "), time.Since(start).Round(time.Second))
	for _, o := range b.outputs {
		if err := os.Rename(filepath.Join(tmpDir, o), filepath.Join(binDir, o)); err != nil {
			return fmt.Errorf("install %s: %w", o, err)
		}
	}
	return nil
}

// lockFile takes an exclusive flock on path, polling so that ctx can cancel
// the wait. The returned function releases it.
func lockFile(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				_ = f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			_ = f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, fmt.Errorf("wait for lock %s: %w", path, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}
