package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/fenced-project/fenced/cluster/ledger"
)

// Headers used when forwarding.
const (
	// HeaderForwardHops counts how often a request was forwarded; a request
	// is forwarded at most twice (a leader change in between), never in a
	// loop.
	HeaderForwardHops = "Fenced-Forward-Hops"
	// HeaderForwardedBy names the replica that forwarded the request.
	HeaderForwardedBy = "Fenced-Forwarded-By"
	// HeaderServedBy names the replica whose handler answered.
	HeaderServedBy = "Fenced-Served-By"
)

const (
	maxForwardHops  = 2
	maxForwardBody  = 1 << 20
	forwardPollTick = 50 * time.Millisecond
)

// ForwardOptions configure ForwardingHandler.
type ForwardOptions struct {
	// Client sends forwarded requests. Give it the CA (and client
	// certificate) needed for the peers' HTTPS endpoints. Default: a client
	// with the default transport.
	Client *http.Client
	// Wait is how long to wait for a leader before answering 503 (default
	// Timings.ForwardWait).
	Wait time.Duration
	// Redirect, when set and true for a request, answers it on a follower
	// with a 307 redirect to the same path on the leader's HTTPS address
	// instead of forwarding it: for a caller proven by its TLS client
	// certificate, which only the caller can present to the leader. A
	// leader without an https:// address gets 502 insecure_forward.
	Redirect func(*http.Request) bool
}

// ForwardingHandler wraps the handler of mutating calls. On the leader (once
// its leadership is established) it calls next. On a follower it forwards the
// request to the leader's HTTP address, unchanged but for the forwarding
// headers, and relays the answer. When no leader is known within the wait, or
// the leader cannot be reached until then, it answers 503 with an ErrorBody
// whose code is "no_leader". Authentication should be done by next on the
// leader: the original headers (e.g. Authorization) travel with the request.
func (n *Node) ForwardingHandler(next http.Handler, opts ForwardOptions) http.Handler {
	if opts.Client == nil {
		opts.Client = &http.Client{}
	}
	if opts.Wait <= 0 {
		opts.Wait = n.cfg.Timings.ForwardWait
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.forward(w, r, next, opts)
	})
}

func (n *Node) forward(w http.ResponseWriter, r *http.Request, next http.Handler, opts ForwardOptions) {
	ctx, cancel := context.WithTimeout(r.Context(), opts.Wait)
	defer cancel()
	hops, _ := strconv.Atoi(r.Header.Get(HeaderForwardHops))
	var body []byte
	var lastErr error
	for {
		l, changed := n.Leadership()
		if l.Leader {
			if body != nil {
				r.Body = io.NopCloser(bytes.NewReader(body))
			}
			w.Header().Set(HeaderServedBy, n.cfg.ID)
			next.ServeHTTP(w, r)
			return
		}
		li, ok := n.Leader()
		known := ok && li.ID != n.cfg.ID && li.HTTPAddr != ""
		if known && opts.Redirect != nil && opts.Redirect(r) {
			n.redirect(w, r, li)
			return
		}
		if known && hops < maxForwardHops {
			if body == nil {
				var err error
				if body, err = io.ReadAll(io.LimitReader(r.Body, maxForwardBody+1)); err != nil {
					WriteError(w, fmt.Errorf("%w: read request body: %w", ledger.ErrInvalid, err))
					return
				}
				if len(body) > maxForwardBody {
					WriteError(w, fmt.Errorf("%w: over %d bytes", ErrTooLarge, maxForwardBody))
					return
				}
			}
			resp, err := n.send(ctx, r, body, hops, li, opts.Client)
			if err == nil {
				relay(w, resp, li.ID)
				return
			}
			if errors.Is(err, ErrPlainHTTPCredential) {
				// A configuration error, not a passing fault: say so once
				// per call, loudly, and do not retry.
				n.log.Error("not forwarding a call with credentials to the leader over plain HTTP; give the replicas https:// HTTP addresses (http.tls)",
					"leader", li.ID, "leaderHTTP", li.HTTPAddr, "error", err)
				WriteError(w, err)
				return
			}
			lastErr = err
			n.log.Warn("forwarding to the leader failed; retrying", "leader", li.ID, "error", err)
		}
		select {
		case <-ctx.Done():
			err := fmt.Errorf("%w within %s", ErrNoLeader, opts.Wait)
			if lastErr != nil {
				err = fmt.Errorf("%w within %s (last attempt: %w)", ErrNoLeader, opts.Wait, lastErr)
			}
			WriteError(w, err)
			return
		case <-changed:
		case <-time.After(forwardPollTick):
		}
	}
}

// redirect answers 307 to the same call on the leader's HTTPS address. A
// 307 keeps the method and the body; the caller's client presents its
// certificate to the leader itself.
func (n *Node) redirect(w http.ResponseWriter, r *http.Request, li LeaderInfo) {
	base, err := httpBase(li.HTTPAddr)
	if err != nil {
		WriteError(w, fmt.Errorf("leader %s HTTP address: %w", li.ID, err))
		return
	}
	if base.Scheme != "https" {
		WriteError(w, fmt.Errorf("%w: a call proven by a client certificate is redirected to the leader %s, whose HTTP address %s is not https://",
			ErrPlainHTTPCredential, li.ID, li.HTTPAddr))
		return
	}
	u := *base
	u.Path = strings.TrimSuffix(base.Path, "/") + r.URL.Path
	u.RawQuery = r.URL.RawQuery
	w.Header().Set("Location", u.String())
	w.Header().Set(HeaderForwardedBy, n.cfg.ID)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusTemporaryRedirect)
	_ = json.NewEncoder(w).Encode(ErrorBody{Code: "redirect", // the client went away
		Error: fmt.Sprintf("replica %s is not the leader: call the leader %s at %s (a client certificate is presented to the leader itself)", n.cfg.ID, li.ID, u.String())})
}

