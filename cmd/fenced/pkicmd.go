package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/fenced-project/fenced/cmd/fenced/internal/pki"
	"github.com/fenced-project/fenced/configs"
)

func newPKICmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pki",
		Short: "Make the certificates a fenced group needs",
		Long: `Make a certificate authority, replica certificates and operator certificates.

A group uses two CAs: one for the replicas (replica.tls.caFile and
http.tls.clientCAFile) and one for people (http.tls.operatorCAFile). A
replica's certificate serves Raft and HTTPS and authenticates the replica to
its peers (serverAuth and clientAuth); it names the replica by the URI
fenced://replica/<id> (the only name peers recognise it by) and the hosts
it is reached at. An operator's certificate only authenticates (clientAuth)
and names the person.

Keys are ECDSA P-256 in PKCS #8 PEM, written with mode 0600. No file is
overwritten. Keep CA keys off the management hosts.`,
		Example: `  fenced pki ca --name fenced-replica-ca
  fenced pki ca --name fenced-operator-ca
  fenced pki replica --ca fenced-replica-ca --config mgmt1.yaml
  fenced pki replica mgmt2 --ca fenced-replica-ca --host mgmt2.example.net --host 10.0.0.12
  fenced pki replica --ca fenced-replica-ca --from-cert old/mgmt3.crt --out new
  fenced pki operator alice --ca fenced-operator-ca --email alice@example.net
  fenced pki show mgmt1.crt`,
	}
	cmd.AddCommand(newPKICACmd(), newPKIReplicaCmd(), newPKIOperatorCmd(), newPKIShowCmd())
	return cmd
}

func newPKICACmd() *cobra.Command {
	var name, out string
	var days int
	cmd := &cobra.Command{
		Use:   "ca",
		Short: "Make a certificate authority: NAME.crt and NAME.key",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := pki.NewCA(name, time.Now(), daysOf(days))
			if err != nil {
				return &exitError{code: exitFailure, err: err}
			}
			return writePair(cmd.OutOrStdout(), out, name, p)
		},
	}
	cmd.Flags().StringVar(&name, "name", "fenced-ca", "the CA's common name and file name")
	cmd.Flags().StringVar(&out, "out", ".", "directory to write NAME.crt and NAME.key into")
	cmd.Flags().IntVar(&days, "days", wholeDays(pki.DefaultCAValidity), "validity in days")
	return cmd
}

func newPKIReplicaCmd() *cobra.Command {
	var ca caFlags
	var hosts []string
	var config, fromCert, out string
	var days int
	cmd := &cobra.Command{
		Use:   "replica [ID]",
		Short: "Issue a replica's certificate (serverAuth and clientAuth): ID.crt and ID.key",
		Long: `Issue a replica's certificate from the replica CA. It names the replica by the
URI SAN fenced://replica/<ID>, which is how peers recognise it (never by a
host name or address), and also carries the ID as subject CN and a DNS
name, and every --host (DNS name or IP address). With --config, the ID
defaults to replica.id and the hosts of replica.raftAdvertiseAddress and
http.advertiseURL are added.

With --from-cert, the ID and hosts come from a certificate issued earlier
(its URI SAN, else its subject CN; its DNS names and IP addresses): how a
certificate made before replicas were named by URI is reissued.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := pki.ReplicaRequest{Hosts: hosts}
			if fromCert != "" {
				if config != "" {
					return &exitError{code: exitUsage, err: errors.New("--from-cert and --config: give one")}
				}
				data, err := configs.ReadFileLimited(fromCert, 1<<20)
				if err != nil {
					return &exitError{code: exitFailure, err: fmt.Errorf("--from-cert: %w", err)}
				}
				certs, err := pki.ParseCertificates(data)
				if err != nil {
					return &exitError{code: exitFailure, err: fmt.Errorf("--from-cert %s: %w", fromCert, err)}
				}
				old, err := pki.ReplicaFromCert(certs[0])
				if err != nil {
					return &exitError{code: exitFailure, err: fmt.Errorf("--from-cert %s: %w", fromCert, err)}
				}
				req.ID = old.ID
				req.Hosts = append(old.Hosts, hosts...)
			}
			if config != "" {
				fromCfg, err := pki.ReplicaFromConfig(config)
				if err != nil {
					return &exitError{code: exitConfig, err: err}
				}
				req.ID = fromCfg.ID
				req.Hosts = append(fromCfg.Hosts, hosts...)
			}
			if len(args) == 1 {
				if req.ID != "" && req.ID != args[0] {
					if fromCert != "" {
						return &exitError{code: exitUsage, err: fmt.Errorf("replica ID %q differs from %q, the replica %s names", args[0], req.ID, fromCert)}
					}
					return &exitError{code: exitUsage, err: fmt.Errorf("replica ID %q differs from replica.id %q in %s", args[0], req.ID, config)}
				}
				req.ID = args[0]
			}
			if req.ID == "" {
				return &exitError{code: exitUsage, err: errors.New("name the replica: an ID argument or --config")}
			}
			authority, err := ca.load()
			if err != nil {
				return &exitError{code: exitFailure, err: err}
			}
			p, err := authority.IssueReplica(req, time.Now(), daysOf(days))
			if err != nil {
				return &exitError{code: exitFailure, err: err}
			}
			return writePair(cmd.OutOrStdout(), out, req.ID, p)
		},
	}
	ca.register(cmd)
	cmd.Flags().StringSliceVar(&hosts, "host", nil, "a host name or IP address the replica is reached at (repeatable)")
	cmd.Flags().StringVar(&config, "config", "", "the replica's configuration: ID and addresses from it")
	cmd.Flags().StringVar(&fromCert, "from-cert", "", "a certificate issued earlier: reissue it with the same ID and hosts")
	cmd.Flags().StringVar(&out, "out", ".", "directory to write ID.crt and ID.key into")
	cmd.Flags().IntVar(&days, "days", wholeDays(pki.DefaultReplicaValidity), "validity in days")
	return cmd
}

func newPKIOperatorCmd() *cobra.Command {
	var ca caFlags
	var email, out string
	var days int
	cmd := &cobra.Command{
		Use:   "operator NAME",
		Short: "Issue an operator's certificate (clientAuth): NAME.crt and NAME.key",
		Long: `Issue an operator's certificate from the operator CA. NAME becomes the subject
common name: what http.tls.operators lists and what the ledger records as
the operator of every call made with the certificate.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			authority, err := ca.load()
			if err != nil {
				return &exitError{code: exitFailure, err: err}
			}
			p, err := authority.IssueOperator(args[0], email, time.Now(), daysOf(days))
			if err != nil {
				return &exitError{code: exitFailure, err: err}
			}
			return writePair(cmd.OutOrStdout(), out, args[0], p)
		},
	}
	ca.register(cmd)
	cmd.Flags().StringVar(&email, "email", "", "the operator's e-mail address (added as a SAN)")
	cmd.Flags().StringVar(&out, "out", ".", "directory to write NAME.crt and NAME.key into")
	cmd.Flags().IntVar(&days, "days", wholeDays(pki.DefaultOperatorValidity), "validity in days")
	return cmd
}

func newPKIShowCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "show FILE...",
		Short: "Show certificates' names, usages and validity, with warnings",
		Long: `Show each certificate of each PEM file: subject, issuer, names, extended key
usages, what fenced can use it for, and validity, with a warning when it is
expired, not valid yet or expires within 30 days. Exits 1 when any
certificate has a warning.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, files []string) error {
			if output != "table" && output != "json" {
				return &exitError{code: exitUsage, err: fmt.Errorf("-o %q: want table or json", output)}
			}
			type shown struct {
				File         string            `json:"file"`
				Certificates []pki.Description `json:"certificates"`
			}
			var all []shown
			warned := 0
			for _, f := range files {
				data, err := configs.ReadFileLimited(f, 1<<20)
				if err != nil {
					return &exitError{code: exitFailure, err: fmt.Errorf("read %s: %w", f, err)}
				}
				certs, err := pki.ParseCertificates(data)
				if err != nil {
					return &exitError{code: exitFailure, err: fmt.Errorf("%s: %w", f, err)}
				}
				s := shown{File: f}
				for _, c := range certs {
					d := pki.Describe(c, time.Now())
					warned += len(d.Warnings)
					s.Certificates = append(s.Certificates, d)
				}
				all = append(all, s)
			}
			w := cmd.OutOrStdout()
			if output == "json" {
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				if err := enc.Encode(all); err != nil {
					return err
				}
			} else {
				for _, s := range all {
					for _, d := range s.Certificates {
						pki.WriteDescription(w, s.File, d)
					}
				}
			}
			if warned > 0 {
				return &exitError{code: exitFailure, err: fmt.Errorf("%d warning(s)", warned)}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table or json")
	return cmd
}

// caFlags name the CA that issues a certificate.
type caFlags struct {
	prefix, cert, key string
}

func (f *caFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.prefix, "ca", "", "the CA's files without extension: PREFIX.crt and PREFIX.key")
	cmd.Flags().StringVar(&f.cert, "ca-cert", "", "the CA's certificate (instead of --ca)")
	cmd.Flags().StringVar(&f.key, "ca-key", "", "the CA's private key (instead of --ca)")
}

func (f *caFlags) load() (*pki.CA, error) {
	certFile, keyFile := f.cert, f.key
	if f.prefix != "" {
		if certFile == "" {
			certFile = f.prefix + ".crt"
		}
		if keyFile == "" {
			keyFile = f.prefix + ".key"
		}
	}
	if certFile == "" || keyFile == "" {
		return nil, errors.New("name the issuing CA: --ca PREFIX, or --ca-cert and --ca-key")
	}
	return pki.LoadCAFiles(certFile, keyFile)
}

// writePair writes the pair with pki.WritePair, a name unusable as a file
// name being a usage error.
func writePair(w io.Writer, dir, name string, p pki.Pair) error {
	if err := pki.WritePair(w, dir, name, p); err != nil {
		code := exitFailure
		if errors.Is(err, pki.ErrBadFileName) {
			code = exitUsage
		}
		return &exitError{code: code, err: err}
	}
	return nil
}

func wholeDays(d time.Duration) int { return int(d / (24 * time.Hour)) }

func daysOf(n int) time.Duration { return time.Duration(n) * 24 * time.Hour }
