package powermax

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"
	"sync"

	pmax "github.com/dell/gopowermax/v2"
	pmaxtypes "github.com/dell/gopowermax/v2/types/v100"

	"github.com/fenced-project/fenced/arrayclients"
)

// powerMaxAppName is the Application-Type header Unisphere logs for us.
const powerMaxAppName = "fenced"

var (
	// pmaxHostIDRE is what Unisphere accepts as a host name (and what is
	// safe to put in a URL path unescaped, as gopowermax does).
	pmaxHostIDRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	// pmaxInitiatorRE is a bare IQN, NQN or WWN: it goes unescaped into a
	// query string (initiator_hba=) and a URL path.
	pmaxInitiatorRE = regexp.MustCompile(`^[A-Za-z0-9.:_-]{1,255}$`)
	pmaxSymIDRE     = regexp.MustCompile(`^[0-9]{12}$`)
)

// pmaxConn owns one gopowermax client. Authenticate mutates the client, so
// it runs once, under mu, before the client is shared; after that the
// client is only read and is safe for concurrent requests.
type pmaxConn struct {
	cfg    arrayclients.Config
	mu     sync.Mutex
	base   pmax.Pmax
	client pmax.Pmax // base after Authenticate, bound to the Symmetrix
}

func newPmaxConn(cfg arrayclients.Config) (*pmaxConn, error) {
	if err := pmaxCheckEndpoint(cfg.Endpoint); err != nil {
		return nil, err
	}
	if !pmaxSymIDRE.MatchString(cfg.SymmetrixID) {
		return nil, fmt.Errorf("symmetrixID %q: want the 12-digit Symmetrix ID", cfg.SymmetrixID)
	}
	useCerts := cfg.CAFile != ""
	c, err := pmax.NewClientWithArgs(cfg.Endpoint, powerMaxAppName, cfg.Insecure, useCerts, cfg.CAFile)
	if err != nil {
		return nil, fmt.Errorf("build gopowermax client for %s: %w", cfg.Endpoint, err)
	}
	// The client's own per-request deadline (10 minutes by default).
	if pc, ok := c.(*pmax.Client); ok {
		pc.SetContextTimeout(cfg.RequestTimeout)
	}
	return &pmaxConn{cfg: cfg, base: c}, nil
}

// get returns the authenticated client, authenticating on first use.
func (p *pmaxConn) get(ctx context.Context) (pmax.Pmax, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.client != nil {
		return p.client, nil
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.RequestTimeout)
	defer cancel()
	err := p.base.Authenticate(ctx, &pmax.ConfigConnect{
		Endpoint: p.cfg.Endpoint, Username: p.cfg.Username, Password: p.cfg.Password,
	})
	if err != nil {
		return nil, fmt.Errorf("authenticate to Unisphere %s: %w", p.cfg.Endpoint, classifyPmax(err))
	}
	p.client = p.base.WithSymmetrixID(p.cfg.SymmetrixID)
	return p.client, nil
}

// classifyPmax marks transport failures, timeouts and auth failures as
// ErrUnreachable, keeping the original error in the chain.
func classifyPmax(err error) error {
	if err == nil {
		return nil
	}
	if pmaxtypes.IsUnauthorizedError(err) || pmaxtypes.IsForbiddenError(err) || pmaxIsTransport(err) {
		return errors.Join(arrayclients.ErrUnreachable, err)
	}
	return err
}

// pmaxIsTransport reports network errors and deadlines: the array's state is
// unknown, not answered.
func pmaxIsTransport(err error) bool {
	var ne net.Error
	var ue *url.Error
	return errors.As(err, &ne) || errors.As(err, &ue) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

// pmaxCheckEndpoint validates an endpoint the way the Dell clients will use
// it. gopowermax and gounity both drop the first "/api" from the endpoint
// string, so a host name starting with "api" (https://api.example.com)
// would be mangled into https:/.example.com: refuse it with a clear error.
func pmaxCheckEndpoint(endpoint string) error {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return fmt.Errorf("endpoint %q: want https://host[:port]", endpoint)
	}
	if strings.HasPrefix(u.Host, "api") {
		return fmt.Errorf("endpoint %q: the Dell client strips the first \"/api\" from the URL, which breaks a host name starting with \"api\"; use the IP address or another name", endpoint)
	}
	if u.Path != "" && u.Path != "/" {
		return fmt.Errorf("endpoint %q: give scheme, host and port only", endpoint)
	}
	return nil
}

// getHost reads a host and checks the answer is the host asked for.
func (p *pmaxConn) getHost(ctx context.Context, hostID string) (*pmaxtypes.Host, error) {
	c, err := p.get(ctx)
	if err != nil {
		return nil, err
	}
	rctx, cancel := arrayclients.WithRequestTimeout(ctx, p.cfg.RequestTimeout)
	defer cancel()
	h, err := c.GetHostByID(rctx, p.cfg.SymmetrixID, hostID)
	if err != nil {
		return nil, classifyPmax(err)
	}
	if h == nil || h.HostID != hostID {
		return nil, fmt.Errorf("array answered for host %q, asked for %q", hostIDOf(h), hostID)
	}
	for _, in := range h.Initiators {
		if !pmaxInitiatorRE.MatchString(in) {
			return nil, fmt.Errorf("host %s lists initiator %q, which is not an IQN, NQN or WWN", hostID, in)
		}
	}
	return h, nil
}

func hostIDOf(h *pmaxtypes.Host) string {
	if h == nil {
		return ""
	}
	return h.HostID
}