// hopHeaders are not forwarded (RFC 9110 section 7.6.1).
var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Proxy-Connection",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func (n *Node) send(ctx context.Context, r *http.Request, body []byte, hops int, li LeaderInfo, client *http.Client) (*http.Response, error) {
	base, err := httpBase(li.HTTPAddr)
	if err != nil {
		return nil, fmt.Errorf("leader %s HTTP address: %w", li.ID, err)
	}
	if credentialed(r.Header) {
		if err := CredentialTransportAllowed(base); err != nil {
			return nil, fmt.Errorf("forward %s %s to leader %s: %w", r.Method, r.URL.Path, li.ID, err)
		}
	}
	u := *base
	u.Path = strings.TrimSuffix(base.Path, "/") + r.URL.Path
	u.RawQuery = r.URL.RawQuery
	req, err := http.NewRequestWithContext(ctx, r.Method, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("build forwarded request: %w", err)
	}
	req.Header = r.Header.Clone()
	for _, h := range hopHeaders {
		req.Header.Del(h)
	}
	req.Header.Set(HeaderForwardHops, strconv.Itoa(hops+1))
	req.Header.Set(HeaderForwardedBy, n.cfg.ID)
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		if prior := r.Header.Get("X-Forwarded-For"); prior != "" {
			host = prior + ", " + host
		}
		req.Header.Set("X-Forwarded-For", host)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("forward %s %s to leader %s: %w", r.Method, r.URL.Path, li.ID, err)
	}
	if resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get(HeaderServedBy) == "" {
		// The "leader" was not leader any more and could not forward either.
		resp.Body.Close()
		return nil, fmt.Errorf("leader %s answered 503", li.ID)
	}
	return resp, nil
}

// credentialed reports whether h carries a credential: an Authorization
// header or a cookie.
func credentialed(h http.Header) bool {
	return h.Get("Authorization") != "" || h.Get("Cookie") != ""
}

// CredentialTransportAllowed says whether a credential (the API token, a
// cookie) may be sent to u: over HTTPS, or over plain HTTP to a loopback
// address or "localhost" only, where it never leaves the host. Otherwise
// it returns ErrPlainHTTPCredential naming the host.
func CredentialTransportAllowed(u *url.URL) error {
	if u.Scheme == "https" {
		return nil
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); (ip != nil && ip.IsLoopback()) || host == "localhost" {
		return nil
	}
	return fmt.Errorf("%w to %s: use https:// (http.tls) for replicas on other hosts", ErrPlainHTTPCredential, u.Host)
}

func relay(w http.ResponseWriter, resp *http.Response, leader string) {
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	for _, h := range hopHeaders {
		w.Header().Del(h)
	}
	w.Header().Set(HeaderForwardedBy, leader)
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body) // the client sees a short body if the leader fails mid-way
}

// ErrorBody is the JSON body of an error answer.
type ErrorBody struct {
	Error string `json:"error"`
	// Code is a stable machine-readable code: redirect (307 to the
	// leader, for a caller proven by a client certificate), no_leader, not_leader,
	// conflict, stale_term, bad_step, paused, not_found, invalid, timeout,
	// too_large, insecure_forward (502: the leader is plain HTTP on another
	// host and the call carries a credential), internal.
	Code string `json:"code"`
}

// WriteError answers with the status and code for err: 503 for no or lost
// leadership and timeouts, 413 for bodies over the limit, 502 for a
// credential that would have crossed plain HTTP, 409 for ledger conflicts, stale terms, refused
// steps and pauses, 404 for unknown fences or nodes, 400 for invalid
// commands, 500 otherwise.
func WriteError(w http.ResponseWriter, err error) {
	status, code := http.StatusInternalServerError, "internal"
	for _, m := range []struct {
		err    error
		status int
		code   string
	}{
		{ErrNoLeader, http.StatusServiceUnavailable, "no_leader"},
		{ErrTooLarge, http.StatusRequestEntityTooLarge, "too_large"},
		{ErrPlainHTTPCredential, http.StatusBadGateway, "insecure_forward"},
		{ErrNotLeader, http.StatusServiceUnavailable, "not_leader"},
		{ErrTimeout, http.StatusServiceUnavailable, "timeout"},
		{ErrShutdown, http.StatusServiceUnavailable, "not_leader"},
		{context.DeadlineExceeded, http.StatusServiceUnavailable, "timeout"},
		{ledger.ErrConflict, http.StatusConflict, "conflict"},
		{ledger.ErrStaleTerm, http.StatusConflict, "stale_term"},
		{ledger.ErrBadTransition, http.StatusConflict, "bad_step"},
		{ledger.ErrPaused, http.StatusConflict, "paused"},
		{ledger.ErrNotFound, http.StatusNotFound, "not_found"},
		{ledger.ErrInvalid, http.StatusBadRequest, "invalid"},
		{ledger.ErrUnsupportedVersion, http.StatusBadRequest, "invalid"},
	} {
		if errors.Is(err, m.err) {
			status, code = m.status, m.code
			break
		}
	}
	w.Header().Set("Content-Type", "application/json")
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(ErrorBody{Error: err.Error(), Code: code}) // the client went away
}
