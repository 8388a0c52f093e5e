// Package opclient is the client side of fenced's operator commands: which
// replica endpoint to call and how to trust it (from flags, the
// environment and the replica's configuration), who is acting, which API
// token or client certificate authorizes the call, and how the API's
// refusals read to an operator.
package opclient

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/fenced-project/fenced/configs"
)

// DefaultCredentialsDir is where the shipped unit loads its credentials
// from (LoadCredential=fenced:/etc/fenced/credentials): on the daemon's
// host, credential:NAME references of its configuration resolve there.
const DefaultCredentialsDir = "/etc/fenced/credentials"

// PublicCertsDir holds copies of the group's public CA certificates,
// world-readable (the package creates it mode 0755): a command run
// without root, which cannot read DefaultCredentialsDir, resolves the
// credential:NAME CA references of --config here instead. It holds no
// secret.
const PublicCertsDir = "/etc/fenced/public"

// DefaultAddr is the HTTP endpoint the operator commands call by default:
// the default http.listen.
const DefaultAddr = "http://127.0.0.1:7440"

// CAPool returns the CAs that verify a replica's HTTPS endpoint given its
// configuration, resolving credential:NAME references in credDir.
type CAPool func(cfg *configs.Config, credDir string) (*x509.CertPool, error)

// EndpointFlags are the flags of every command that calls a replica's
// HTTP endpoint: where it is, how to trust it, how to authenticate.
type EndpointFlags struct {
	Addr           string
	Config         string
	CredentialsDir string
	CAFile         string
	CertFile       string
	KeyFile        string
	Timeout        time.Duration
	// PublicDir replaces PublicCertsDir (tests).
	PublicDir string
}

func (f *EndpointFlags) publicDir() string {
	if f.PublicDir != "" {
		return f.PublicDir
	}
	return PublicCertsDir
}

// Register adds the endpoint flags to cmd, with timeout as --timeout's
// default.
func (f *EndpointFlags) Register(cmd *cobra.Command, timeout time.Duration) {
	fl := cmd.Flags()
	fl.StringVar(&f.Addr, "addr", os.Getenv("FENCED_ADDR"),
		"a replica's HTTP endpoint, URL or host:port ($FENCED_ADDR; default from --config, else "+DefaultAddr+")")
	fl.StringVarP(&f.Config, "config", "c", os.Getenv("FENCED_CONFIG"),
		"the replica's configuration file ($FENCED_CONFIG): its endpoint, CA and API token")
	fl.StringVar(&f.CredentialsDir, "credentials-dir", credentialsDirDefault(),
		"directory resolving credential:NAME references ($CREDENTIALS_DIRECTORY, else "+DefaultCredentialsDir+")")
	fl.StringVar(&f.CAFile, "ca-file", os.Getenv("FENCED_CA_FILE"), "PEM bundle that signs the endpoint's certificate ($FENCED_CA_FILE; default: the CAs of --config)")
	fl.StringVar(&f.CertFile, "cert-file", os.Getenv("FENCED_CERT_FILE"), "operator's client certificate (PEM) authorizing the call instead of a token ($FENCED_CERT_FILE)")
	fl.StringVar(&f.KeyFile, "key-file", os.Getenv("FENCED_KEY_FILE"), "private key of --cert-file (PEM, $FENCED_KEY_FILE)")
	fl.DurationVar(&f.Timeout, "timeout", timeout, "how long to wait for the answer")
}

func credentialsDirDefault() string {
	if d := os.Getenv("CREDENTIALS_DIRECTORY"); d != "" {
		return d
	}
	return DefaultCredentialsDir
}

// Endpoint is what a command needs to call a replica.
type Endpoint struct {
	// Base is the endpoint's base URL, scheme://host:port.
	Base string
	HTTP *http.Client
	// Config is the --config file, or nil.
	Config *configs.Config
}

