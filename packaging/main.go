// Command packaging builds fenced's Debian package from nfpm.yaml with nfpm
// used as a Go library:
//
//	go run . -root .. -binary ../bin/fenced -version v1.2.3 -out ../dist
//
// It prints the path of the package it wrote. Paths in nfpm.yaml (contents
// and scripts) are relative to the repository root given by -root.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"time"

	"github.com/goreleaser/nfpm/v2"
	"github.com/goreleaser/nfpm/v2/deb"
)

// options are the command line.
type options struct {
	root    string
	config  string
	binary  string
	version string
	arch    string
	out     string
	mtime   string
}

func main() {
	var o options
	fs := flag.NewFlagSet("packaging", flag.ContinueOnError)
	fs.StringVar(&o.root, "root", "..", "repository root")
	fs.StringVar(&o.config, "config", "", "nfpm configuration (default ROOT/packaging/nfpm.yaml)")
	fs.StringVar(&o.binary, "binary", "", "fenced binary to package (default ROOT/bin/fenced)")
	fs.StringVar(&o.version, "version", "", "version, as `git describe` prints it (required)")
	fs.StringVar(&o.arch, "arch", runtime.GOARCH, "Debian architecture")
	fs.StringVar(&o.out, "out", "", "output directory (default ROOT/dist)")
	fs.StringVar(&o.mtime, "mtime", "", "file times in the package, RFC 3339 (default: SOURCE_DATE_EPOCH, else now)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	path, err := build(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "packaging:", err)
		os.Exit(1)
	}
	fmt.Println(path)
}

// build writes the package and returns its path.
func build(o options) (string, error) {
	root, err := filepath.Abs(o.root)
	if err != nil {
		return "", fmt.Errorf("repository root: %w", err)
	}
	if o.config == "" {
		o.config = filepath.Join(root, "packaging", "nfpm.yaml")
	}
	if o.binary == "" {
		o.binary = filepath.Join(root, "bin", "fenced")
	}
	if o.out == "" {
		o.out = filepath.Join(root, "dist")
	}
	binary, err := filepath.Abs(o.binary)
	if err != nil {
		return "", fmt.Errorf("binary: %w", err)
	}
	if _, err := os.Stat(binary); err != nil {
		return "", fmt.Errorf("binary: %w (run make build first)", err)
	}
	version, err := DebianVersion(o.version)
	if err != nil {
		return "", err
	}
	env := map[string]string{"FENCED_BINARY": binary, "FENCED_VERSION": version, "FENCED_ARCH": o.arch}
	cfg, err := nfpm.ParseFileWithEnvMapping(o.config, func(k string) string { return env[k] })
	if err != nil {
		return "", fmt.Errorf("parse %s: %w", o.config, err)
	}
	if o.mtime != "" {
		t, err := time.Parse(time.RFC3339, o.mtime)
		if err != nil {
			return "", fmt.Errorf("-mtime: %w", err)
		}
		cfg.MTime = t
	}
	info, err := cfg.Get("deb")
	if err != nil {
		return "", fmt.Errorf("nfpm configuration for deb: %w", err)
	}
	resolvePaths(info, root)
	if err := nfpm.PrepareForPackager(info, "deb"); err != nil {
		return "", fmt.Errorf("prepare package contents: %w", err)
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return "", fmt.Errorf("output directory: %w", err)
	}
	pkg := deb.Default
	path := filepath.Join(o.out, pkg.ConventionalFileName(info))
	if err := writeAtomically(path, func(w io.Writer) error { return pkg.Package(info, w) }); err != nil {
		return "", fmt.Errorf("build %s: %w", path, err)
	}
	return path, nil
}

// resolvePaths makes the configuration's relative source and script paths
// relative to the repository root rather than the working directory.
func resolvePaths(info *nfpm.Info, root string) {
	abs := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(root, p)
	}
	for _, c := range info.Contents {
		if c.Source != "" {
			c.Source = abs(c.Source)
		}
	}
	s := &info.Scripts
	s.PreInstall, s.PostInstall, s.PreRemove, s.PostRemove = abs(s.PreInstall), abs(s.PostInstall), abs(s.PreRemove), abs(s.PostRemove)
}

// writeAtomically writes a file through a temporary file in the same
// directory, so an interrupted build leaves no half-written package.
func writeAtomically(path string, write func(io.Writer) error) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), ".pkg-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	if err = write(f); err != nil {
		return err
	}
	if err = f.Chmod(0o644); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// debianVersionRE is what DebianVersion produces: an upstream version that
// starts with a digit and uses only the characters Debian allows there.
var debianVersionRE = regexp.MustCompile(`^[0-9][A-Za-z0-9.+~]*$`)

// DebianVersion turns what `git describe --tags --always --dirty` prints
// into a Debian upstream version:
//
//	v1.2.3               -> 1.2.3
//	v1.2.3-4-gabc1234    -> 1.2.3+4.gabc1234
//	v1.2.3-rc1           -> 1.2.3~rc1   (sorts before 1.2.3)
//	abc1234-dirty        -> 0.0.0~gitabc1234+dirty  (no tag: a commit hash)
func DebianVersion(describe string) (string, error) {
	v := strings.TrimSpace(describe)
	if v == "" {
		return "", errors.New("-version is empty")
	}
	dirty := strings.HasSuffix(v, "-dirty")
	v = strings.TrimSuffix(v, "-dirty")
	v = strings.TrimPrefix(v, "v")
	if !regexp.MustCompile(`^[0-9]+\.[0-9]+`).MatchString(v) {
		v = "0.0.0~git" + v
	} else if m := regexp.MustCompile(`^(.*)-([0-9]+)-(g[0-9a-f]+)$`).FindStringSubmatch(v); m != nil {
		v = strings.Replace(m[1], "-", "~", 1) + "+" + m[2] + "." + m[3]
	} else {
		v = strings.Replace(v, "-", "~", 1)
	}
	if dirty {
		v += "+dirty"
	}
	if !debianVersionRE.MatchString(v) {
		return "", fmt.Errorf("-version %q: cannot make a Debian version of it (got %q)", describe, v)
	}
	return v, nil
}
