package arrayclients

import (
	"context"
	"fmt"
	"log/slog"
)

// Constructor builds the undecorated adapter of one array of a family.
//
// ctx bounds any I/O the constructor does (most do none and log in on first
// use); cfg is one array's configuration (RequestTimeout already defaulted
// by the registry); logger is already scoped with the array's name and
// family. The constructor validates its family-specific fields and returns
// an error naming the field. It never logs credentials.
//
// Each family package (arrayclients/powerflex, arrayclients/powerstore,
// arrayclients/powerscale, arrayclients/powermax, arrayclients/unity)
// exports its Constructor (powerflex.NewPowerFlex, powerstore.NewPowerStore,
// powerscale.NewPowerScale, powermax.New, unity.New). Whoever builds a
// Registry hands the families of its build to it in Options.Families;
// arrayclients/all does that for every family. There is no package-level table: a build, or a
// test, holds exactly the families it was given.
type Constructor func(ctx context.Context, cfg Config, logger *slog.Logger) (Adapter, error)

// newAdapter builds the undecorated adapter of one array with the
// constructor of its family.
func newAdapter(ctx context.Context, families map[Family]Constructor, cfg Config, logger *slog.Logger) (Adapter, error) {
	if c, ok := families[cfg.Family]; ok && c != nil {
		return c(ctx, cfg, logger)
	}
	return nil, fmt.Errorf("array %s: family %q: no adapter in this build", cfg.Name, cfg.Family)
}

// Adapt turns a constructor's result of a concrete adapter type into
// (Adapter, error), never a typed nil:
//
//	func New(ctx context.Context, cfg arrayclients.Config, logger *slog.Logger) (arrayclients.Adapter, error) {
//		return arrayclients.Adapt(newAdapter(ctx, cfg, logger))
//	}
func Adapt[A Adapter](a A, err error) (Adapter, error) {
	if err != nil {
		return nil, err
	}
	return a, nil
}
