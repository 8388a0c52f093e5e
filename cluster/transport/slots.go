package transport

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// handshakeSlots bounds the TLS handshakes under way. Connections from the
// address of a configured peer take slots of their own; every other source
// shares one pool, and no single source address may take more than
// perSource of it. A flood of connections that never finish their
// handshake, from one host or many, then cannot make a replica's
// connection wait, and one host cannot take the whole strangers' pool.
type handshakeSlots struct {
	max, perSource int

	mu       sync.Mutex
	peers    int
	strange  int
	bySource map[string]int
}

func newHandshakeSlots(max, perSource int) *handshakeSlots {
	return &handshakeSlots{max: max, perSource: perSource, bySource: map[string]int{}}
}

// acquire takes a slot for a connection from ip (a configured peer's
// address when peer) and returns its release, or why none is free.
func (h *handshakeSlots) acquire(ip string, peer bool) (func(), error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if peer {
		if h.peers >= h.max {
			return nil, fmt.Errorf("more than %d raft handshakes under way from configured peers' addresses", h.max)
		}
		h.peers++
		return sync.OnceFunc(func() {
			h.mu.Lock()
			h.peers--
			h.mu.Unlock()
		}), nil
	}
	if h.strange >= h.max {
		return nil, fmt.Errorf("more than %d raft handshakes under way", h.max)
	}
	if h.bySource[ip] >= h.perSource {
		return nil, fmt.Errorf("more than %d raft handshakes under way from %s", h.perSource, ip)
	}
	h.strange++
	h.bySource[ip]++
	return sync.OnceFunc(func() {
		h.mu.Lock()
		h.strange--
		if h.bySource[ip]--; h.bySource[ip] <= 0 {
			delete(h.bySource, ip)
		}
		h.mu.Unlock()
	}), nil
}

// remoteIP is the IP of a connection's remote address ("" when it has none).
func remoteIP(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return ""
	}
	if ip := net.ParseIP(host); ip != nil {
		return ip.String()
	}
	return host
}

// peerAddrs tells whether an IP is the address of a configured peer: the
// host of its Raft address when that is an IP, or what the host name
// resolves to (looked up in the background, at most once a minute, never
// in the accept loop). It only decides which pool of handshake slots a
// connection waits in: who a peer is, the certificate proves.
type peerAddrs struct {
	peers PeerSet

	mu       sync.Mutex
	resolved map[string]bool
	at       time.Time
	busy     atomic.Bool
}

// resolveEvery is how often peer host names are looked up again.
const resolveEvery = time.Minute

func newPeerAddrs(peers PeerSet) *peerAddrs {
	return &peerAddrs{peers: peers, resolved: map[string]bool{}}
}

func (p *peerAddrs) has(ip string) bool {
	if p.peers == nil || ip == "" {
		return false
	}
	names := false
	for _, peer := range p.peers() {
		host := addrHost(peer.Addr)
		if a := net.ParseIP(host); a != nil {
			if a.String() == ip {
				return true
			}
			continue
		}
		if host != "" {
			names = true
		}
	}
	if !names {
		return false
	}
	p.mu.Lock()
	known, stale := p.resolved[ip], time.Since(p.at) > resolveEvery
	p.mu.Unlock()
	if stale && p.busy.CompareAndSwap(false, true) {
		go p.resolve()
	}
	return known
}

// resolve looks the peers' host names up.
func (p *peerAddrs) resolve() {
	defer p.busy.Store(false)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	out := map[string]bool{}
	for _, peer := range p.peers() {
		host := addrHost(peer.Addr)
		if host == "" || net.ParseIP(host) != nil {
			continue
		}
		addrs, err := net.DefaultResolver.LookupIPAddr(ctx, host)
		if err != nil {
			continue
		}
		for _, a := range addrs {
			out[a.IP.String()] = true
		}
	}
	p.mu.Lock()
	p.resolved, p.at = out, time.Now()
	p.mu.Unlock()
}

// firstByteConn records whether the remote end sent anything; the accept
// side gives a silent connection only FirstByteTimeout (its read deadline
// until the handshake ends).
type firstByteConn struct {
	net.Conn
	spoke atomic.Bool
}

func (c *firstByteConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && !c.spoke.Swap(true) {
		// Past the first byte the handshake's own deadline applies.
		if derr := c.SetReadDeadline(time.Time{}); derr != nil && err == nil {
			err = derr
		}
	}
	return n, err
}
