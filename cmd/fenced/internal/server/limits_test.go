package server

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// serveWithLimits serves s on a loopback listener until the test ends.
func serveWithLimits(t *testing.T, s *Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln, nil, time.Second) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	return ln.Addr().String()
}

// TestRequestLimits checks the server bounds what a client can make it
// read: header size, body size, and time to send the request.
func TestRequestLimits(t *testing.T) {
	s := New(Options{MaxBodyBytes: 1024, MaxHeaderBytes: 4096, ReadHeaderTimeout: 200 * time.Millisecond, ReadTimeout: time.Second})
	s.Handle("POST /v1/echo", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
			return
		}
		_, _ = w.Write(b)
	}))
	addr := serveWithLimits(t, s)
	base := "http://" + addr

	t.Run("headers", func(t *testing.T) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/healthz", nil)
		require.NoError(t, err)
		req.Header.Set("X-Padding", strings.Repeat("a", 64<<10))
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		assert.Equal(t, http.StatusRequestHeaderFieldsTooLarge, resp.StatusCode)
	})

	t.Run("body", func(t *testing.T) {
		post := func(n int) int {
			resp, err := http.Post(base+"/v1/echo", "text/plain", strings.NewReader(strings.Repeat("b", n)))
			require.NoError(t, err)
			_ = resp.Body.Close()
			return resp.StatusCode
		}
		assert.Equal(t, http.StatusOK, post(1000))
		assert.Equal(t, http.StatusRequestEntityTooLarge, post(4096))
	})

	t.Run("slow client", func(t *testing.T) {
		conn, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer conn.Close()
		// Half a request line, then silence: the server must hang up.
		_, err = conn.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\n"))
		require.NoError(t, err)
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
		_, err = io.ReadAll(bufio.NewReader(conn))
		var ne net.Error
		if errors.As(err, &ne) {
			require.False(t, ne.Timeout(), "the server kept a silent client's connection open")
		}
	})
}
