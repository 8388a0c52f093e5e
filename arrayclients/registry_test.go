package arrayclients_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/arrayclients/all"
	"github.com/fenced-project/fenced/arrayclients/internal/arraytest"
	"github.com/fenced-project/fenced/redact"
)

// stubAdapter is a fault-injecting fake for the decorator's unit tests; the
// real adapters are tested against the simulators.
type stubAdapter struct {
	err     error
	block   bool
	applied int
	health  arrayclients.Health
}

func (s *stubAdapter) Name() string                { return "stub-1" }
func (s *stubAdapter) Family() arrayclients.Family { return arrayclients.Unity }
func (s *stubAdapter) wait(ctx context.Context) error {
	if s.block {
		<-ctx.Done()
		return fmt.Errorf("%w: %w", arrayclients.ErrUnreachable, ctx.Err())
	}
	return s.err
}
func (s *stubAdapter) Resolve(ctx context.Context, n arrayclients.Node) (arrayclients.Identity, error) {
	return arrayclients.Identity{Array: "stub-1", Family: arrayclients.Unity, Node: n.Name}, s.wait(ctx)
}
func (s *stubAdapter) Holds(arrayclients.VolumeLocation) bool { return false }
func (s *stubAdapter) Cover(arrayclients.Identity, arrayclients.VolumeRef) (arrayclients.Cut, *arrayclients.Gap) {
	return arrayclients.CutLUNHostAccess, nil
}
func (s *stubAdapter) Plan(ctx context.Context, id arrayclients.Identity, _ []arrayclients.VolumeRef) (arrayclients.Plan, error) {
	return arrayclients.Plan{Array: "stub-1", Family: arrayclients.Unity, Identity: id, Entries: json.RawMessage(`[]`)}, s.wait(ctx)
}
func (s *stubAdapter) Apply(ctx context.Context, _ arrayclients.Plan) error {
	s.applied++
	return s.wait(ctx)
}
func (s *stubAdapter) Verify(ctx context.Context, _ arrayclients.Plan) (arrayclients.Verification, error) {
	return arrayclients.Verification{}, s.wait(ctx)
}
func (s *stubAdapter) Undo(ctx context.Context, _ arrayclients.Plan, _ arrayclients.RestoreScope) error {
	s.applied--
	return s.wait(ctx)
}
func (s *stubAdapter) VerifyRestore(ctx context.Context, _ arrayclients.Plan, _ arrayclients.RestoreScope) (arrayclients.Verification, error) {
	return arrayclients.Verification{}, s.wait(ctx)
}
func (s *stubAdapter) Health(ctx context.Context, _ arrayclients.Identity) (arrayclients.Health, error) {
	return s.health, s.wait(ctx)
}
func (s *stubAdapter) Check(ctx context.Context) arrayclients.CheckResult {
	if err := s.wait(ctx); err != nil {
		return arrayclients.CheckResult{Error: err.Error()}
	}
	return arrayclients.CheckResult{Reachable: true}
}

var _ arrayclients.Adapter = (*stubAdapter)(nil)

func stubConfig() arrayclients.Config {
	return arrayclients.Config{Name: "stub-1", Family: arrayclients.Unity, Password: "hunter2-secret",
		ChapSecrets: map[string]string{"iqn.x": "chap-secret-9"}, RequestTimeout: 50 * time.Millisecond}
}

func TestDecoratorDeadlineAndErrors(t *testing.T) {
	var logs strings.Builder
	reg := prometheus.NewRegistry()
	stub := &stubAdapter{block: true}
	a, err := arrayclients.Decorate(stub, stubConfig(), arrayclients.Options{Logger: arraytest.SlogTo(&logs), Registry: reg})
	require.NoError(t, err)
	start := time.Now()
	_, err = a.Resolve(context.Background(), arrayclients.Node{Name: "worker-1"})
	require.Error(t, err)
	assert.Less(t, time.Since(start), 5*time.Second)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.True(t, arrayclients.IsTransient(err))
	var op *arrayclients.OpError
	require.ErrorAs(t, err, &op)
	assert.Equal(t, arrayclients.OpError{Array: "stub-1", Family: arrayclients.Unity, Op: "resolve", Node: "worker-1", Err: op.Err}, *op)
	assert.InDelta(t, 1.0, arraytest.CounterValue(t, reg, "stub-1", "resolve", "timeout"), 0)
	assert.Contains(t, logs.String(), "node=worker-1")
	assert.Contains(t, logs.String(), "op=resolve")
	assert.Contains(t, logs.String(), "array=stub-1")
}

