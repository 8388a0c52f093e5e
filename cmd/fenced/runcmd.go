package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/cluster"
	"github.com/fenced-project/fenced/cmd/fenced/internal/buildinfo"
	"github.com/fenced-project/fenced/cmd/fenced/internal/daemon"
	"github.com/fenced-project/fenced/cmd/fenced/internal/logging"
	"github.com/fenced-project/fenced/cmd/fenced/internal/replica"
	"github.com/fenced-project/fenced/cmd/fenced/status"
	"github.com/fenced-project/fenced/configs"
)

type runFlags struct {
	config    string
	credDir   string
	logFormat string
	logLevel  string
	logOutput string
}

func newRunCmd() *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run --config FILE",
		Short: "Run a fenced replica until SIGTERM or SIGINT",
		Long: `Run a fenced replica. Under systemd it logs to the journal with structured
fields, reports READY, STATUS, WATCHDOG and STOPPING, and stops within five
seconds of SIGTERM.

Exit status 78 (EX_CONFIG, which the unit does not restart on) means the
replica cannot start as configured and restarting will not help: a bad
flag, an invalid configuration file, or a file it names that the runtime
refuses (a certificate and key that do not match, a short API token, an
array setting the family's client cannot use; see fenced config
validate). A Raft store that is missing, empty, unreadable or damaged
after it held the group's log exits with status 65 (see fenced datadir
recover). Other failures exit with status 1, and systemd restarts the
replica.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return &exitError{code: exitConfig, err: fmt.Errorf("run takes no arguments, got %q", args)}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.config == "" {
				return &exitError{code: exitConfig, err: errors.New("--config is required")}
			}
			return runDaemon(cmd, f)
		},
	}
	// Under systemd the command line is configuration too: a bad flag in
	// ExecStart= must not be restarted forever.
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &exitError{code: exitConfig, err: err}
	})
	fl := cmd.Flags()
	fl.StringVarP(&f.config, "config", "c", "", "configuration file (required)")
	fl.StringVar(&f.credDir, "credentials-dir", os.Getenv("CREDENTIALS_DIRECTORY"), "directory credential:NAME references resolve in")
	fl.StringVar(&f.logFormat, "log-format", "", "text or json (overrides log.format)")
	fl.StringVar(&f.logLevel, "log-level", "", "debug, info, warn or error (overrides log.level)")
	fl.StringVar(&f.logOutput, "log-output", string(logging.Auto), "auto (journal when stderr is the journal), journal or stream")
	return cmd
}

func runDaemon(cmd *cobra.Command, f runFlags) error {
	red := logging.NewRedactor()
	stderr := cmd.ErrOrStderr()
	logOpts := logging.Options{Format: f.logFormat, Level: f.logLevel, Output: logging.Output(f.logOutput), Writer: stderr, Redactor: red}
	boot, err := logging.New(logOpts)
	if err != nil {
		return &exitError{code: exitConfig, err: err}
	}

	cfg, err := configs.Load(f.config, configs.Options{CredentialsDir: f.credDir})
	if err != nil {
		var pe *configs.ProblemsError
		if errors.As(err, &pe) {
			for _, p := range pe.Problems {
				boot.Error("configuration problem", "file", f.config, "problem", p.String())
			}
			return &exitError{code: exitConfig, err: fmt.Errorf("invalid configuration %s (%d problems listed above)", f.config, len(pe.Problems))}
		}
		return &exitError{code: exitConfig, err: err}
	}
	if logOpts.Format == "" {
		logOpts.Format = cfg.Log.Format
	}
	if logOpts.Level == "" {
		logOpts.Level = cfg.Log.Level
	}
	log, err := logging.New(logOpts)
	if err != nil {
		return &exitError{code: exitConfig, err: err}
	}
	// One stream: client-go, the standard log package, stdout prints and
	// the Dell libraries' loggers all go through log's handler.
	defer logging.Route(log)()
	defer arrayclients.RouteLibraryLogs(slog.New(logging.Quiet(log.Handler(), logging.LibraryEvery, nil)))()
	for _, w := range cfg.Warnings() {
		log.Warn("configuration warning", "file", f.config, "warning", w.String())
	}
	for _, ref := range cfg.UncheckedCredentials() {
		log.Warn("credential reference not checked: no credentials directory", "ref", ref)
	}
	for _, ex := range cfg.ExposedSecretFiles(f.credDir) {
		log.Warn("secret file is readable by group or others; make it mode 0600 or use a systemd credential",
			"field", ex.Field, "file", ex.Path, "mode", fmt.Sprintf("%04o", ex.Mode))
	}

	d, err := daemon.New(cfg, daemon.Options{
		Logger: log, Redactor: red, CredentialsDir: f.credDir, Build: buildinfo.Get(),
	})
	if err == nil {
		err = replica.Preflight(d)
	}
	if err != nil {
		log.Error("cannot start: invalid configuration", "error", err)
		return &exitError{code: exitConfig, err: err}
	}
	// Past preflight, what fails is not the configuration: the Raft
	// store (65), or something restarting may cure (1).
	l, err := replica.Wire(d)
	if err != nil {
		log.Error("cannot start", "error", err)
		if errors.Is(err, cluster.ErrDataDir) {
			return &exitError{code: exitDataDir, err: err}
		}
		return &exitError{code: exitFailure, err: err}
	}
	// The history command's endpoint, served from this replica's ledger.
	var clusterNames []string
	for _, c := range cfg.Clusters {
		clusterNames = append(clusterNames, c.Name)
	}
	d.Handle(http.MethodGet+" "+status.HistoryPath, replica.HistoryHandler(cfg.Replica.ID, l, clusterNames))

	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := d.Run(ctx); err != nil {
		log.Error("fenced failed", "error", err)
		return &exitError{code: exitFailure, err: err}
	}
	return nil
}
