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

	"github.com/fenced-project/fenced/configs"
	"github.com/fenced-project/fenced/stonith"
)

// opFlags are the flags every operator command shares.
type opFlags struct {
	addr      string
	config    string
	tokenFile string
	caFile    string
	certFile  string
	keyFile   string
	operator  string
	timeout   time.Duration
}

func (f *opFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.addr, "addr", os.Getenv("FENCED_ADDR"),
		"URL of any replica's HTTP endpoint ($FENCED_ADDR; default from --config, else "+defaultAddr+")")
	fl.StringVarP(&f.config, "config", "c", "", "configuration file to take the endpoint (and token file) from")
	fl.StringVar(&f.tokenFile, "token-file", os.Getenv("FENCED_TOKEN_FILE"), "file holding the API token ($FENCED_TOKEN_FILE; default http.tokenFile of --config)")
	fl.StringVar(&f.caFile, "ca-file", "", "PEM bundle that signs the endpoint's certificate (https)")
	fl.StringVar(&f.certFile, "cert-file", "", "client certificate (PEM) authorizing the call instead of a token")
	fl.StringVar(&f.keyFile, "key-file", "", "private key of --cert-file (PEM)")
	fl.StringVar(&f.operator, "operator", defaultOperator(), "who is acting, recorded in the ledger with the token")
	fl.DurationVar(&f.timeout, "timeout", 30*time.Second, "how long to wait for the answer")
}

// defaultOperator is $USER@hostname.
func defaultOperator() string {
	name := os.Getenv("USER")
	if name == "" {
		if u, err := user.Current(); err == nil {
			name = u.Username
		}
	}
	host, _ := os.Hostname()
	switch {
	case name == "":
		return host
	case host == "":
		return name
	}
	return name + "@" + host
}

// client builds the API client from the flags.
func (f *opFlags) client() (*stonith.Client, error) {
	addr, tokenRef := f.addr, f.tokenFile
	if f.config != "" {
		cfg, err := configs.Load(f.config, configs.Options{CredentialsDir: os.Getenv("CREDENTIALS_DIRECTORY")})
		if err != nil {
			return nil, fmt.Errorf("--config: %w", err)
		}
		if addr == "" {
			addr = localURL(cfg.HTTP)
		}
		if tokenRef == "" && cfg.HTTP.TokenFile != "" {
			tokenRef, err = configs.ResolveFile(cfg.HTTP.TokenFile, os.Getenv("CREDENTIALS_DIRECTORY"))
			if err != nil {
				return nil, fmt.Errorf("http.tokenFile of --config: %w", err)
			}
		}
	}
	if addr == "" {
		addr = defaultAddr
	}
	c := &stonith.Client{BaseURL: strings.TrimSuffix(addr, "/"), Operator: f.operator}
	if tokenRef != "" {
		tok, err := configs.ReadSecretFile(tokenRef)
		if err != nil {
			return nil, fmt.Errorf("token file: %w", err)
		}
		if err := tokenTransportAllowed(c.BaseURL); err != nil {
			return nil, err
		}
		c.Token = tok
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if f.caFile != "" {
		pem, err := configs.ReadFileLimited(f.caFile, configs.MaxPEMBytes)
		if err != nil {
			return nil, fmt.Errorf("--ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--ca-file %s holds no PEM certificate", f.caFile)
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
	c.HTTP = &http.Client{Timeout: f.timeout, Transport: &http.Transport{TLSClientConfig: tc, Proxy: http.ProxyFromEnvironment}}
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
	if strings.HasPrefix(host, "0.0.0.0:") {
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
			return printResult(cmd.OutOrStdout(), res)
		},
	}
	f.register(cmd)
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