// Resolve builds the endpoint from the flags: --addr (a URL, or host:port
// given the scheme the configuration or the host implies), else the
// configured endpoint, else the default; the CAs of --ca-file, else of the
// configuration (groupCAs of it) with the system roots; the operator's
// client certificate.
func (f *EndpointFlags) Resolve(groupCAs CAPool) (*Endpoint, error) {
	e := &Endpoint{}
	defaultScheme := ""
	if f.Config != "" {
		// Only the HTTP section is used: the files the daemon reads
		// (kubeconfigs, array secrets) need not be readable here.
		cfg, err := configs.Load(f.Config, configs.Options{CredentialsDir: f.CredentialsDir, SkipFileChecks: true})
		if err != nil {
			return nil, fmt.Errorf("--config: %w", err)
		}
		e.Config = cfg
		defaultScheme = "http"
		if cfg.HTTP.TLS.Enabled() {
			defaultScheme = "https"
		}
	}
	addr := f.Addr
	if addr == "" && e.Config != nil {
		addr = localURL(e.Config.HTTP)
	}
	if addr == "" {
		addr = DefaultAddr
	}
	base, err := normalizeAddr(addr, defaultScheme)
	if err != nil {
		return nil, err
	}
	e.Base = base
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	switch {
	case f.CAFile != "":
		pem, err := configs.ReadFileLimited(f.CAFile, configs.MaxPEMBytes)
		if err != nil {
			return nil, fmt.Errorf("--ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--ca-file %s holds no PEM certificate", f.CAFile)
		}
		tc.RootCAs = pool
	case e.Config != nil && strings.HasPrefix(base, "https://"):
		pool, err := groupCAs(e.Config, f.CredentialsDir)
		if errors.Is(err, fs.ErrPermission) && f.CredentialsDir != f.publicDir() {
			// Not root: the public copies, when they are installed.
			if pub, perr := groupCAs(e.Config, f.publicDir()); perr == nil {
				pool, err = pub, nil
			} else {
				err = fmt.Errorf("%w (and in %s: %v); run as root, or install the CA certificates world-readable in %s "+
					"(the operator's guide, \"Read fenced status\")", err, f.publicDir(), perr, f.publicDir())
			}
		}
		if err != nil {
			return nil, fmt.Errorf("CA of --config: %w%s", err, credentialsHint(err))
		}
		tc.RootCAs = pool
	}
	if (f.CertFile == "") != (f.KeyFile == "") {
		return nil, errors.New("--cert-file and --key-file go together")
	}
	if f.CertFile != "" {
		pair, err := configs.LoadX509KeyPair(f.CertFile, f.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("load --cert-file and --key-file: %w", err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	e.HTTP = &http.Client{Timeout: f.Timeout, Transport: &http.Transport{TLSClientConfig: tc, Proxy: http.ProxyFromEnvironment},
		CheckRedirect: FollowLeader}
	return e, nil
}

// maxRedirects bounds the redirects a call follows: to the leader, and
// once more if leadership moved meanwhile.
const maxRedirects = 3

// FollowLeader is the operator commands' redirect policy. A follower
// answers a call proven by a client certificate with 307 to the leader,
// where the client presents the certificate itself (TLS proves possession
// of its key; a certificate cannot be passed on by a replica). It follows
// 307 and 308 only, which keep the method and the body, at most
// maxRedirects, never from https to plain http. The API token is never
// sent to another host and port than the one the operator named: it is
// dropped on a redirect elsewhere (a token call is forwarded by the
// follower, not redirected, so it never needs one).
func FollowLeader(req *http.Request, via []*http.Request) error {
	if len(via) >= maxRedirects {
		return fmt.Errorf("stopped after %d redirects", len(via))
	}
	if req.Response != nil && req.Response.StatusCode != http.StatusTemporaryRedirect && req.Response.StatusCode != http.StatusPermanentRedirect {
		return fmt.Errorf("%s answered %s to %s; only 307 and 308 redirects are followed", via[len(via)-1].URL.Host, req.Response.Status, req.URL.Redacted())
	}
	if via[len(via)-1].URL.Scheme == "https" && req.URL.Scheme != "https" {
		return fmt.Errorf("refusing a redirect from https to %s", req.URL.Redacted())
	}
	if req.URL.Host != via[0].URL.Host {
		req.Header.Del("Authorization")
	}
	return nil
}

// credentialsHint tells how to resolve a credential: reference when err
// is that no directory was given.
func credentialsHint(err error) string {
	if errors.Is(err, configs.ErrNoCredentialsDir) {
		return " (pass --credentials-dir: the directory of the unit's credentials, " + DefaultCredentialsDir + " on a replica's host)"
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
