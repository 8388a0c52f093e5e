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
