package arrayclients

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/dell/gounity"
	unitytypes "github.com/dell/gounity/apitypes"
)

// unityPoolSize is how many gounity clients (login sessions) an adapter
// keeps. gounity re-authenticates inside a request on a 401 by rewriting the
// client's token without a lock, so a client is never shared between
// goroutines: each request borrows one from the pool.
const unityPoolSize = 8

var (
	// unityNameRE is a host name we put unescaped into
	// /api/instances/host/name:<name> (gounity does not escape it).
	unityNameRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,255}$`)
	// unityIDRE is a Unity object ID (Host_12, sv_42, HostInitiator_3).
	unityIDRE = regexp.MustCompile(`^[A-Za-z]+_[0-9]+$`)
)

type unityConn struct {
	c      gounity.UnityClient
	authed bool
}

type unityPool struct {
	cfg   Config
	conns chan *unityConn
}

// newUnityPool builds every client up front: gounity writes a package
// variable when a client is built, so none may be built while others run.
func newUnityPool(cfg Config) (*unityPool, error) {
	u, err := url.Parse(cfg.Endpoint)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return nil, fmt.Errorf("endpoint %q: want https://host[:port]", cfg.Endpoint)
	}
	if strings.HasPrefix(u.Host, "api") {
		return nil, fmt.Errorf("endpoint %q: gounity strips the first \"/api\" from the URL, which breaks a host name starting with \"api\"; use the IP address or another name", cfg.Endpoint)
	}
	if u.Path != "" && u.Path != "/" {
		return nil, fmt.Errorf("endpoint %q: give scheme, host and port only", cfg.Endpoint)
	}
	if u.Scheme == "https" && cfg.CAFile != "" && !cfg.Insecure {
		return nil, fmt.Errorf("caFile %q: gounity v1.24.0 only trusts the system certificate pool; add the CA there (or set insecure for a test array)", cfg.CAFile)
	}
	p := &unityPool{cfg: cfg, conns: make(chan *unityConn, unityPoolSize)}
	for range unityPoolSize {
		c, err := gounity.NewClientWithArgs(context.Background(), cfg.Endpoint, cfg.Insecure)
		if err != nil {
			return nil, fmt.Errorf("build gounity client for %s: %w", cfg.Endpoint, err)
		}
		p.conns <- &unityConn{c: c}
	}
	return p, nil
}

// with borrows a client, logs it in on first use, and runs fn with it.
func (p *unityPool) with(ctx context.Context, fn func(c gounity.UnityClient) error) error {
	var conn *unityConn
	select {
	case conn = <-p.conns:
	case <-ctx.Done():
		return errors.Join(ErrUnreachable, fmt.Errorf("wait for a Unity session: %w", ctx.Err()))
	}
	defer func() { p.conns <- conn }()
	if !conn.authed {
		rctx, cancel := pmaxTimeout(ctx, p.cfg.RequestTimeout)
		err := conn.c.Authenticate(rctx, p.connect())
		cancel()
		if err != nil {
			return errors.Join(ErrUnreachable, fmt.Errorf("log in to Unity %s: %w", p.cfg.Endpoint, err))
		}
		conn.authed = true
	}
	return fn(conn.c)
}

// connect is the client's login configuration. gounity keeps the last one
// it was given (BasicSystemInfo replaces it too) to log in again after a
// 401, so every call that takes one gets the full credentials.
func (p *unityPool) connect() *gounity.ConfigConnect {
	return &gounity.ConfigConnect{
		Endpoint: p.cfg.Endpoint, Username: p.cfg.Username, Password: p.cfg.Password, Insecure: p.cfg.Insecure,
	}
}

// classifyUnity marks transport failures, timeouts and auth failures as
// ErrUnreachable. gounity formats transport errors with %v, so they are
// recognised by their text.
func classifyUnity(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	var apiErr *unitytypes.Error
	if errors.As(err, &apiErr) {
		if apiErr.ErrorContent.HTTPStatusCode == 401 {
			return errors.Join(ErrUnreachable, err)
		}
		return err
	}
	msg := err.Error()
	if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) ||
		strings.Contains(msg, "Error while receiving response") || strings.Contains(msg, "authentication failure") ||
		strings.Contains(msg, "Unauthenticated") {
		return errors.Join(ErrUnreachable, err)
	}
	return err
}

// unityCode reports whether err carries the Unity error code (like
// "0x6701020"); gounity often flattens errors to text.
func unityCode(err error, code string) bool {
	return err != nil && strings.Contains(err.Error(), code)
}

// call runs one client request with the request timeout and classifies
// its error.
func (p *unityPool) call(ctx context.Context, fn func(ctx context.Context, c gounity.UnityClient) error) error {
	return p.with(ctx, func(c gounity.UnityClient) error {
		rctx, cancel := pmaxTimeout(ctx, p.cfg.RequestTimeout)
		defer cancel()
		return classifyUnity(rctx, fn(rctx, c))
	})
}
