package replica

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/cmd/fenced/status"
)

// arrayCheckInterval is how often every array's connectivity is checked.
const arrayCheckInterval = 30 * time.Second

// maxArrayError bounds an array's error (its error body, often) in /status
// and the log; the daemon's redactor removes credentials from both.
const maxArrayError = 512

// errArraysNotChecked is the arrays' readiness error before the first check.
var errArraysNotChecked = errors.New("arrays not checked yet")

// arrayChecker checks every array's connectivity in the background, so
// /readyz and /status answer from the last results without waiting for an
// array.
type arrayChecker struct {
	reg      *arrayclients.Registry
	interval time.Duration
	log      *slog.Logger

	mu      sync.Mutex
	results []arrayclients.CheckResult
	checked bool
}

func newArrayChecker(reg *arrayclients.Registry, log *slog.Logger) *arrayChecker {
	return &arrayChecker{reg: reg, interval: arrayCheckInterval, log: log.With("component", "arrays")}
}

// Run checks at once and then every interval until ctx ends.
func (a *arrayChecker) Run(ctx context.Context) error {
	t := time.NewTicker(a.interval)
	defer t.Stop()
	var prev map[string]bool
	for {
		res := a.reg.Check(ctx)
		if ctx.Err() != nil {
			return nil
		}
		now := map[string]bool{}
		for _, r := range res {
			now[r.Array] = r.Reachable
			if was, ok := prev[r.Array]; !ok || was != r.Reachable {
				if r.Reachable {
					a.log.Info("array reachable", "array", r.Array, "family", string(r.Family), "apiVersion", r.APIVersion)
				} else {
					a.log.Warn("array unreachable", "array", r.Array, "family", string(r.Family), "error", truncate(r.Error, maxArrayError))
				}
			}
		}
		prev = now
		a.mu.Lock()
		a.results, a.checked = res, true
		a.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Check is the arrays' readiness: every array answered the last check.
func (a *arrayChecker) Check(context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.checked {
		return errArraysNotChecked
	}
	return arrayclients.Summarize(a.results).Err()
}

// Status returns the /status arrays section.
func (a *arrayChecker) Status() []status.Array {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.checked {
		var out []status.Array
		for _, ad := range a.reg.Adapters() {
			out = append(out, status.Array{Name: ad.Name(), Family: string(ad.Family()), Error: errArraysNotChecked.Error()})
		}
		return out
	}
	out := make([]status.Array, 0, len(a.results))
	for _, r := range a.results {
		at := r.CheckedAt.UTC()
		out = append(out, status.Array{Name: r.Array, Family: string(r.Family), Reachable: r.Reachable,
			APIVersion: r.APIVersion, Error: truncate(r.Error, maxArrayError), CheckedAt: &at})
	}
	return out
}

// truncate cuts s to at most n bytes.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
