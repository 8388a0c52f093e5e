// Package daemon runs fenced: it owns the HTTP endpoint and the components
// that make up the replica, starts them with one context, tells systemd
// about its state (READY, STATUS, WATCHDOG, STOPPING) and stops everything
// in time when that context is cancelled.
//
// Wiring code adds to a Daemon before Run:
//
//	d.Handle("POST /v1/fence", d.Authorize(h))   // routes
//	d.AddReadinessCheck("raft", check)            // /readyz
//	d.AddStatusProvider(provider)                 // /status sections
//	d.Registry().MustRegister(collector)          // /metrics
//	d.AddComponent("raft", run)                   // long-running work
package daemon

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	sddaemon "github.com/coreos/go-systemd/v22/daemon"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/cmd/fenced/internal/buildinfo"
	"github.com/fenced-project/fenced/cmd/fenced/internal/logging"
	"github.com/fenced-project/fenced/cmd/fenced/internal/server"
	"github.com/fenced-project/fenced/cmd/fenced/status"
	"github.com/fenced-project/fenced/configs"
	"github.com/fenced-project/fenced/stonith"
)

// Options adjust a Daemon. Zero values select the production behaviour.
type Options struct {
	// Logger is the daemon's logger.
	Logger *slog.Logger
	// Redactor receives every secret the daemon reads, so logs hide them.
	Redactor *logging.Redactor
	// CredentialsDir resolves credential:NAME references; normally
	// $CREDENTIALS_DIRECTORY.
	CredentialsDir string
	// Build describes the binary.
	Build buildinfo.Info
	// Listener, when set, is used instead of listening on http.listen.
	Listener net.Listener
	// Notify sends an sd_notify state; default go-systemd's SdNotify,
	// which does nothing outside systemd.
	Notify func(state string) error
	// Watchdog returns systemd's watchdog timeout (0 when disabled);
	// default go-systemd's SdWatchdogEnabled.
	Watchdog func() (time.Duration, error)
	// ShutdownTimeout bounds stopping after the context is cancelled.
	// Default 4s, inside the 5s a SIGTERM may take.
	ShutdownTimeout time.Duration
	// StatusInterval is how often STATUS= is refreshed. Default 10s.
	StatusInterval time.Duration
}

// Component is long-running work of the replica. Run runs until ctx is
// cancelled and then returns nil promptly. Returning an error earlier stops
// the daemon with that error (systemd then restarts it); returning nil
// earlier just ends the component.
type Component struct {
	Name string
	Run  func(ctx context.Context) error
}

// Daemon is one fenced replica.
type Daemon struct {
	cfg    *configs.Config
	opts   Options
	log    *slog.Logger
	srv    *server.Server
	auth   *stonith.Authenticator
	arrays []arrayclients.Config
	// tls is the HTTP endpoint's TLS configuration, nil for plain HTTP.
	tls *tls.Config

	mu         sync.Mutex
	components []Component
	running    bool
}

// New prepares a daemon for cfg: it reads the secrets the configuration
// names (registering them with the redactor), loads the HTTP endpoint's
// certificate and CAs and builds the HTTP server. It changes nothing on
// disk, so every error it returns is a problem with the configuration or
// the files it names.
func New(cfg *configs.Config, opts Options) (*Daemon, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Redactor == nil {
		opts.Redactor = logging.NewRedactor()
	}
	if opts.Notify == nil {
		opts.Notify = func(state string) error { _, err := sddaemon.SdNotify(false, state); return err }
	}
	if opts.Watchdog == nil {
		opts.Watchdog = func() (time.Duration, error) { return sddaemon.SdWatchdogEnabled(false) }
	}
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = 4 * time.Second
	}
	if opts.StatusInterval <= 0 {
		opts.StatusInterval = 10 * time.Second
	}
	opts.Redactor.Add(cfg.Secrets(opts.CredentialsDir)...)

	d := &Daemon{cfg: cfg, opts: opts, log: opts.Logger}
	for _, a := range cfg.Arrays {
		cc, err := a.ClientConfig(opts.CredentialsDir)
		if err != nil {
			return nil, fmt.Errorf("prepare array: %w", err)
		}
		opts.Redactor.AddCredential(cc.Username, cc.Password)
		for _, s := range cc.ChapSecrets {
			opts.Redactor.Add(s)
		}
		if a.PowerStore.ChapSecretsFile != "" {
			d.log.Warn("powerstore.chapSecretsFile is deprecated and ignored: csi-powerstore's node plugin sets a new CHAP secret at every start, "+
				"and an unfence gives a CHAP initiator back for it to set its own (docs/footprint.md, \"Unfence\"); remove the field", "array", a.Name)
		}
		d.arrays = append(d.arrays, cc)
	}
	if cfg.HTTP.TokenFile != "" {
		p, err := configs.ResolveFile(cfg.HTTP.TokenFile, opts.CredentialsDir)
		if err != nil {
			return nil, fmt.Errorf("http.tokenFile: %w", err)
		}
		t, err := configs.ReadSecretFile(p)
		if err != nil {
			return nil, fmt.Errorf("http.tokenFile: %w", err)
		}
		opts.Redactor.Add(t)
	}
	auth, err := newAuthenticator(cfg, opts.CredentialsDir)
	if err != nil {
		return nil, err
	}
	d.auth = auth.WithLogger(d.log.With("component", "auth"))
	if d.tls, err = serverTLS(cfg.HTTP.TLS, opts.CredentialsDir); err != nil {
		return nil, err
	}
	d.srv = server.New(server.Options{ReplicaID: cfg.Replica.ID, Build: opts.Build, Logger: opts.Logger, Authorize: d.auth.RequireOperator, Redact: opts.Redactor.Redact, Pprof: cfg.HTTP.Pprof})
	return d, nil
}