func TestDecoratorMasksSecrets(t *testing.T) {
	var logs strings.Builder
	stub := &stubAdapter{err: errors.New("login as admin:hunter2-secret failed; chap chap-secret-9")}
	a, err := arrayclients.Decorate(stub, stubConfig(), arrayclients.Options{Logger: arraytest.SlogTo(&logs)})
	require.NoError(t, err)
	_, err = a.Plan(context.Background(), arrayclients.Identity{Array: "stub-1", Family: arrayclients.Unity, Node: "n"}, nil)
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "hunter2-secret")
	assert.NotContains(t, err.Error(), "chap-secret-9")
	assert.Contains(t, err.Error(), "admin:"+redact.Redacted)
	assert.NotContains(t, logs.String(), "hunter2-secret")
	r := a.Check(context.Background())
	assert.NotContains(t, r.Error, "hunter2-secret")
}

func TestDecoratorDryRunAndPlanOwnership(t *testing.T) {
	reg := prometheus.NewRegistry()
	stub := &stubAdapter{}
	a, err := arrayclients.Decorate(stub, stubConfig(), arrayclients.Options{DryRun: true, Registry: reg})
	require.NoError(t, err)
	plan := arrayclients.Plan{Array: "stub-1", Family: arrayclients.Unity, Identity: arrayclients.Identity{Node: "n"}}
	require.NoError(t, a.Apply(context.Background(), plan))
	require.NoError(t, a.Undo(context.Background(), plan, arrayclients.RestoreScope{}))
	assert.Zero(t, stub.applied, "dry run never calls the adapter's Apply or Undo")
	assert.InDelta(t, 1.0, arraytest.CounterValue(t, reg, "stub-1", "apply", "dry_run"), 0)

	foreign := arrayclients.Plan{Array: "other", Family: arrayclients.Unity}
	require.ErrorIs(t, a.Apply(context.Background(), foreign), arrayclients.ErrPlanMismatch)

	b, err := arrayclients.Decorate(stub, stubConfig(), arrayclients.Options{Registry: reg})
	require.NoError(t, err, "decorating again reuses the registered metrics")
	require.ErrorIs(t, b.Apply(context.Background(), foreign), arrayclients.ErrPlanMismatch)
	require.ErrorIs(t, b.Undo(context.Background(), foreign, arrayclients.RestoreScope{}), arrayclients.ErrPlanMismatch)
	_, err = b.Verify(context.Background(), foreign)
	require.ErrorIs(t, err, arrayclients.ErrPlanMismatch)
	assert.Zero(t, stub.applied)
	require.NoError(t, b.Apply(context.Background(), plan))
	assert.Equal(t, 1, stub.applied)
}

func TestDecoratorHealthNeverClaimsHealthyOnError(t *testing.T) {
	stub := &stubAdapter{err: fmt.Errorf("%w: boom", arrayclients.ErrUnreachable),
		health: arrayclients.Health{Connectivity: arrayclients.Connected, IO: arrayclients.IOActive}}
	a, err := arrayclients.Decorate(stub, stubConfig(), arrayclients.Options{})
	require.NoError(t, err)
	h, err := a.Health(context.Background(), arrayclients.Identity{Node: "n"})
	require.ErrorIs(t, err, arrayclients.ErrUnreachable)
	assert.Equal(t, arrayclients.ConnectivityUnknown, h.Connectivity)
	assert.Equal(t, arrayclients.IOUnknown, h.IO)
	assert.Contains(t, h.Reason, "boom")
	assert.Equal(t, "stub-1", h.Array)
	assert.Equal(t, "n", h.Node)
}

