package arrayclients

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/fenced-project/fenced/redact"
)

// Operation names, used in logs, errors and the op metric label.
const (
	OpResolve = "resolve"
	OpPlan    = "plan"
	OpApply   = "apply"
	OpVerify  = "verify"
	OpUndo    = "undo"
	// OpVerifyRestore is the read-back after Undo.
	OpVerifyRestore = "verify-restore"
	OpHealth        = "health"
	OpCheck         = "check"
	// OpSessions reads a node's sessions and I/O (SessionReporter).
	OpSessions = "sessions"
	// OpSweep reads many nodes' connection state in one listing (Sweeper).
	OpSweep = "sweep"
)

// OpError is the error of one adapter call: which array, node and
// operation failed, and why. Use errors.Is on it for the sentinel errors.
type OpError struct {
	Array  string
	Family Family
	Op     string
	// Node is the Kubernetes node name ("" for Check).
	Node string
	Err  error
}

func (e *OpError) Error() string {
	if e.Node == "" {
		return fmt.Sprintf("array %s: %s: %v", e.Array, e.Op, e.Err)
	}
	return fmt.Sprintf("array %s: %s node %s: %v", e.Array, e.Op, e.Node, e.Err)
}

// Unwrap returns the cause.
func (e *OpError) Unwrap() error { return e.Err }

// decorated applies the concerns every family shares, once: a deadline per
// call, metrics, logging without credentials, error wrapping with array,
// node and operation, plan ownership checks and dry-run.
type decorated struct {
	inner   Adapter
	cfg     Config
	name    string
	family  Family
	timeout time.Duration
	dryRun  bool
	red     *redact.Redactor
	logger  *slog.Logger
	m       *metrics
}

var _ Adapter = (*decorated)(nil)

// Decorate wraps an adapter with the shared concerns (see New). cfg is the
// adapter's configuration; its secrets are added to opts.Redactor (a new
// one when nil) and hidden in every error and log.
func Decorate(inner Adapter, cfg Config, opts Options) (Adapter, error) {
	m, err := newMetrics(opts.Registry)
	if err != nil {
		return nil, fmt.Errorf("register array metrics: %w", err)
	}
	return decorate(inner, cfg, opts, m), nil
}