// Config returns the configuration the daemon runs with.
func (d *Daemon) Config() *configs.Config { return d.cfg }

// Logger returns the daemon's logger.
func (d *Daemon) Logger() *slog.Logger { return d.log }

// CredentialsDir returns the directory credential:NAME references resolve in.
func (d *Daemon) CredentialsDir() string { return d.opts.CredentialsDir }

// Redactor is the one redactor behind the log handler; components that
// show errors pass their text through it.
func (d *Daemon) Redactor() *logging.Redactor { return d.opts.Redactor }

// ArrayConfigs returns one adapter configuration per configured array, with
// secrets read, in configuration order.
func (d *Daemon) ArrayConfigs() []arrayclients.Config { return d.arrays }

// Build describes the running binary.
func (d *Daemon) Build() buildinfo.Info { return d.opts.Build }

// Server returns the HTTP server.
func (d *Daemon) Server() *server.Server { return d.srv }

// Handle adds an HTTP route; see server.Server.Handle.
func (d *Daemon) Handle(pattern string, h http.Handler) { d.srv.Handle(pattern, h) }

// Authorize wraps a mutating handler so it needs an operator: the API token
// or a listed operator's client certificate, in person or forwarded by a
// replica; see stonith.Authenticator.
func (d *Daemon) Authorize(h http.Handler) http.Handler { return d.srv.Authorize(h) }

// AuthorizeReplica wraps an internal handler so it needs a replica of the
// group (its client certificate, in person or forwarded by another
// replica).
func (d *Daemon) AuthorizeReplica(h http.Handler) http.Handler { return d.auth.RequireReplica(h) }

// Authenticator is the API's authenticator, built from http and replica.tls.
func (d *Daemon) Authenticator() *stonith.Authenticator { return d.auth }

// AddReadinessCheck adds a /readyz check; see server.Server.AddReadinessCheck.
func (d *Daemon) AddReadinessCheck(name string, check server.ReadinessCheck) {
	d.srv.AddReadinessCheck(name, check)
}

// AddStatusProvider adds a /status provider; see server.Server.AddStatusProvider.
func (d *Daemon) AddStatusProvider(p server.StatusProvider) { d.srv.AddStatusProvider(p) }

// Registry is the Prometheus registry served at /metrics.
func (d *Daemon) Registry() *prometheus.Registry { return d.srv.Registry() }

// AddComponent adds long-running work, started by Run. It must be called
// before Run.
func (d *Daemon) AddComponent(name string, run func(ctx context.Context) error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.running {
		return fmt.Errorf("add component %s: the daemon is already running", name)
	}
	d.components = append(d.components, Component{Name: name, Run: run})
	return nil
}

// ErrHTTPStopped is returned when the HTTP server stops on its own.
var ErrHTTPStopped = errors.New("http server stopped")

