package opclient

import (
	"errors"
	"fmt"
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

// OpFlags are the flags every operator command shares.
type OpFlags struct {
	EndpointFlags
	TokenFile string
	Operator  string
	Output    string
}

// Register adds the endpoint flags (30s timeout), --token-file and
// --operator to cmd; -o is the command's to register.
func (f *OpFlags) Register(cmd *cobra.Command) {
	f.EndpointFlags.Register(cmd, 30*time.Second)
	fl := cmd.Flags()
	fl.StringVar(&f.TokenFile, "token-file", os.Getenv("FENCED_TOKEN_FILE"),
		"file holding the API token, path or credential:NAME ($FENCED_TOKEN_FILE; default http.tokenFile of --config)")
	fl.StringVar(&f.Operator, "operator", defaultOperator(), "who is acting, recorded in the ledger with the token ($SUDO_USER or $USER, @host)")
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

// operatorName is who acts, as name@host: sudoUser unless empty or root,
// else envUser, else current(); the host from hostname.
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

// Client builds the API client from the flags: the endpoint (see
// Resolve), the operator, and the API token of --token-file, else of the
// configuration's http.tokenFile unless a client certificate is given.
func (f *OpFlags) Client(groupCAs CAPool) (*stonith.Client, error) {
	e, err := f.Resolve(groupCAs)
	if err != nil {
		return nil, err
	}
	c := &stonith.Client{BaseURL: e.Base, Operator: f.Operator, HTTP: e.HTTP}
	tokenRef, field := f.TokenFile, "--token-file"
	if tokenRef == "" && f.CertFile == "" && e.Config != nil && e.Config.HTTP.TokenFile != "" {
		tokenRef, field = e.Config.HTTP.TokenFile, "http.tokenFile of --config"
	}
	if tokenRef != "" {
		path, err := configs.ResolveFile(tokenRef, f.CredentialsDir)
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

// APIError turns an API refusal from the replica at addr into an
// operator-facing error; sent says whether the call carried credentials
// (a token or a client certificate), which a refusal then names as wrong
// rather than missing.
func APIError(addr string, sent bool, err error) error {
	var ae *stonith.APIError
	if !errors.As(err, &ae) {
		return fmt.Errorf("call %s: %w", addr, err)
	}
	msg := ae.Message
	switch ae.StatusCode {
	case http.StatusUnauthorized:
		if sent {
			return fmt.Errorf("not authorized by %s: it refused the credentials given: check that the token file holds the replicas' api.tokenFile token, or that the client certificate is issued by the group's CA", addr)
		}
		return fmt.Errorf("not authorized by %s: no credentials given: pass the API token with --token-file (or $FENCED_TOKEN_FILE, or --config), or a client certificate with --cert-file and --key-file", addr)
	case http.StatusNotFound:
		if strings.Contains(msg, "404 page not found") || strings.HasPrefix(msg, "no route ") {
			return fmt.Errorf("%s serves no fencing API: is a cluster configured on that replica?", addr)
		}
		return fmt.Errorf("not found: %s", msg)
	case http.StatusServiceUnavailable:
		if strings.Contains(msg, "leader") {
			return fmt.Errorf("no leader: the replica group has no leader to act now (check `fenced status` on each replica): %s", msg)
		}
		return fmt.Errorf("unavailable: %s", msg)
	case http.StatusConflict:
		if strings.HasPrefix(msg, "refused") {
			return errors.New(msg)
		}
		return fmt.Errorf("refused: %s", msg)
	case http.StatusBadRequest:
		return fmt.Errorf("bad request: %s", msg)
	}
	return fmt.Errorf("%s: %s", http.StatusText(ae.StatusCode), msg)
}
