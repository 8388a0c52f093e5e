package transport

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/cluster/clustertest"
)

// syncBuffer is a bytes.Buffer safe for a logger and a test to share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestHandshakesAreBounded holds more connections than MaxHandshakes open
// without ever finishing a TLS handshake (what a hostile client does): the
// ones beyond the bound are closed at once, the refusals are logged once
// for the whole burst with the count of those left out, and once the
// stalled handshakes are gone a replica connects again.
func TestHandshakesAreBounded(t *testing.T) {
	ca, err := clustertest.NewCA("fenced test CA")
	require.NoError(t, err)
	logs := &syncBuffer{}
	rej := &rejects{}
	const limit, stalled = 4, 40
	server, err := Listen("127.0.0.1:0", "", credsFrom(t, ca, "r1"), Options{
		HandshakeTimeout:  time.Minute, // the stalled ones hold their slot until closed
		FirstByteTimeout:  time.Minute, // here, however silent they are
		AnyPeer:           true,
		MaxHandshakes:     limit,
		RejectLogInterval: time.Hour,
		OnReject:          rej.add,
		Logger:            slog.New(slog.NewTextHandler(logs, nil)),
	})
	require.NoError(t, err)
	t.Cleanup(func() { server.Close() })
	addr := server.ListenAddr().String()

	var held []net.Conn
	t.Cleanup(func() {
		for _, c := range held {
			c.Close()
		}
	})
	for range stalled {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		held = append(held, c)
	}
	// Every connection beyond the bound is refused and closed by the
	// server: a read sees the end of the stream, not a timeout.
	require.Eventually(t, func() bool { return rej.count() >= stalled-limit }, 10*time.Second, 10*time.Millisecond,
		"refusals: %d", rej.count())
	closed := 0
	for _, c := range held {
		require.NoError(t, c.SetReadDeadline(time.Now().Add(200*time.Millisecond)))
		if _, err := c.Read(make([]byte, 1)); errors.Is(err, io.EOF) {
			closed++
		}
	}
	assert.Equal(t, stalled-limit, closed, "connections beyond the bound are closed at once")
	rej.mu.Lock()
	errs := append([]error(nil), rej.errs...)
	rej.mu.Unlock()
	for _, err := range errs {
		require.ErrorContains(t, err, "more than 4 raft handshakes under way")
	}
	assert.Equal(t, 1, strings.Count(logs.String(), "raft peer refused"),
		"one log line for the burst, not one per refusal:\n%s", logs)

	// The stalled handshakes go away; a replica gets through again.
	for _, c := range held {
		c.Close()
	}
	echo(server)
	client := listen(t, credsFrom(t, ca, "r2"), nil)
	require.Eventually(t, func() bool {
		c, err := client.Dial(raft.ServerAddress(addr), time.Second)
		if err != nil {
			return false
		}
		defer c.Close()
		if _, err := c.Write([]byte("hello")); err != nil {
			return false
		}
		buf := make([]byte, 5)
		_, err = io.ReadFull(c, buf)
		return err == nil && string(buf) == "hello"
	}, 10*time.Second, 50*time.Millisecond, "a replica cannot connect once the stalled handshakes are gone")
}

// TestRefusalLogCountsWhatItLeftOut: after the interval the next refusal
// is logged with how many were not.
func TestRefusalLogCountsWhatItLeftOut(t *testing.T) {
	l := &logLimiter{every: time.Minute}
	t0 := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	ok, left := l.allow(t0)
	assert.True(t, ok)
	assert.Zero(t, left)
	for i := range 99 {
		ok, _ = l.allow(t0.Add(time.Duration(i) * 100 * time.Millisecond))
		assert.False(t, ok)
	}
	ok, left = l.allow(t0.Add(time.Minute))
	assert.True(t, ok)
	assert.Equal(t, 99, left)
	ok, left = l.allow(t0.Add(2*time.Minute + time.Second))
	assert.True(t, ok)
	assert.Zero(t, left)
}

