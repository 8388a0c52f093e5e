package arrayclients

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fenced-project/fenced/internal/boundedfile"
	"github.com/fenced-project/fenced/redact"
)

// Options configure New.
type Options struct {
	// Logger receives structured logs (array, family, node, op, result);
	// nil discards them. Credentials never appear.
	Logger *slog.Logger
	// Registry receives fenced_array_requests_total{array,op,result},
	// fenced_array_request_duration_seconds{array,op} and
	// fenced_array_up{array,family}; nil keeps the metrics unregistered.
	Registry *prometheus.Registry
	// DryRun turns Apply and Undo into logged no-ops (result "dry_run");
	// reads still go to the arrays.
	DryRun bool
	// CallTimeout bounds one adapter call with all its requests; 0 uses the
	// array's RequestTimeout.
	CallTimeout time.Duration
	// Redactor hides secrets in errors and logs; every array's password
	// and CHAP secrets are added to it. nil uses a new one.
	Redactor *redact.Redactor
	// Families holds the constructor of each family this registry may
	// build (arrayclients/all.Families lists every family); an array of a
	// family missing here fails New.
	Families map[Family]Constructor
}

// MaxCABytes bounds an array's CA bundle (caFile).
const MaxCABytes = 4 << 20

// Registry holds one decorated adapter per configured array.
type Registry struct {
	adapters []Adapter
	byName   map[string]Adapter
}

// New validates the array configurations and builds one adapter per array,
// wrapped with the shared concerns: a deadline per call, metrics, logging,
// errors wrapped in *OpError, plan ownership checks and dry-run. Adapters
// log in lazily, so an unreachable array does not fail New; Check reports it.
func New(cfgs []Config, opts Options) (*Registry, error) {
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if opts.Redactor == nil {
		opts.Redactor = redact.New()
	}
	m, err := newMetrics(opts.Registry)
	if err != nil {
		return nil, fmt.Errorf("register array metrics: %w", err)
	}
	r := &Registry{byName: map[string]Adapter{}}
	for i, cfg := range cfgs {
		if err := validateConfig(i, cfg, r.byName); err != nil {
			return nil, err
		}
		if cfg.RequestTimeout == 0 {
			cfg.RequestTimeout = DefaultRequestTimeout
		}
		ctx, cancel := context.WithTimeout(context.Background(), cfg.RequestTimeout)
		inner, err := newAdapter(ctx, opts.Families, cfg, logger.With("array", cfg.Name, "family", string(cfg.Family)))
		cancel()
		if err != nil {
			return nil, fmt.Errorf("arrays[%s]: %w", cfg.Name, err)
		}
		a := decorate(inner, cfg, Options{Logger: logger, DryRun: opts.DryRun, CallTimeout: opts.CallTimeout, Redactor: opts.Redactor}, m)
		r.adapters = append(r.adapters, a)
		r.byName[cfg.Name] = a
	}
	return r, nil
}

// validateConfig checks the fields every family needs.
func validateConfig(i int, cfg Config, seen map[string]Adapter) error {
	if cfg.Name == "" {
		return fmt.Errorf("arrays[%d].name: required", i)
	}
	if _, dup := seen[cfg.Name]; dup {
		return fmt.Errorf("arrays[%d].name: %q is used twice", i, cfg.Name)
	}
	known := false
	for _, f := range Families {
		known = known || f == cfg.Family
	}
	if !known {
		names := make([]string, len(Families))
		for j, f := range Families {
			names[j] = string(f)
		}
		return fmt.Errorf("arrays[%s].family: %q is not one of %s", cfg.Name, cfg.Family, strings.Join(names, ", "))
	}
	u, err := url.Parse(cfg.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("arrays[%s].endpoint: %q is not an http(s) URL", cfg.Name, cfg.Endpoint)
	}
	if u.User != nil {
		return fmt.Errorf("arrays[%s].endpoint: credentials belong in username and password, not the URL", cfg.Name)
	}
	if cfg.RequestTimeout < 0 {
		return fmt.Errorf("arrays[%s].requestTimeout: %s is negative", cfg.Name, cfg.RequestTimeout)
	}
	if len(cfg.ExternalAccess) > 0 {
		if cfg.Family != PowerStore && cfg.Family != PowerFlex {
			return fmt.Errorf("arrays[%s].externalAccess: only PowerStore and PowerFlex drivers add external-access entries", cfg.Name)
		}
		if _, err := ParseExternalAccess(cfg.ExternalAccess); err != nil {
			return fmt.Errorf("arrays[%s].%w", cfg.Name, err)
		}
	}
	if cfg.CAFile != "" {
		// The Dell clients read the CA bundle whole: bound it first.
		if _, err := boundedfile.Read(cfg.CAFile, MaxCABytes); err != nil {
			return fmt.Errorf("arrays[%s].caFile: %w", cfg.Name, err)
		}
	}
	return nil
}

// Get returns the adapter of the named array.
func (r *Registry) Get(name string) (Adapter, bool) {
	a, ok := r.byName[name]
	return a, ok
}

// Adapters returns every adapter in configuration order.
func (r *Registry) Adapters() []Adapter {
	return append([]Adapter(nil), r.adapters...)
}

// Check runs every array's connectivity check concurrently and returns the
// results in configuration order.
func (r *Registry) Check(ctx context.Context) []CheckResult {
	out := make([]CheckResult, len(r.adapters))
	var wg sync.WaitGroup
	for i, a := range r.adapters {
		wg.Go(func() { out[i] = a.Check(ctx) })
	}
	wg.Wait()
	return out
}

// CheckSummary aggregates connectivity checks for /status and /readyz.
type CheckSummary struct {
	// Ready is true when every array is reachable and authenticated.
	Ready       bool          `json:"ready"`
	Total       int           `json:"total"`
	Reachable   int           `json:"reachable"`
	Unreachable []string      `json:"unreachable,omitempty"`
	Arrays      []CheckResult `json:"arrays"`
}

// Summarize aggregates check results.
func Summarize(results []CheckResult) CheckSummary {
	s := CheckSummary{Total: len(results), Arrays: append([]CheckResult{}, results...)}
	for _, r := range results {
		if r.Reachable {
			s.Reachable++
		} else {
			s.Unreachable = append(s.Unreachable, r.Array)
		}
	}
	s.Ready = s.Reachable == s.Total
	return s
}

// Err returns nil when every array is reachable, else an error naming the
// unreachable arrays and why (for /readyz).
func (s CheckSummary) Err() error {
	if s.Ready {
		return nil
	}
	var parts []string
	for _, r := range s.Arrays {
		if !r.Reachable {
			parts = append(parts, fmt.Sprintf("%s (%s)", r.Array, r.Error))
		}
	}
	return fmt.Errorf("%w: %d of %d arrays: %s", ErrUnreachable, len(parts), s.Total, strings.Join(parts, "; "))
}
