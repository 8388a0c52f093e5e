package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/goreleaser/nfpm/v2/files"
)

// BinaryDepends checks that the binary is a stripped ELF executable and
// returns the package dependencies its dynamic linking needs: none for a
// static binary (CGO_ENABLED=0), else libc6 at least at the highest GLIBC
// symbol version it imports.
func BinaryDepends(path string) ([]string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("binary %s: %w", path, err)
	}
	defer f.Close()
	if f.Section(".symtab") != nil || f.Section(".debug_info") != nil {
		return nil, fmt.Errorf("binary %s is not stripped: build it with -ldflags '-s -w' (make build does)", path)
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		return nil, fmt.Errorf("binary %s: dynamic libraries: %w", path, err)
	}
	if len(libs) == 0 {
		return nil, nil
	}
	syms, err := f.ImportedSymbols()
	if err != nil {
		return nil, fmt.Errorf("binary %s: imported symbols: %w", path, err)
	}
	best := []int{0}
	re := regexp.MustCompile(`^GLIBC_([0-9]+(?:\.[0-9]+)*)$`)
	for _, s := range syms {
		m := re.FindStringSubmatch(s.Version)
		if m == nil {
			continue
		}
		v := parseVersion(m[1])
		if lessVersion(best, v) {
			best = v
		}
	}
	for _, l := range libs {
		if !strings.HasPrefix(l, "libc.so") && !strings.HasPrefix(l, "libpthread.so") && !strings.HasPrefix(l, "libdl.so") && !strings.HasPrefix(l, "libresolv.so") {
			return nil, fmt.Errorf("binary %s links %s: only glibc is declared; build with CGO_ENABLED=0", path, l)
		}
	}
	if best[0] == 0 {
		return []string{"libc6"}, nil
	}
	parts := make([]string, len(best))
	for i, n := range best {
		parts[i] = strconv.Itoa(n)
	}
	return []string{"libc6 (>= " + strings.Join(parts, ".") + ")"}, nil
}

func parseVersion(s string) []int {
	var v []int
	for _, p := range strings.Split(s, ".") {
		n, _ := strconv.Atoi(p)
		v = append(v, n)
	}
	return v
}

func lessVersion(a, b []int) bool {
	for i := 0; i < len(a) || i < len(b); i++ {
		var x, y int
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y {
			return x < y
		}
	}
	return false
}

// generate runs the binary's generate-docs into dir and returns the man
// pages (gzipped, as Debian installs them) and the completions as package
// contents.
func generate(binary, dir string, mtime time.Time) ([]*files.Content, error) {
	raw := filepath.Join(dir, "raw")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "generate-docs", "--out", raw, "--date", mtime.UTC().Format(time.RFC3339))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s generate-docs: %w: %s", binary, err, stderr.String())
	}
	pages, err := filepath.Glob(filepath.Join(raw, "man1", "*.1"))
	if err != nil || len(pages) == 0 {
		return nil, fmt.Errorf("%s generate-docs wrote no man pages", binary)
	}
	sort.Strings(pages)
	var out []*files.Content
	file := func(src, dst string) {
		out = append(out, &files.Content{Source: src, Destination: dst, FileInfo: &files.ContentFileInfo{Mode: 0o644, MTime: mtime}})
	}
	man5, err := filepath.Glob(filepath.Join(raw, "man5", "*.5"))
	if err != nil {
		return nil, fmt.Errorf("%s generate-docs: %w", binary, err)
	}
	sort.Strings(man5)
	for _, p := range append(pages, man5...) {
		gz := filepath.Join(dir, filepath.Base(p)+".gz")
		if err := gzipFile(p, gz, mtime); err != nil {
			return nil, err
		}
		section := filepath.Base(filepath.Dir(p)) // man1 or man5
		file(gz, "/usr/share/man/"+section+"/"+filepath.Base(gz))
	}
	file(filepath.Join(raw, "completions", "fenced.bash"), "/usr/share/bash-completion/completions/fenced")
	file(filepath.Join(raw, "completions", "_fenced"), "/usr/share/zsh/vendor-completions/_fenced")
	return out, nil
}

// gzipFile compresses src into dst at the best level, with no name and
// a fixed time in the header, as dh_compress does (reproducible).
func gzipFile(src, dst string, mtime time.Time) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	w, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return err
	}
	w.ModTime = mtime
	if _, err := w.Write(data); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return os.WriteFile(dst, buf.Bytes(), 0o644)
}

// changelog returns the package's changelog as package contents: one entry
// for this build, in Debian's format, gzipped. The version has no Debian
// revision (the package is built by the project itself, a native package),
// so it is installed as changelog.gz.
func changelog(dir, describe, version, maintainer string, mtime time.Time) (*files.Content, error) {
	text := fmt.Sprintf("fenced (%s) unstable; urgency=medium\n\n  * Build of fenced %s. The project's history lists the changes.\n\n -- %s  %s\n",
		version, describe, maintainer, mtime.UTC().Format("Mon, 02 Jan 2006 15:04:05 -0700"))
	src := filepath.Join(dir, "changelog")
	if err := os.WriteFile(src, []byte(text), 0o644); err != nil {
		return nil, fmt.Errorf("changelog: %w", err)
	}
	gz := src + ".gz"
	if err := gzipFile(src, gz, mtime); err != nil {
		return nil, fmt.Errorf("changelog: %w", err)
	}
	return &files.Content{Source: gz, Destination: "/usr/share/doc/fenced/changelog.gz", FileInfo: &files.ContentFileInfo{Mode: 0o644, MTime: mtime}}, nil
}
