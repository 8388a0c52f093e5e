package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// DialFunc opens a TCP connection. The default is a net.Dialer; tests put a
// fault-injecting proxy in between with their own.
type DialFunc func(ctx context.Context, network, address string) (net.Conn, error)

// Options tune a StreamLayer. The zero value is usable.
type Options struct {
	// HandshakeTimeout bounds the TLS handshake of an accepted connection
	// (default 5s). A dialed connection's handshake is bounded by the
	// timeout Raft passes to Dial.
	HandshakeTimeout time.Duration
	// Dial replaces the default dialer.
	Dial DialFunc
	// OnReject is called when an accepted connection is refused: its
	// handshake failed (no certificate, a certificate from another CA or
	// naming no configured peer, not TLS), too many handshakes were under
	// way, or a message claimed a replica its certificate does not name.
	OnReject func(remote string, err error)
	// Logger receives refusals, at most one line per RejectLogInterval
	// with the number left out since (default slog.Default()).
	Logger *slog.Logger
	// Peers is the configured replicas. Both ends of every connection
	// check the other's certificate against it (see NamedPeers): a dialed
	// replica must be named by its certificate, an accepted certificate
	// must name a configured replica, and every Raft request on an
	// accepted connection must claim a replica its certificate names.
	// Required unless AnyPeer is set.
	Peers PeerSet
	// AnyPeer accepts any certificate from the CA and passes the accepted
	// stream on unchecked. Only for tests and tools that are no replica.
	AnyPeer bool
	// MaxHandshakes bounds the TLS handshakes under way at once from
	// addresses that are not a configured peer's (default 32); a
	// connection beyond it is closed at once. Connections from the address
	// of a configured peer have MaxHandshakes slots of their own, so
	// strangers can never make a replica wait (a flood from elsewhere
	// does not stall elections or replication).
	MaxHandshakes int
	// MaxHandshakesPerSource bounds the handshakes under way from one
	// remote IP address that is not a configured peer's (default 4), so
	// one host cannot take every slot of the strangers' pool.
	MaxHandshakesPerSource int
	// FirstByteTimeout is how long an accepted connection may stay silent
	// before its first byte (default 1s): a connection that sends nothing
	// gives its slot back quickly instead of holding it for the whole
	// HandshakeTimeout.
	FirstByteTimeout time.Duration
	// RejectLogInterval is the least time between two logged refusals
	// (default 10s).
	RejectLogInterval time.Duration
	// VoteGate, when set, is told the leader's commit index of every
	// AppendEntries request and asked before a vote or pre-vote request is
	// passed to Raft; a request it withholds closes its connection, so the
	// candidate counts no vote from this replica. A replica that rejoined
	// without state withholds its vote until it has caught up.
	VoteGate VoteGate
}

// VoteGate decides whether this replica may vote now (see Options).
type VoteGate interface {
	// MayVote reports whether a vote request may reach Raft.
	MayVote() bool
	// LeaderCommit is told the commit index an AppendEntries request
	// carries.
	LeaderCommit(index uint64)
}

// StreamLayer is a raft.StreamLayer over mutual TLS.
type StreamLayer struct {
	ln        net.Listener
	advertise net.Addr
	creds     *Credentials
	opts      Options

	conns     chan net.Conn
	slots     *handshakeSlots
	peerIPs   *peerAddrs
	rejectLog *logLimiter
	voteLog   *logLimiter
	closeOnce sync.Once
	closed    chan struct{}
	wg        sync.WaitGroup
}

var _ raft.StreamLayer = (*StreamLayer)(nil)

type tcpAddr string

func (a tcpAddr) Network() string { return "tcp" }
func (a tcpAddr) String() string  { return string(a) }

// Listen listens on bind and advertises advertise to peers (bind when
// empty; it must then name a specific host).
func Listen(bind, advertise string, creds *Credentials, opts Options) (*StreamLayer, error) {
	if opts.HandshakeTimeout <= 0 {
		opts.HandshakeTimeout = 5 * time.Second
	}
	if opts.Dial == nil {
		opts.Dial = (&net.Dialer{}).DialContext
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.MaxHandshakes <= 0 {
		opts.MaxHandshakes = 32
	}
	if opts.MaxHandshakesPerSource <= 0 {
		opts.MaxHandshakesPerSource = min(4, opts.MaxHandshakes)
	}
	if opts.FirstByteTimeout <= 0 {
		opts.FirstByteTimeout = time.Second
	}
	if opts.FirstByteTimeout > opts.HandshakeTimeout {
		opts.FirstByteTimeout = opts.HandshakeTimeout
	}
	if opts.RejectLogInterval <= 0 {
		opts.RejectLogInterval = 10 * time.Second
	}
	if opts.Peers == nil && !opts.AnyPeer {
		return nil, fmt.Errorf("raft transport on %s: no peer set to check certificates against", bind)
	}
	ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", bind)
	if err != nil {
		return nil, fmt.Errorf("listen for raft on %s: %w", bind, err)
	}
	if advertise == "" {
		advertise = ln.Addr().String()
	}
	if host, _, err := net.SplitHostPort(advertise); err != nil {
		ln.Close()
		return nil, fmt.Errorf("raft advertise address %q: %w", advertise, err)
	} else if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		ln.Close()
		return nil, fmt.Errorf("raft advertise address %q: peers cannot dial an unspecified host", advertise)
	}
	s := &StreamLayer{
		ln: ln, advertise: tcpAddr(advertise), creds: creds, opts: opts,
		conns: make(chan net.Conn), closed: make(chan struct{}),
		slots:     newHandshakeSlots(opts.MaxHandshakes, opts.MaxHandshakesPerSource),
		peerIPs:   newPeerAddrs(opts.Peers),
		rejectLog: &logLimiter{every: opts.RejectLogInterval},
		voteLog:   &logLimiter{every: opts.RejectLogInterval},
	}
	s.wg.Add(1)
	go s.acceptLoop()
	return s, nil
}

