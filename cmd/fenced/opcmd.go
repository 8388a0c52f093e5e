package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/user"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/fenced-project/fenced/cmd/fenced/internal/replica"
	"github.com/fenced-project/fenced/configs"
	"github.com/fenced-project/fenced/stonith"
)

// defaultCredentialsDir is where the shipped unit loads its credentials
// from (LoadCredential=fenced:/etc/fenced/credentials): on the daemon's
// host, credential:NAME references of its configuration resolve there.
const defaultCredentialsDir = "/etc/fenced/credentials"

// endpointFlags are the flags of every command that calls a replica's
// HTTP endpoint: where it is, how to trust it, how to authenticate.
type endpointFlags struct {
	addr           string
	config         string
	credentialsDir string
	caFile         string
	certFile       string
	keyFile        string
	timeout        time.Duration
}

func (f *endpointFlags) register(cmd *cobra.Command, timeout time.Duration) {
	fl := cmd.Flags()
	fl.StringVar(&f.addr, "addr", os.Getenv("FENCED_ADDR"),
		"a replica's HTTP endpoint, URL or host:port ($FENCED_ADDR; default from --config, else "+defaultAddr+")")
	fl.StringVarP(&f.config, "config", "c", os.Getenv("FENCED_CONFIG"),
		"the replica's configuration file ($FENCED_CONFIG): its endpoint, CA and API token")
	fl.StringVar(&f.credentialsDir, "credentials-dir", credentialsDirDefault(),
		"directory resolving credential:NAME references ($CREDENTIALS_DIRECTORY, else "+defaultCredentialsDir+")")
	fl.StringVar(&f.caFile, "ca-file", os.Getenv("FENCED_CA_FILE"), "PEM bundle that signs the endpoint's certificate ($FENCED_CA_FILE; default: the CAs of --config)")
	fl.StringVar(&f.certFile, "cert-file", os.Getenv("FENCED_CERT_FILE"), "operator's client certificate (PEM) authorizing the call instead of a token ($FENCED_CERT_FILE)")
	fl.StringVar(&f.keyFile, "key-file", os.Getenv("FENCED_KEY_FILE"), "private key of --cert-file (PEM, $FENCED_KEY_FILE)")
	fl.DurationVar(&f.timeout, "timeout", timeout, "how long to wait for the answer")
}

func credentialsDirDefault() string {
	if d := os.Getenv("CREDENTIALS_DIRECTORY"); d != "" {
		return d
	}
	return defaultCredentialsDir
}

// opFlags are the flags every operator command shares.
type opFlags struct {
	endpointFlags
	tokenFile string
	operator  string
	output    string
}

func (f *opFlags) register(cmd *cobra.Command) {
	f.endpointFlags.register(cmd, 30*time.Second)
	fl := cmd.Flags()
	fl.StringVar(&f.tokenFile, "token-file", os.Getenv("FENCED_TOKEN_FILE"),
		"file holding the API token, path or credential:NAME ($FENCED_TOKEN_FILE; default http.tokenFile of --config)")
	fl.StringVar(&f.operator, "operator", defaultOperator(), "who is acting, recorded in the ledger with the token ($SUDO_USER or $USER, @host)")
}

// registerOutput adds -o table|json.
func registerOutput(cmd *cobra.Command, out *string) {
	cmd.Flags().StringVarP(out, "output", "o", "table", "table or json")
}

// checkOutput refuses an -o other than table or json.
func checkOutput(out string) error {
	if out != "table" && out != "json" {
		return &exitError{code: exitUsage, err: fmt.Errorf("-o %q: want table or json", out)}
	}
	return nil
}

