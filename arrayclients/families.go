package arrayclients

import (
	"context"
	"fmt"
	"log/slog"
)

// Family constructors.
//
// Every family exports one constructor with this signature:
//
//	func NewPowerFlex(ctx context.Context, cfg Config, logger *slog.Logger) (Adapter, error)
//
// ctx bounds any I/O the constructor does (most do none and log in on first
// use); cfg is one array's configuration (RequestTimeout already defaulted
// by the registry); logger is already scoped with the array's name and
// family. The constructor validates its family-specific fields and returns
// an error naming the field. It never logs credentials.
//
// Adding a family is one case line in newAdapter. A constructor with another
// shape can be adapted with adapt, which also avoids a typed-nil Adapter on
// error:
//
//	case PowerStore:
//		return adapt(NewPowerStore(cfg, logger))

// newAdapter builds the undecorated adapter of one array.
func newAdapter(ctx context.Context, cfg Config, logger *slog.Logger) (Adapter, error) {
	switch cfg.Family {
	case PowerFlex:
		return NewPowerFlex(ctx, cfg, logger)
	case PowerMax:
		return adapt(NewPowerMax(ctx, cfg, logger))
	case Unity:
		return adapt(NewUnity(ctx, cfg, logger))
	case PowerStore:
		return NewPowerStore(ctx, cfg, logger)
	case PowerScale:
		return NewPowerScale(ctx, cfg, logger)
	default:
		return nil, fmt.Errorf("array %s: family %q: no adapter in this build", cfg.Name, cfg.Family)
	}
}

// adapt turns a constructor returning a concrete adapter type into
// (Adapter, error), never a typed nil.
func adapt[A Adapter](a A, err error) (Adapter, error) {
	if err != nil {
		return nil, err
	}
	return a, nil
}