func TestClassify(t *testing.T) {
	tcs := []struct {
		name string
		err  error
		want arrayclients.RetryClass
	}{
		{"nil", nil, arrayclients.Permanent},
		{"no identity", fmt.Errorf("x: %w", arrayclients.ErrNoIdentity), arrayclients.Permanent},
		{"ambiguous", arrayclients.ErrAmbiguousIdentity, arrayclients.Permanent},
		{"plan mismatch", arrayclients.ErrPlanMismatch, arrayclients.Permanent},
		{"unreachable", fmt.Errorf("x: %w", arrayclients.ErrUnreachable), arrayclients.Transient},
		{"joined unreachable", errors.Join(arrayclients.ErrUnreachable, errors.New("y")), arrayclients.Transient},
		{"deadline", context.DeadlineExceeded, arrayclients.Transient},
		{"canceled", context.Canceled, arrayclients.Permanent},
		{"reset", &net.OpError{Op: "read", Err: syscall.ECONNRESET}, arrayclients.Transient},
		{"refused", syscall.ECONNREFUSED, arrayclients.Transient},
		{"truncated", io.ErrUnexpectedEOF, arrayclients.Transient},
		{"malformed", json.Unmarshal([]byte("{"), new(any)), arrayclients.Transient},
		{"marked", arrayclients.MarkTransient(errors.New("busy")), arrayclients.Transient},
		{"other", errors.New("volume is read-only"), arrayclients.Permanent},
	}
	for _, tc := range tcs {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, arrayclients.Classify(tc.err), "%v", tc.err)
		})
	}
	assert.Equal(t, "transient", arrayclients.Transient.String())
	assert.Equal(t, "busy", arrayclients.MarkTransient(errors.New("busy")).Error())
	assert.NoError(t, arrayclients.MarkTransient(nil))
}

func TestNewValidatesConfig(t *testing.T) {
	ok := arrayclients.Config{Name: "p", Family: arrayclients.PowerFlex, Endpoint: "https://127.0.0.1:1", Username: "u", Password: "p"}
	tcs := []struct {
		name string
		mod  func(c *arrayclients.Config)
		want string
	}{
		{"no name", func(c *arrayclients.Config) { c.Name = "" }, "arrays[0].name: required"},
		{"bad family", func(c *arrayclients.Config) { c.Family = "vnx" }, `arrays[p].family: "vnx" is not one of`},
		{"bad endpoint", func(c *arrayclients.Config) { c.Endpoint = "127.0.0.1:443" }, "arrays[p].endpoint"},
		{"credentials in URL", func(c *arrayclients.Config) { c.Endpoint = "https://u:pw@127.0.0.1" }, "not the URL"},
		{"negative timeout", func(c *arrayclients.Config) { c.RequestTimeout = -time.Second }, "arrays[p].requestTimeout"},
		{"no password", func(c *arrayclients.Config) { c.Password = "" }, "username and password: required"},
	}
	for _, tc := range tcs {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.mod(&c)
			_, err := all.New([]arrayclients.Config{c}, arrayclients.Options{})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	_, err := all.New([]arrayclients.Config{ok, ok}, arrayclients.Options{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `arrays[1].name: "p" is used twice`)

	reg, err := all.New([]arrayclients.Config{ok}, arrayclients.Options{})
	require.NoError(t, err)
	require.Len(t, reg.Adapters(), 1)
	_, found := reg.Get("nope")
	assert.False(t, found)
}

// TestDecoratorLogsEachFailureOnce: a failed call is one warn record with
// the array, op and node; a failed check is debug (the checker logs when
// reachability changes, not every interval).
func TestDecoratorLogsEachFailureOnce(t *testing.T) {
	var logs strings.Builder
	stub := &stubAdapter{err: errors.New("connection refused")}
	a, err := arrayclients.Decorate(stub, stubConfig(), arrayclients.Options{Logger: arraytest.SlogTo(&logs)})
	require.NoError(t, err)
	_, err = a.Resolve(context.Background(), arrayclients.Node{Name: "worker-1"})
	require.Error(t, err)
	r := a.Check(context.Background())
	require.False(t, r.Reachable)
	assert.Equal(t, 1, strings.Count(logs.String(), "level=WARN"), logs.String())
	assert.Contains(t, logs.String(), "level=WARN msg=\"array call failed\" array=stub-1")
	assert.Contains(t, logs.String(), "level=DEBUG msg=\"array call failed\" array=stub-1 family=unity op=check")
}
