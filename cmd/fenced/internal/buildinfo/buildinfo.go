// Package buildinfo reports the version fenced was built as.
package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// Set at link time by the Makefile:
//
//	-ldflags "-X github.com/fenced-project/fenced/cmd/fenced/internal/buildinfo.version=v1.2.3
//	          -X github.com/fenced-project/fenced/cmd/fenced/internal/buildinfo.revision=<commit>"
//
// They are constants of the build, never changed at run time.
var (
	version  string
	revision string
)

// Info describes the build.
type Info struct {
	// Version is the release version, or the module version, or "devel".
	Version string `json:"version"`
	// Revision is the VCS commit, when known.
	Revision string `json:"revision,omitempty"`
	// GoVersion is the Go toolchain that built the binary.
	GoVersion string `json:"goVersion"`
}

// Get returns the build's Info: the link-time values when set, otherwise
// what the Go toolchain recorded in the binary.
func Get() Info {
	info := Info{Version: version, Revision: revision, GoVersion: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if info.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			info.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && info.Revision == "" {
				info.Revision = s.Value
			}
		}
	}
	if info.Version == "" {
		info.Version = "devel"
	}
	return info
}