// Run runs the replica until ctx is cancelled (a clean stop: it returns
// nil) or a component fails (it returns the error).
func (d *Daemon) Run(ctx context.Context) error {
	d.mu.Lock()
	d.running = true
	comps := append([]Component(nil), d.components...)
	d.mu.Unlock()

	if err := prepareDataDir(d.cfg.Replica.DataDir); err != nil {
		return err
	}
	tlsConfig := d.tls
	ln := d.opts.Listener
	if ln == nil {
		var lc net.ListenConfig
		var err error
		if ln, err = lc.Listen(ctx, "tcp", d.cfg.HTTP.Listen); err != nil {
			return fmt.Errorf("listen on http.listen: %w", err)
		}
	}

	// Components stop first and the HTTP endpoint last, so that /healthz
	// and /status answer while the replica winds down.
	compCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	httpCtx, stopHTTP := context.WithCancel(context.WithoutCancel(ctx))
	defer stopHTTP()
	type result struct {
		name string
		err  error
	}
	results := make(chan result, len(comps)+1)
	var compWG, httpWG sync.WaitGroup
	start := func(wg *sync.WaitGroup, ctx context.Context, name string, run func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results <- result{name: name, err: run(ctx)}
		}()
	}
	start(&httpWG, httpCtx, "http", func(ctx context.Context) error {
		return d.srv.Serve(ctx, ln, tlsConfig, d.opts.ShutdownTimeout/2)
	})
	for _, c := range comps {
		start(&compWG, compCtx, c.Name, c.Run)
	}

	d.notify(sddaemon.SdNotifyReady)
	d.notify("STATUS=" + d.statusLine(ctx))
	d.log.Info("fenced started", "replica", d.cfg.Replica.ID, "version", d.opts.Build.Version,
		"http", ln.Addr().String(), "clusters", len(d.cfg.Clusters), "arrays", len(d.cfg.Arrays))

	var watchdog <-chan time.Time
	if wd, err := d.opts.Watchdog(); err != nil {
		d.log.Warn("read systemd watchdog settings", "error", err)
	} else if wd > 0 {
		t := time.NewTicker(wd / 2)
		defer t.Stop()
		watchdog = t.C
	}
	statusTick := time.NewTicker(d.opts.StatusInterval)
	defer statusTick.Stop()

	var runErr error
loop:
	for {
		select {
		case <-ctx.Done():
			d.log.Info("stopping", "reason", context.Cause(ctx))
			break loop
		case r := <-results:
			switch {
			case r.err != nil:
				runErr = fmt.Errorf("%s: %w", r.name, r.err)
				d.log.Error("component failed; stopping", "component", r.name, "error", r.err)
				break loop
			case r.name == "http":
				runErr = ErrHTTPStopped
				break loop
			default:
				d.log.Info("component finished", "component", r.name)
			}
		case <-watchdog:
			// The keep-alive comes from this loop: if it stalls, systemd
			// restarts the daemon.
			d.notify(sddaemon.SdNotifyWatchdog)
		case <-statusTick.C:
			d.notify("STATUS=" + d.statusLine(ctx))
		}
	}

	d.notify(sddaemon.SdNotifyStopping)
	d.notify("STATUS=stopping")
	dctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), d.opts.ShutdownTimeout)
	defer dcancel()
	deadline := dctx.Done()
	cancel()
	if !waitUntil(&compWG, deadline) {
		d.log.Warn("components did not stop in time; exiting anyway", "timeout", d.opts.ShutdownTimeout)
	}
	stopHTTP()
	if !waitUntil(&httpWG, deadline) {
		d.log.Warn("http server did not stop in time; exiting anyway", "timeout", d.opts.ShutdownTimeout)
	}
drain:
	for {
		select {
		case r := <-results:
			if r.err != nil && runErr == nil && !errors.Is(r.err, context.Canceled) {
				d.log.Warn("component stopped with an error", "component", r.name, "error", r.err)
			}
		default:
			break drain
		}
	}
	d.log.Info("fenced stopped")
	return runErr
}

// waitUntil waits for wg until deadline fires (or already fired) and
// reports whether wg finished.
func waitUntil(wg *sync.WaitGroup, deadline <-chan struct{}) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-deadline:
		return false
	}
}

// statusLine summarizes readiness for systemd's STATUS=.
func (d *Daemon) statusLine(ctx context.Context) string {
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	ready, checks := d.srv.Ready(cctx)
	if ready {
		return fmt.Sprintf("ready: replica %s, %d clusters", d.cfg.Replica.ID, len(d.cfg.Clusters))
	}
	for _, c := range checks {
		if !c.OK {
			return fmt.Sprintf("not ready: %s: %s", c.Name, c.Error)
		}
	}
	return "not ready"
}

func (d *Daemon) notify(state string) {
	if err := d.opts.Notify(state); err != nil {
		d.log.Warn("sd_notify", "state", state, "error", err)
	}
}

// prepareDataDir creates the data directory and checks it is writable.
func prepareDataDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	f, err := os.CreateTemp(dir, ".write-check-*")
	if err != nil {
		return fmt.Errorf("data directory %s is not writable: %w", dir, err)
	}
	name := f.Name()
	_ = f.Close()
	return os.Remove(name)
}

// Status builds the status document /status serves.
func (d *Daemon) Status(ctx context.Context) status.Status { return d.srv.Status(ctx) }
