package pki

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fenced-project/fenced/configs"
)

// ErrBadFileName marks a certificate name that cannot name its files.
var ErrBadFileName = errors.New("not usable as a file name")

// LoadCAFiles reads a CA's certificate and private key from PEM files.
func LoadCAFiles(certFile, keyFile string) (*CA, error) {
	certPEM, err := configs.ReadFileLimited(certFile, 1<<20)
	if err != nil {
		return nil, fmt.Errorf("read CA certificate: %w", err)
	}
	keyPEM, err := configs.ReadFileLimited(keyFile, 1<<20)
	if err != nil {
		return nil, fmt.Errorf("read CA key: %w", err)
	}
	ca, err := LoadCA(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%s, %s: %w", certFile, keyFile, err)
	}
	return ca, nil
}

// ReplicaFromConfig reads the replica ID and the hosts it is reached at
// from a configuration file. Referenced files need not exist yet: the
// certificates are what is being made.
func ReplicaFromConfig(path string) (ReplicaRequest, error) {
	cfg, err := configs.Load(path, configs.Options{SkipFileChecks: true})
	if err != nil {
		return ReplicaRequest{}, err
	}
	req := ReplicaRequest{ID: cfg.Replica.ID}
	if h, _, err := net.SplitHostPort(cfg.Replica.RaftAdvertiseAddress); err == nil && !unspecified(h) {
		req.Hosts = append(req.Hosts, h)
	}
	if u, err := url.Parse(cfg.HTTP.AdvertiseURL); err == nil && u.Hostname() != "" && !unspecified(u.Hostname()) {
		req.Hosts = append(req.Hosts, u.Hostname())
	}
	return req, nil
}

func unspecified(host string) bool {
	ip := net.ParseIP(host)
	return host == "" || ip != nil && ip.IsUnspecified()
}

// WritePair writes NAME.crt (0644) and NAME.key (0600) into dir, refusing
// to overwrite either, and prints their paths.
func WritePair(w io.Writer, dir, name string, p Pair) error {
	if strings.ContainsAny(name, `/\`) || name == "." || name == ".." {
		return fmt.Errorf("name %q: %w", name, ErrBadFileName)
	}
	certPath := filepath.Join(dir, name+".crt")
	keyPath := filepath.Join(dir, name+".key")
	for _, path := range []string{certPath, keyPath} {
		if _, err := os.Lstat(path); err == nil {
			return fmt.Errorf("%s exists: refusing to overwrite it (move it away first)", path)
		}
	}
	if err := writeNew(keyPath, p.KeyPEM, 0o600); err != nil {
		return err
	}
	if err := writeNew(certPath, p.CertPEM, 0o644); err != nil {
		_ = os.Remove(keyPath)
		return err
	}
	_, err := fmt.Fprintf(w, "wrote %s\nwrote %s\n", certPath, keyPath)
	return err
}

func writeNew(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		_ = os.Remove(path)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		_ = os.Remove(path)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// WriteDescription writes what a certificate file holds for a person:
// subject, issuer, names, usages, role, validity and warnings.
func WriteDescription(w io.Writer, file string, d Description) {
	fmt.Fprintf(w, "%s:\n", file)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(w, "  %-12s %s\n", k+":", v)
		}
	}
	row("Subject", d.Subject)
	row("Issuer", d.Issuer)
	row("DNS names", strings.Join(d.DNSNames, ", "))
	row("IPs", strings.Join(d.IPs, ", "))
	row("E-mail", strings.Join(d.Emails, ", "))
	row("URIs", strings.Join(d.URIs, ", "))
	row("Replica", strings.Join(d.Replicas, ", "))
	row("Usages", strings.Join(d.Usages, ", "))
	row("Role", d.Role)
	row("Valid", fmt.Sprintf("%s to %s (%s)", d.NotBefore.Format(time.RFC3339), d.NotAfter.Format(time.RFC3339), d.TimeLeft))
	for _, warn := range d.Warnings {
		row("Warning", warn)
	}
}