// writeJSON writes v indented, with a final newline.
func writeJSON(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// defaultOperator names who runs the command: the user who ran sudo
// ($SUDO_USER) rather than root, else $USER, with @hostname.
func defaultOperator() string {
	return operatorName(os.Getenv("SUDO_USER"), os.Getenv("USER"), func() string {
		if u, err := user.Current(); err == nil {
			return u.Username
		}
		return ""
	}, os.Hostname)
}

func operatorName(sudoUser, envUser string, current func() string, hostname func() (string, error)) string {
	name := sudoUser
	if name == "" || name == "root" {
		name = envUser
	}
	if name == "" {
		name = current()
	}
	host, _ := hostname()
	switch {
	case name == "":
		return host
	case host == "":
		return name
	}
	return name + "@" + host
}

// endpoint is what a command needs to call a replica.
type endpoint struct {
	base string
	http *http.Client
	// cfg is the --config file, or nil.
	cfg *configs.Config
}

// resolve builds the endpoint from the flags: --addr (a URL, or host:port
// given the scheme the configuration or the host implies), else the
// configured endpoint, else the default; the CAs of --ca-file, else of the
// configuration (replica.tls.caFile, http.tls.clientCAFile) with the
// system roots; the operator's client certificate.
func (f *endpointFlags) resolve() (*endpoint, error) {
	e := &endpoint{}
	defaultScheme := ""
	if f.config != "" {
		// Only the HTTP section is used: the files the daemon reads
		// (kubeconfigs, array secrets) need not be readable here.
		cfg, err := configs.Load(f.config, configs.Options{CredentialsDir: f.credentialsDir, SkipFileChecks: true})
		if err != nil {
			return nil, fmt.Errorf("--config: %w", err)
		}
		e.cfg = cfg
		defaultScheme = "http"
		if cfg.HTTP.TLS.Enabled() {
			defaultScheme = "https"
		}
	}
	addr := f.addr
	if addr == "" && e.cfg != nil {
		addr = localURL(e.cfg.HTTP)
	}
	if addr == "" {
		addr = defaultAddr
	}
	base, err := normalizeAddr(addr, defaultScheme)
	if err != nil {
		return nil, err
	}
	e.base = base
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	switch {
	case f.caFile != "":
		pem, err := configs.ReadFileLimited(f.caFile, configs.MaxPEMBytes)
		if err != nil {
			return nil, fmt.Errorf("--ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--ca-file %s holds no PEM certificate", f.caFile)
		}
		tc.RootCAs = pool
	case e.cfg != nil && strings.HasPrefix(base, "https://"):
		pool, err := replica.GroupCAPool(e.cfg, f.credentialsDir)
		if err != nil {
			return nil, fmt.Errorf("CA of --config: %w%s", err, credentialsHint(err))
		}
		tc.RootCAs = pool
	}
	if (f.certFile == "") != (f.keyFile == "") {
		return nil, errors.New("--cert-file and --key-file go together")
	}
	if f.certFile != "" {
		pair, err := tls.LoadX509KeyPair(f.certFile, f.keyFile)
		if err != nil {
			return nil, fmt.Errorf("load --cert-file and --key-file: %w", err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	e.http = &http.Client{Timeout: f.timeout, Transport: &http.Transport{TLSClientConfig: tc, Proxy: http.ProxyFromEnvironment}}
	return e, nil
}

// credentialsHint tells how to resolve a credential: reference when err
// is that no directory was given.
func credentialsHint(err error) string {
	if errors.Is(err, configs.ErrNoCredentialsDir) {
		return " (pass --credentials-dir: the directory of the unit's credentials, " + defaultCredentialsDir + " on a replica's host)"
	}
	return ""
}

// normalizeAddr makes a base URL of an endpoint address. A URL keeps its
// scheme; host[:port] gets defaultScheme, or, when that is empty, http for
// a loopback host (the only place a plain-HTTP endpoint listens) and https
// for any other.
func normalizeAddr(addr, defaultScheme string) (string, error) {
	addr = strings.TrimSpace(addr)
	if !strings.Contains(addr, "://") {
		scheme := defaultScheme
		if scheme == "" {
			scheme = "https"
			host := addr
			if h, _, err := net.SplitHostPort(addr); err == nil {
				host = h
			}
			if ip := net.ParseIP(strings.Trim(host, "[]")); (ip != nil && ip.IsLoopback()) || host == "localhost" {
				scheme = "http"
			}
		}
		addr = scheme + "://" + addr
	}
	u, err := url.Parse(addr)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
		return "", fmt.Errorf("--addr %q: want https://host:port, http://127.0.0.1:port or host:port", addr)
	}
	return u.Scheme + "://" + u.Host, nil
}

// client builds the API client from the flags.
func (f *opFlags) client() (*stonith.Client, error) {
	e, err := f.resolve()
	if err != nil {
		return nil, err
	}
	c := &stonith.Client{BaseURL: e.base, Operator: f.operator, HTTP: e.http}
	tokenRef, field := f.tokenFile, "--token-file"
	if tokenRef == "" && f.certFile == "" && e.cfg != nil && e.cfg.HTTP.TokenFile != "" {
		tokenRef, field = e.cfg.HTTP.TokenFile, "http.tokenFile of --config"
	}
	if tokenRef != "" {
		path, err := configs.ResolveFile(tokenRef, f.credentialsDir)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w%s", field, tokenRef, err, credentialsHint(err))
		}
		tok, err := configs.ReadSecretFile(path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", field, err)
		}
		if err := tokenTransportAllowed(c.BaseURL); err != nil {
			return nil, err
		}
		c.Token = tok
	}
	return c, nil
}

// tokenTransportAllowed refuses to send the API token over plain HTTP to
// anything but a loopback address, where it would cross the network in
// clear (the daemon would refuse it there anyway).
func tokenTransportAllowed(base string) error {
	u, err := url.Parse(base)
	if err != nil || u.Host == "" {
		return fmt.Errorf("--addr %q: not a URL (want https://host:port or http://127.0.0.1:port)", base)
	}
	if u.Scheme == "https" {
		return nil
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); (ip != nil && ip.IsLoopback()) || host == "localhost" {
		return nil
	}
	return fmt.Errorf("refusing to send the API token over plain HTTP to %s: use https://, or a loopback address on the daemon's host", u.Host)
}

// localURL is how a command on the host reaches the configured endpoint.
func localURL(h configs.HTTP) string {
	if h.AdvertiseURL != "" {
		return h.AdvertiseURL
	}
	host := h.Listen
	if strings.HasPrefix(host, ":") {
		host = "127.0.0.1" + host
	} else if strings.HasPrefix(host, "0.0.0.0:") {
		host = "127.0.0.1:" + strings.TrimPrefix(host, "0.0.0.0:")
	} else if strings.HasPrefix(host, "[::]:") {
		host = "[::1]:" + strings.TrimPrefix(host, "[::]:")
	}
	if h.TLS.Enabled() {
		return "https://" + host
	}
	return "http://" + host
}

// apiError turns an API refusal into an operator-facing error.
func apiError(addr string, err error) error {
	var ae *stonith.APIError
	if !errors.As(err, &ae) {
		return fmt.Errorf("call %s: %w", addr, err)
	}
	msg := ae.Message
	switch ae.StatusCode {
	case http.StatusUnauthorized:
		return fmt.Errorf("not authorized by %s: pass the API token with --token-file (or $FENCED_TOKEN_FILE, or --config), or a client certificate with --cert-file and --key-file", addr)
	case http.StatusNotFound:
		if strings.Contains(msg, "404 page not found") {
			return fmt.Errorf("%s serves no fencing API: is a cluster configured on that replica?", addr)
		}
		return fmt.Errorf("not found: %s", msg)
	case http.StatusServiceUnavailable:
		if strings.Contains(msg, "leader") {
			return fmt.Errorf("no leader: the replica group has no leader to act now (check `fenced status` on each replica): %s", msg)
		}
		return fmt.Errorf("unavailable: %s", msg)
	case http.StatusConflict:
		return fmt.Errorf("refused: %s", msg)
	case http.StatusBadRequest:
		return fmt.Errorf("bad request: %s", msg)
	}
	return fmt.Errorf("%s: %s", http.StatusText(ae.StatusCode), msg)
}

// printResult writes an action's answer.
func printResult(out io.Writer, res stonith.ActionResult) error {
	line := res.Message
	if res.FenceID != "" {
		line += fmt.Sprintf(" (fence %s, state %s)", res.FenceID, res.State)
	}
	if _, err := fmt.Fprintln(out, line); err != nil {
		return err
	}
	if res.DryRun != nil {
		b, err := json.MarshalIndent(res.DryRun, "", "  ")
		if err != nil {
			return fmt.Errorf("format dry-run report: %w", err)
		}
		_, err = fmt.Fprintf(out, "dry-run report:\n%s\n", b)
		return err
	}
	return nil
}

// opCommand builds one operator command around call.
func opCommand(use, short, long string, args cobra.PositionalArgs, setup func(*cobra.Command),
	call func(ctx context.Context, c *stonith.Client, args []string) (stonith.ActionResult, error)) *cobra.Command {
	var f opFlags
	cmd := &cobra.Command{
		Use: use, Short: short, Long: long, Args: args,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(f.output); err != nil {
				return err
			}
			c, err := f.client()
			if err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
			defer cancel()
			res, err := call(ctx, c, args)
			if err != nil {
				return &exitError{code: exitFailure, err: apiError(c.BaseURL, err)}
			}
			if f.output == "json" {
				return writeJSON(cmd.OutOrStdout(), res)
			}
			return printResult(cmd.OutOrStdout(), res)
		},
	}
	f.register(cmd)
	registerOutput(cmd, &f.output)
	if setup != nil {
		setup(cmd)
	}
	return cmd
}

func newFenceCmd() *cobra.Command {
	var cluster, reason string
	return opCommand("fence NODE --cluster C --reason R", "Fence a node now",
		`Fence a node at every array where it has an identity, then taint it and
force-delete its StatefulSet pods, as for a failed node. Allowed while
fencing is paused. Any replica accepts the call; followers forward it to
the leader.`,
		cobra.ExactArgs(1), func(cmd *cobra.Command) {
			cmd.Flags().StringVar(&cluster, "cluster", "", "the node's cluster (required)")
			cmd.Flags().StringVar(&reason, "reason", "", "why, recorded in the ledger (required)")
			_ = cmd.MarkFlagRequired("cluster")
			_ = cmd.MarkFlagRequired("reason")
		},
		func(ctx context.Context, c *stonith.Client, args []string) (stonith.ActionResult, error) {
			return c.Fence(ctx, stonith.FenceRequest{Cluster: cluster, Node: args[0], Reason: reason})
		})
}

func newUnfenceCmd() *cobra.Command {
	var cluster, reason string
	var force, unverified, yes bool
	cmd := opCommand("unfence NODE --cluster C [--force [--unverified]] [--yes] [--reason R]", "Restore a fenced node",
		`Restore a fenced node's array access and remove its taints. Without
--force the node must have rebooted since the fence (new boot ID) and no pod
from before the fence may still run there.

--force skips these checks; it asks for confirmation unless --yes is given,
and is still refused when the API server cannot be read (the node and its
pods are read first) unless --unverified is given too. The ledger records a
forced unfence as such.`,
		cobra.ExactArgs(1), func(cmd *cobra.Command) {
			cmd.Flags().StringVar(&cluster, "cluster", "", "the node's cluster (required)")
			cmd.Flags().StringVar(&reason, "reason", "operator unfence", "why, recorded in the ledger")
			cmd.Flags().BoolVar(&force, "force", false, "skip the reboot and stale-pod checks")
			cmd.Flags().BoolVar(&unverified, "unverified", false, "with --force: go ahead even when the API server cannot be read")
			cmd.Flags().BoolVar(&yes, "yes", false, "with --force: do not ask for confirmation")
			_ = cmd.MarkFlagRequired("cluster")
		},
		func(ctx context.Context, c *stonith.Client, args []string) (stonith.ActionResult, error) {
			return c.Unfence(ctx, stonith.UnfenceRequest{Cluster: cluster, Node: args[0], Reason: reason, Force: force, Unverified: unverified})
		})
	call := cmd.RunE
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if unverified && !force {
			return &exitError{code: exitUsage, err: errors.New("--unverified goes with --force")}
		}
		if force {
			prompt := fmt.Sprintf("Force-unfence %s in cluster %s: its array access comes back WITHOUT checking that it rebooted and runs none of its old pods.", args[0], cluster)
			if unverified {
				prompt += " The API server need not be readable (--unverified)."
			}
			if err := confirm(cmd.InOrStdin(), cmd.ErrOrStderr(), prompt, yes); err != nil {
				return err
			}
		}
		return call(cmd, args)
	}
	return cmd
}

