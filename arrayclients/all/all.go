// Package all hands every array family to the registry.
//
// The family packages (arrayclients/powerscale, ...) each export their
// constructor; none registers itself in a package-level table. A program
// that builds a Registry of every family calls New here (or passes
// Families to arrayclients.New); a test may pass only the families it
// needs.
package all

import (
	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/arrayclients/powerflex"
	"github.com/fenced-project/fenced/arrayclients/powermax"
	"github.com/fenced-project/fenced/arrayclients/powerscale"
	"github.com/fenced-project/fenced/arrayclients/powerstore"
	"github.com/fenced-project/fenced/arrayclients/unity"
)

// Families returns the constructor of every family in this build, keyed by
// family. Each call returns a new map.
func Families() map[arrayclients.Family]arrayclients.Constructor {
	return map[arrayclients.Family]arrayclients.Constructor{
		arrayclients.PowerFlex:  powerflex.NewPowerFlex,
		arrayclients.PowerMax:   powermax.New,
		arrayclients.PowerScale: powerscale.NewPowerScale,
		arrayclients.PowerStore: powerstore.NewPowerStore,
		arrayclients.Unity:      unity.New,
	}
}

// New is arrayclients.New with every family of this build (opts.Families,
// when set, is used as given).
func New(cfgs []arrayclients.Config, opts arrayclients.Options) (*arrayclients.Registry, error) {
	if opts.Families == nil {
		opts.Families = Families()
	}
	return arrayclients.New(cfgs, opts)
}