func decorate(inner Adapter, cfg Config, opts Options, m *metrics) *decorated {
	timeout := opts.CallTimeout
	if timeout <= 0 {
		timeout = cfg.RequestTimeout
	}
	if timeout <= 0 {
		timeout = DefaultRequestTimeout
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	red := opts.Redactor
	if red == nil {
		red = redact.New()
	}
	red.AddCredential(cfg.Username, cfg.Password)
	for _, s := range cfg.ChapSecrets {
		red.Add(s)
	}
	m.initArray(inner.Name(), opts.DryRun)
	return &decorated{
		inner: inner, cfg: cfg, name: inner.Name(), family: inner.Family(), timeout: timeout, dryRun: opts.DryRun,
		red: red, logger: logger.With("array", inner.Name(), "family", string(inner.Family())), m: m,
	}
}

func (d *decorated) Name() string   { return d.name }
func (d *decorated) Family() Family { return d.family }

// Holds reports whether a volume at loc is on this array (Config.Holds).
func (d *decorated) Holds(loc VolumeLocation) bool { return d.cfg.Holds(loc) }

// HoldsArray is Holds without the PowerScale access zone (ZoneHolder).
func (d *decorated) HoldsArray(loc VolumeLocation) bool { return d.cfg.HoldsArray(loc) }

// Cover is the family's static choice of cut; it does no I/O.
func (d *decorated) Cover(id Identity, v VolumeRef) (Cut, *Gap) { return d.inner.Cover(id, v) }

// call runs fn under the call deadline and records it.
func (d *decorated) call(ctx context.Context, op, node string, fn func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	start := time.Now()
	err := fn(ctx)
	return d.finish(op, node, start, err, "")
}

// finish records metrics and logs, and wraps err.
func (d *decorated) finish(op, node string, start time.Time, err error, forced string) error {
	elapsed := time.Since(start)
	result := forced
	if result == "" {
		result = resultOf(err)
	}
	d.m.requests.WithLabelValues(d.name, op, result).Inc()
	d.m.duration.WithLabelValues(d.name, op).Observe(elapsed.Seconds())
	attrs := []any{"op", op, "result", result, "duration", elapsed}
	if node != "" {
		attrs = append(attrs, "node", node)
	}
	if err == nil {
		level := slog.LevelDebug
		if op == OpApply || op == OpUndo {
			level = slog.LevelInfo
		}
		d.logger.Log(context.Background(), level, "array call", attrs...)
		return nil
	}
	err = d.redact(err)
	attrs = append(attrs, "retry", Classify(err).String(), "error", err.Error())
	// Each failure is logged once: here, at warn, with the array, op,
	// node and retry class. Callers that get the *OpError back do not log
	// it again at warn. A failed check is the exception: the checker logs
	// when an array becomes unreachable (and reachable again), not every
	// interval, so it is debug here.
	level := slog.LevelWarn
	if errors.Is(err, ErrNoIdentity) || op == OpCheck {
		level = slog.LevelDebug
	}
	d.logger.Log(context.Background(), level, "array call failed", attrs...)
	return &OpError{Array: d.name, Family: d.family, Op: op, Node: node, Err: err}
}

// resultOf maps an error to the result label.
func resultOf(err error) string {
	switch {
	case err == nil:
		return ResultOK
	case errors.Is(err, ErrNoIdentity):
		return ResultNoIdentity
	case errors.Is(err, ErrAmbiguousIdentity):
		return ResultAmbiguous
	case errors.Is(err, context.DeadlineExceeded):
		return ResultTimeout
	case errors.Is(err, ErrUnreachable):
		return ResultUnreachable
	default:
		return ResultError
	}
}

// redactedError hides secrets in an error's text but keeps its chain.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

func (d *decorated) redact(err error) error {
	msg := err.Error()
	masked := d.red.Redact(msg)
	if masked == msg {
		return err
	}
	return &redactedError{msg: masked, err: err}
}

// owns checks that a plan belongs to this array.
func (d *decorated) owns(p Plan) error {
	if p.Array != d.name || p.Family != d.family {
		return fmt.Errorf("%w: plan is for %s array %q, this is %s array %q",
			ErrPlanMismatch, p.Family, p.Array, d.family, d.name)
	}
	return nil
}

func (d *decorated) Resolve(ctx context.Context, node Node) (Identity, error) {
	var id Identity
	err := d.call(ctx, OpResolve, node.Name, func(ctx context.Context) (err error) {
		id, err = d.inner.Resolve(ctx, node)
		return err
	})
	return id, err
}

func (d *decorated) Plan(ctx context.Context, id Identity, vols []VolumeRef) (Plan, error) {
	var p Plan
	err := d.call(ctx, OpPlan, id.Node, func(ctx context.Context) (err error) {
		if id.Array != d.name || id.Family != d.family {
			return fmt.Errorf("%w: identity is on %s array %q", ErrPlanMismatch, id.Family, id.Array)
		}
		p, err = d.inner.Plan(ctx, id, vols)
		return err
	})
	return p, err
}

func (d *decorated) Apply(ctx context.Context, p Plan) error {
	if d.dryRun {
		return d.dry(OpApply, p)
	}
	return d.call(ctx, OpApply, p.Identity.Node, func(ctx context.Context) error {
		if err := d.owns(p); err != nil {
			return err
		}
		return d.inner.Apply(ctx, p)
	})
}

func (d *decorated) Undo(ctx context.Context, p Plan, scope RestoreScope) error {
	if d.dryRun {
		return d.dry(OpUndo, p)
	}
	return d.call(ctx, OpUndo, p.Identity.Node, func(ctx context.Context) error {
		if err := d.owns(p); err != nil {
			return err
		}
		return d.inner.Undo(ctx, p, scope)
	})
}

// dry logs what Apply or Undo would do and changes nothing.
func (d *decorated) dry(op string, p Plan) error {
	start := time.Now()
	if err := d.owns(p); err != nil {
		return d.finish(op, p.Identity.Node, start, err, "")
	}
	d.logger.Info("dry run: array left unchanged", "op", op, "node", p.Identity.Node, "plan", p.Summary)
	return d.finish(op, p.Identity.Node, start, nil, ResultDryRun)
}

func (d *decorated) Verify(ctx context.Context, p Plan) (Verification, error) {
	var v Verification
	err := d.call(ctx, OpVerify, p.Identity.Node, func(ctx context.Context) (err error) {
		if err := d.owns(p); err != nil {
			return err
		}
		v, err = d.inner.Verify(ctx, p)
		return err
	})
	return v, err
}

func (d *decorated) VerifyRestore(ctx context.Context, p Plan, scope RestoreScope) (Verification, error) {
	var v Verification
	err := d.call(ctx, OpVerifyRestore, p.Identity.Node, func(ctx context.Context) (err error) {
		if err := d.owns(p); err != nil {
			return err
		}
		v, err = d.inner.VerifyRestore(ctx, p, scope)
		return err
	})
	return v, err
}

func (d *decorated) Health(ctx context.Context, id Identity) (Health, error) {
	var h Health
	err := d.call(ctx, OpHealth, id.Node, func(ctx context.Context) (err error) {
		h, err = d.inner.Health(ctx, id)
		return err
	})
	h.Array, h.Node = d.name, id.Node
	if err != nil {
		// Never report health the array did not show.
		h.Connectivity, h.IO = ConnectivityUnknown, IOUnknown
		if h.Reason == "" {
			h.Reason = err.Error()
		}
	}
	if h.Connectivity == "" {
		h.Connectivity = ConnectivityUnknown
	}
	if h.IO == "" {
		h.IO = IOUnknown
	}
	return h, err
}

var _ Sweeper = (*decorated)(nil)

// Sweep asks the family's adapter for the identities' connection state in
// one listing (see Sweeper); a family without one answers ErrNoSweep
// without a call. Every Health it returns carries the array's name and
// the identity's node, and unknown where the array showed nothing.
func (d *decorated) Sweep(ctx context.Context, ids []Identity, withIO bool) ([]Health, error) {
	sw, ok := d.inner.(Sweeper)
	if !ok {
		return nil, fmt.Errorf("%s array %s: %w", d.family, d.name, ErrNoSweep)
	}
	var hs []Health
	err := d.call(ctx, OpSweep, "", func(ctx context.Context) (err error) {
		hs, err = sw.Sweep(ctx, ids, withIO)
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(hs) != len(ids) {
		return nil, fmt.Errorf("%s array %s: sweep answered %d nodes for %d asked", d.family, d.name, len(hs), len(ids))
	}
	for i := range hs {
		hs[i].Array, hs[i].Node = d.name, ids[i].Node
		if hs[i].Connectivity == "" {
			hs[i].Connectivity = ConnectivityUnknown
		}
		if hs[i].IO == "" {
			hs[i].IO = IOUnknown
		}
	}
	return hs, nil
}

var _ SessionReporter = (*decorated)(nil)

// Sessions asks the family's adapter for the plan's node's sessions and
// I/O; a family that reports none answers ErrNoSessions without a call.
func (d *decorated) Sessions(ctx context.Context, p Plan) (SessionReport, error) {
	sr, ok := d.inner.(SessionReporter)
	if !ok {
		return SessionReport{}, fmt.Errorf("%s array %s: %w", d.family, d.name, ErrNoSessions)
	}
	var rep SessionReport
	var none error
	err := d.call(ctx, OpSessions, p.Identity.Node, func(ctx context.Context) (err error) {
		if err := d.owns(p); err != nil {
			return err
		}
		rep, err = sr.Sessions(ctx, p)
		if errors.Is(err, ErrNoSessions) {
			// An answer, not a failure: nothing to log or count as one.
			none, err = err, nil
		}
		return err
	})
	if err == nil && none != nil {
		return SessionReport{}, none
	}
	return rep, err
}

func (d *decorated) Check(ctx context.Context) CheckResult {
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	start := time.Now()
	r := d.inner.Check(ctx)
	r.Array, r.Family = d.name, d.family
	if r.CheckedAt.IsZero() {
		r.CheckedAt = time.Now().UTC()
	}
	var err error
	if !r.Reachable {
		if r.Error == "" {
			r.Error = "unreachable"
		}
		err = fmt.Errorf("%w: %s", ErrUnreachable, r.Error)
		r.Error = d.redact(errors.New(r.Error)).Error()
		d.m.up.WithLabelValues(d.name, string(d.family)).Set(0)
	} else {
		d.m.up.WithLabelValues(d.name, string(d.family)).Set(1)
	}
	_ = d.finish(OpCheck, "", start, err, "")
	return r
}
