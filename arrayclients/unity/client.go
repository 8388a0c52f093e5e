package unity

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"

	"github.com/dell/gounity"
	"github.com/dell/gounity/api"
	unitytypes "github.com/dell/gounity/apitypes"
	"github.com/sirupsen/logrus"

	"github.com/fenced-project/fenced/arrayclients"
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
	// raw is a client of gounity's api package, with its own session, for
	// the REST types gounity has no call for (hostLUN).
	raw       api.Client
	rawAuthed bool
}

type unityPool struct {
	cfg   arrayclients.Config
	conns chan *unityConn
	// log is the array's logger as gounity takes it (in the context).
	log *logrus.Entry
}

// newUnityPool builds every client up front: gounity writes a package
// variable when a client is built, so none may be built while others run.
func newUnityPool(cfg arrayclients.Config, logger *slog.Logger) (*unityPool, error) {
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
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	p := &unityPool{cfg: cfg, conns: make(chan *unityConn, unityPoolSize), log: arrayclients.UnityLogger(logger)}
	for range unityPoolSize {
		c, err := gounity.NewClientWithArgs(arrayclients.WithUnityLogger(context.Background(), p.log), cfg.Endpoint, cfg.Insecure)
		if err != nil {
			return nil, fmt.Errorf("build gounity client for %s: %w", cfg.Endpoint, err)
		}
		raw, err := api.New(arrayclients.WithUnityLogger(context.Background(), p.log), cfg.Endpoint, api.ClientOptions{Insecure: cfg.Insecure}, false)
		if err != nil {
			return nil, fmt.Errorf("build gounity REST client for %s: %w", cfg.Endpoint, err)
		}
		p.conns <- &unityConn{c: c, raw: raw}
	}
	return p, nil
}

// borrow runs fn with a connection of the pool, taken for fn alone.
func (p *unityPool) borrow(ctx context.Context, fn func(conn *unityConn) error) error {
	var conn *unityConn
	select {
	case conn = <-p.conns:
	case <-ctx.Done():
		return errors.Join(arrayclients.ErrUnreachable, fmt.Errorf("wait for a Unity session: %w", ctx.Err()))
	}
	defer func() { p.conns <- conn }()
	return fn(conn)
}

// with borrows a client, logs it in on first use, and runs fn with it.
func (p *unityPool) with(ctx context.Context, fn func(c gounity.UnityClient) error) error {
	return p.borrow(ctx, func(conn *unityConn) error { return p.withConn(ctx, conn, fn) })
}

func (p *unityPool) withConn(ctx context.Context, conn *unityConn, fn func(c gounity.UnityClient) error) error {
	if !conn.authed {
		rctx, cancel := arrayclients.WithRequestTimeout(arrayclients.WithUnityLogger(ctx, p.log), p.cfg.RequestTimeout)
		err := conn.c.Authenticate(rctx, p.connect())
		cancel()
		if err != nil {
			return errors.Join(arrayclients.ErrUnreachable, fmt.Errorf("log in to Unity %s: %w", p.cfg.Endpoint, err))
		}
		conn.authed = true
	}
	return fn(conn.c)
}

// get reads uri with the connection's api-package client into out, with
// the request timeout, logging in first and once more after a 401, as
// gounity does for its own calls (unityclient.go
// executeWithRetryAuthenticate). Only GETs: they need no CSRF token.
func (p *unityPool) get(ctx context.Context, uri string, out any) error {
	return p.borrow(ctx, func(conn *unityConn) error {
		rctx, cancel := arrayclients.WithRequestTimeout(ctx, p.cfg.RequestTimeout)
		defer cancel()
		headers := map[string]string{api.HeaderKeyAccept: api.HeaderValContentTypeJSON, api.XEmcRestClient: "true"}
		for attempt := 0; ; attempt++ {
			if !conn.rawAuthed {
				if err := p.rawLogin(rctx, conn.raw); err != nil {
					return err
				}
				conn.rawAuthed = true
			}
			err := conn.raw.DoWithHeaders(rctx, http.MethodGet, uri, headers, nil, out)
			var apiErr *unitytypes.Error
			if attempt == 0 && errors.As(err, &apiErr) && apiErr.ErrorContent.HTTPStatusCode == http.StatusUnauthorized {
				conn.rawAuthed = false
				continue
			}
			return classifyUnity(rctx, err)
		}
	})
}

// rawLogin opens a session for an api-package client as gounity's
// Authenticate does: GET loginSessionInfo with Basic auth; the client's
// cookie jar keeps the session cookie.
func (p *unityPool) rawLogin(ctx context.Context, c api.Client) error {
	c.SetToken("")
	resp, err := c.DoAndGetResponseBody(ctx, http.MethodGet, api.UnityAPILoginSessionInfoURI, map[string]string{
		api.AuthorizationHeader: "Basic " + base64.StdEncoding.EncodeToString([]byte(p.cfg.Username+":"+p.cfg.Password)),
		api.XEmcRestClient:      "true",
		api.HeaderKeyAccept:     api.HeaderValContentTypeJSON,
	}, nil)
	if err != nil {
		return errors.Join(arrayclients.ErrUnreachable, fmt.Errorf("log in to Unity %s: %w", p.cfg.Endpoint, err))
	}
	defer func() { _ = resp.Body.Close() }()
	switch {
	case resp.StatusCode == http.StatusUnauthorized:
		return errors.Join(arrayclients.ErrUnreachable, fmt.Errorf("log in to Unity %s: authentication failure", p.cfg.Endpoint))
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return errors.Join(arrayclients.ErrUnreachable, fmt.Errorf("log in to Unity %s: %w", p.cfg.Endpoint, c.ParseJSONError(ctx, resp)))
	}
	c.SetToken(resp.Header.Get(api.HeaderEMCCSRFToken))
	return nil
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
			return errors.Join(arrayclients.ErrUnreachable, err)
		}
		return err
	}
	msg := err.Error()
	if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) ||
		strings.Contains(msg, "Error while receiving response") || strings.Contains(msg, "authentication failure") ||
		strings.Contains(msg, "Unauthenticated") {
		return errors.Join(arrayclients.ErrUnreachable, err)
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
		rctx, cancel := arrayclients.WithRequestTimeout(arrayclients.WithUnityLogger(ctx, p.log), p.cfg.RequestTimeout)
		defer cancel()
		return classifyUnity(rctx, fn(rctx, c))
	})
}