// flood dials n connections to addr from the local address from and keeps
// them open, sending nothing: an unauthenticated handshake flood from one
// host. It returns the connections.
func flood(t *testing.T, from, addr string, n int) []net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: time.Second}
	var out []net.Conn
	for range n {
		c, err := d.Dial("tcp", addr)
		if err != nil {
			continue
		}
		out = append(out, c)
	}
	t.Cleanup(func() {
		for _, c := range out {
			c.Close()
		}
	})
	return out
}

// TestFloodFromOneSourceLeavesPeersRoom: a host that is no peer opens far
// more connections than there are handshake slots and sends nothing. It
// gets at most MaxHandshakesPerSource slots, each for FirstByteTimeout;
// a configured peer connects at once throughout, from its own pool.
func TestFloodFromOneSourceLeavesPeersRoom(t *testing.T) {
	ca, err := clustertest.NewCA("fenced test CA")
	require.NoError(t, err)
	rej := &rejects{}
	peerAddr := "127.0.0.1:1" // r2's Raft address: its host is what matters here
	server, err := Listen("127.0.0.1:0", "", credsFrom(t, ca, "r1"), Options{
		HandshakeTimeout: time.Minute,
		FirstByteTimeout: 300 * time.Millisecond,
		MaxHandshakes:    8,
		Peers:            func() []Peer { return []Peer{{ID: "r1", Addr: "127.0.0.1:2"}, {ID: "r2", Addr: peerAddr}} },
		OnReject:         rej.add,
		Logger:           slog.New(slog.DiscardHandler),
	})
	require.NoError(t, err)
	t.Cleanup(func() { server.Close() })
	addr := server.ListenAddr().String()

	held := flood(t, "127.0.0.9", addr, 60)
	require.Len(t, held, 60)
	require.Eventually(t, func() bool { return rej.count() >= 60-4 }, 10*time.Second, 5*time.Millisecond,
		"refusals beyond the source's 4 slots: %d", rej.count())

	// A peer completes its handshake while the flood holds its slots.
	go func() {
		if c, err := server.Accept(); err == nil {
			c.Close()
		}
	}()
	client := listen(t, credsFrom(t, ca, "r2"), nil)
	c, err := client.Dial(raft.ServerAddress(addr), time.Second)
	require.NoError(t, err, "a configured peer waits behind a stranger's flood")
	c.Close()

	// The silent connections that got a slot lose it after FirstByteTimeout.
	require.Eventually(t, func() bool {
		rej.mu.Lock()
		defer rej.mu.Unlock()
		n := 0
		for _, err := range rej.errs {
			if strings.Contains(err.Error(), "nothing received within 300ms") {
				n++
			}
		}
		return n == 4
	}, 10*time.Second, 10*time.Millisecond, "the 4 silent connections with a slot are dropped at the first-byte deadline")
	rej.mu.Lock()
	for _, err := range rej.errs {
		if !strings.Contains(err.Error(), "nothing received") {
			require.ErrorContains(t, err, "more than 4 raft handshakes under way from 127.0.0.9")
		}
	}
	rej.mu.Unlock()
}

func TestHandshakeSlotsPools(t *testing.T) {
	h := newHandshakeSlots(3, 2)
	var rel []func()
	take := func(ip string, peer bool) error {
		r, err := h.acquire(ip, peer)
		if err == nil {
			rel = append(rel, r)
		}
		return err
	}
	require.NoError(t, take("10.0.0.9", false))
	require.NoError(t, take("10.0.0.9", false))
	require.ErrorContains(t, take("10.0.0.9", false), "more than 2 raft handshakes under way from 10.0.0.9")
	require.NoError(t, take("10.0.0.8", false))
	require.ErrorContains(t, take("10.0.0.7", false), "more than 3 raft handshakes under way")
	for range 3 {
		require.NoError(t, take("10.0.0.1", true), "peers have their own pool")
	}
	require.ErrorContains(t, take("10.0.0.1", true), "from configured peers' addresses")
	for _, r := range rel {
		r()
		r() // a second release changes nothing
	}
	require.NoError(t, take("10.0.0.7", false))
	h.mu.Lock()
	assert.Equal(t, 1, h.strange)
	assert.Equal(t, 0, h.peers)
	assert.Equal(t, map[string]int{"10.0.0.7": 1}, h.bySource)
	h.mu.Unlock()
}