func newPauseCmd() *cobra.Command {
	var cluster, reason string
	return opCommand("pause [--cluster C] --reason R", "Pause fencing (one cluster, or all)",
		`Pause fencing on verdicts, for one cluster or for all, e.g. during an
array upgrade. Fences already applied stay; recoveries and operator fences
go on.`,
		cobra.NoArgs, func(cmd *cobra.Command) {
			cmd.Flags().StringVar(&cluster, "cluster", "", "the cluster to pause (default: all)")
			cmd.Flags().StringVar(&reason, "reason", "", "why, recorded in the ledger (required)")
			_ = cmd.MarkFlagRequired("reason")
		},
		func(ctx context.Context, c *stonith.Client, _ []string) (stonith.ActionResult, error) {
			return c.Pause(ctx, stonith.PauseRequest{Cluster: cluster, Reason: reason})
		})
}

func newResumeCmd() *cobra.Command {
	var cluster, reason string
	return opCommand("resume [--cluster C]", "Resume fencing (one cluster, or all)", "",
		cobra.NoArgs, func(cmd *cobra.Command) {
			cmd.Flags().StringVar(&cluster, "cluster", "", "the cluster to resume (default: all)")
			cmd.Flags().StringVar(&reason, "reason", "operator resume", "why, recorded in the ledger")
		},
		func(ctx context.Context, c *stonith.Client, _ []string) (stonith.ActionResult, error) {
			return c.Resume(ctx, stonith.PauseRequest{Cluster: cluster, Reason: reason})
		})
}
