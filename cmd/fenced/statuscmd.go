package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/fenced-project/fenced/cmd/fenced/status"
	"github.com/fenced-project/fenced/configs"
)

// defaultAddr is the HTTP endpoint `fenced status` asks by default: the
// default http.listen.
const defaultAddr = "http://127.0.0.1:7440"

type statusFlags struct {
	addr    string
	output  string
	timeout time.Duration
	caFile  string
	config  string
	credDir string
	addrSet bool
}

func newStatusCmd() *cobra.Command {
	var f statusFlags
	addr := os.Getenv("FENCED_ADDR")
	if addr == "" {
		addr = defaultAddr
	}
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show a replica's status (its /status endpoint)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.output != "table" && f.output != "json" {
				return &exitError{code: exitUsage, err: fmt.Errorf("unknown output %q: want table or json", f.output)}
			}
			f.addrSet = cmd.Flags().Changed("addr") || os.Getenv("FENCED_ADDR") != ""
			raw, st, err := fetchStatus(cmd.Context(), f)
			if err != nil {
				return &exitError{code: exitFailure, err: err}
			}
			if f.output == "json" {
				var b bytes.Buffer
				if err := json.Indent(&b, raw, "", "  "); err != nil {
					return &exitError{code: exitFailure, err: fmt.Errorf("format status: %w", err)}
				}
				b.WriteByte('\n')
				_, err := cmd.OutOrStdout().Write(b.Bytes())
				return err
			}
			return writeTable(cmd.OutOrStdout(), st)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.addr, "addr", addr, "URL of a replica's HTTP endpoint ($FENCED_ADDR)")
	fl.StringVarP(&f.output, "output", "o", "table", "table or json")
	fl.DurationVar(&f.timeout, "timeout", 10*time.Second, "how long to wait for the answer")
	fl.StringVar(&f.caFile, "ca-file", "", "PEM bundle that signs the endpoint's certificate (https)")
	fl.StringVarP(&f.config, "config", "c", "", "configuration file: the endpoint (http.advertiseURL or http.listen) and, for https, the CA (replica.tls.caFile)")
	fl.StringVar(&f.credDir, "credentials-dir", defaultCredentialsDir(), "directory credential:NAME references of --config resolve in")
	return cmd
}

// defaultCredentialsDir is $CREDENTIALS_DIRECTORY under systemd, else
// where the package keeps the credentials.
func defaultCredentialsDir() string {
	if d := os.Getenv("CREDENTIALS_DIRECTORY"); d != "" {
		return d
	}
	return "/etc/fenced/credentials"
}

// fromConfig fills the endpoint and its CA from --config, where the flags
// do not set them.
func (f *statusFlags) fromConfig() error {
	cfg, err := configs.Load(f.config, configs.Options{CredentialsDir: f.credDir})
	if err != nil {
		return fmt.Errorf("--config: %w", err)
	}
	if !f.addrSet {
		f.addr = localURL(cfg.HTTP)
	}
	if f.caFile == "" && cfg.HTTP.TLS.Enabled() && cfg.Replica.TLS.CAFile != "" {
		ca, err := configs.ResolveFile(cfg.Replica.TLS.CAFile, f.credDir)
		if err != nil {
			return fmt.Errorf("replica.tls.caFile of --config: %w", err)
		}
		f.caFile = ca
	}
	return nil
}

// fetchStatus GETs /status and decodes it.
func fetchStatus(ctx context.Context, f statusFlags) ([]byte, status.Status, error) {
	var st status.Status
	if f.config != "" {
		if err := f.fromConfig(); err != nil {
			return nil, st, err
		}
	}
	client := &http.Client{Timeout: f.timeout}
	if f.caFile != "" {
		pem, err := configs.ReadFileLimited(f.caFile, configs.MaxPEMBytes)
		if err != nil {
			return nil, st, fmt.Errorf("read --ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, st, fmt.Errorf("--ca-file %s holds no PEM certificate", f.caFile)
		}
		client.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	}
	url := strings.TrimSuffix(f.addr, "/") + "/status"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, st, fmt.Errorf("status from %s: %w", url, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, st, fmt.Errorf("status from %s: %w", f.addr, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, st, fmt.Errorf("read status from %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, st, fmt.Errorf("status from %s: %s", url, resp.Status)
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		return nil, st, fmt.Errorf("decode status from %s: %w", url, err)
	}
	return raw, st, nil
}