// acceptLoop accepts TCP connections and hands each to a handshake
// goroutine, so a slow or hostile client cannot hold up the others.
func (s *StreamLayer) acceptLoop() {
	defer s.wg.Done()
	var delay time.Duration
	for {
		raw, err := s.ln.Accept()
		if err != nil {
			select {
			case <-s.closed:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			s.opts.Logger.Warn("raft accept failed", "error", err, "retryIn", delay)
			select {
			case <-time.After(delay):
			case <-s.closed:
				return
			}
			continue
		}
		delay = 0
		ip := remoteIP(raw.RemoteAddr())
		release, err := s.slots.acquire(ip, s.peerIPs.has(ip))
		if err != nil {
			s.reject(raw.RemoteAddr().String(), err)
			raw.Close()
			continue
		}
		s.wg.Add(1)
		go s.handshake(raw, release)
	}
}

// withheld logs, rate-limited, a vote request this replica did not answer.
func (s *StreamLayer) withheld(remote string) {
	if ok, left := s.voteLog.allow(time.Now()); ok {
		s.opts.Logger.Info("raft vote withheld: this replica rejoined without state and has not caught up with a leader yet",
			"remote", remote, "withheldNotLogged", left)
	}
}

// reject counts a refused connection and logs it, rate-limited.
func (s *StreamLayer) reject(remote string, err error) {
	if ok, left := s.rejectLog.allow(time.Now()); ok {
		s.opts.Logger.Warn("raft peer refused", "remote", remote, "error", err, "refusalsNotLogged", left)
	}
	if s.opts.OnReject != nil {
		s.opts.OnReject(remote, err)
	}
}

func (s *StreamLayer) serverConfig() *tls.Config {
	cfg := s.creds.ServerConfig()
	if !s.opts.AnyPeer {
		cfg.VerifyConnection = verifyAnyPeer(s.opts.Peers)
	}
	return cfg
}

func (s *StreamLayer) handshake(raw net.Conn, release func()) {
	defer s.wg.Done()
	defer release()
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.HandshakeTimeout)
	defer cancel()
	go func() { // abort the handshake when the layer closes
		select {
		case <-s.closed:
			cancel()
		case <-ctx.Done():
		}
	}()
	fb := &firstByteConn{Conn: raw}
	if err := raw.SetReadDeadline(time.Now().Add(s.opts.FirstByteTimeout)); err != nil {
		raw.Close()
		return
	}
	conn := tls.Server(fb, s.serverConfig())
	remote := raw.RemoteAddr().String()
	if err := conn.HandshakeContext(ctx); err != nil {
		if !fb.spoke.Load() {
			err = fmt.Errorf("nothing received within %s: %w", s.opts.FirstByteTimeout, err)
		}
		s.reject(remote, fmt.Errorf("TLS handshake failed: %w", err))
		raw.Close()
		return
	}
	if err := raw.SetReadDeadline(time.Time{}); err != nil {
		raw.Close()
		return
	}
	var accepted net.Conn = conn
	if !s.opts.AnyPeer {
		accepted = guard(conn, s.opts.Peers, s.opts.VoteGate, func(err error) {
			if errors.Is(err, errVoteWithheld) {
				s.withheld(remote)
				return
			}
			s.reject(remote, err)
		})
	}
	select {
	case s.conns <- accepted:
	case <-s.closed:
		accepted.Close()
	}
}

// Accept returns the next connection whose handshake succeeded.
func (s *StreamLayer) Accept() (net.Conn, error) {
	select {
	case c := <-s.conns:
		return c, nil
	case <-s.closed:
		return nil, net.ErrClosed
	}
}

// Close stops listening and waits for pending handshakes to end.
func (s *StreamLayer) Close() error {
	var err error
	s.closeOnce.Do(func() {
		close(s.closed)
		err = s.ln.Close()
		s.wg.Wait()
	})
	return err
}

// Addr is the advertised address.
func (s *StreamLayer) Addr() net.Addr { return s.advertise }

// ListenAddr is the address actually listened on (useful with port 0).
func (s *StreamLayer) ListenAddr() net.Addr { return s.ln.Addr() }

// Dial opens a mutual-TLS connection to a peer.
func (s *StreamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return s.DialContext(ctx, string(address))
}

// DialContext opens a mutual-TLS connection to address.
func (s *StreamLayer) DialContext(ctx context.Context, address string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("dial raft peer %q: %w", address, err)
	}
	raw, err := s.opts.Dial(ctx, "tcp", address)
	if err != nil {
		return nil, fmt.Errorf("dial raft peer %s: %w", address, err)
	}
	cfg := s.creds.ClientConfig(host)
	if !s.opts.AnyPeer {
		cfg.VerifyConnection = verifyPeerAt(s.opts.Peers, address)
	}
	conn := tls.Client(raw, cfg)
	if err := conn.HandshakeContext(ctx); err != nil {
		raw.Close()
		return nil, fmt.Errorf("TLS handshake with raft peer %s: %w", address, err)
	}
	return conn, nil
}

// logLimiter lets one event through per interval and counts the rest.
type logLimiter struct {
	every time.Duration
	mu    sync.Mutex
	last  time.Time
	held  int
}

// allow reports whether to log now, and how many events were held back
// since the last one logged.
func (l *logLimiter) allow(now time.Time) (bool, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.last.IsZero() && now.Sub(l.last) < l.every {
		l.held++
		return false, 0
	}
	held := l.held
	l.last, l.held = now, 0
	return true, held
}
