package transport

import (
	"crypto/x509"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/cluster/clustertest"
)

type rejects struct {
	mu   sync.Mutex
	errs []error
}

func (r *rejects) add(_ string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, err)
}

func (r *rejects) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.errs)
}

func credsFrom(t *testing.T, ca *clustertest.CA, name string) *Credentials {
	leaf, err := ca.Issue(name, net.IPv4(127, 0, 0, 1))
	require.NoError(t, err)
	cert, err := leaf.TLSCertificate()
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return NewCredentials(cert, pool, "")
}

func listen(t *testing.T, creds *Credentials, rej *rejects) *StreamLayer {
	opts := Options{HandshakeTimeout: 2 * time.Second, AnyPeer: true}
	if rej != nil {
		opts.OnReject = rej.add
	}
	s, err := Listen("127.0.0.1:0", "", creds, opts)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// echo accepts one connection and echoes one line back.
func echo(s *StreamLayer) {
	go func() {
		c, err := s.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 5)
		if _, err := io.ReadFull(c, buf); err == nil {
			_, _ = c.Write(buf)
		}
	}()
}

func TestMutualTLS(t *testing.T) {
	ca, err := clustertest.NewCA("fenced test CA")
	require.NoError(t, err)
	other, err := clustertest.NewCA("another CA")
	require.NoError(t, err)

	rej := &rejects{}
	server := listen(t, credsFrom(t, ca, "r1"), rej)
	addr := server.ListenAddr().String()
	assert.Equal(t, addr, server.Addr().String())

	t.Run("peer with a certificate from the CA", func(t *testing.T) {
		echo(server)
		client := listen(t, credsFrom(t, ca, "r2"), nil)
		c, err := client.Dial(raft.ServerAddress("127.0.0.1:"+port(addr)), time.Second)
		require.NoError(t, err)
		defer c.Close()
		_, err = c.Write([]byte("hello"))
		require.NoError(t, err)
		buf := make([]byte, 5)
		_, err = io.ReadFull(c, buf)
		require.NoError(t, err)
		assert.Equal(t, "hello", string(buf))
	})

	t.Run("client certificate from another CA is refused", func(t *testing.T) {
		before := rej.count()
		rogue := listen(t, NewCredentials(mustCert(t, other, "r9"), poolOf(ca.Cert), ""), nil)
		c, err := rogue.Dial(raft.ServerAddress(addr), time.Second)
		if err == nil { // TLS 1.3: the server's refusal arrives on the first read
			defer c.Close()
			require.NoError(t, c.SetDeadline(time.Now().Add(2*time.Second)))
			_, _ = c.Write([]byte("hello")) // may already fail: the refusal is the point
			_, err = c.Read(make([]byte, 1))
		}
		require.Error(t, err)
		require.Eventually(t, func() bool { return rej.count() > before }, 5*time.Second, 10*time.Millisecond)
	})

	t.Run("server certificate from another CA is refused", func(t *testing.T) {
		rogue := listen(t, NewCredentials(mustCert(t, other, "r9"), poolOf(other.Cert), ""), nil)
		client := listen(t, credsFrom(t, ca, "r2"), nil)
		_, err := client.Dial(raft.ServerAddress(rogue.Addr().String()), time.Second)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "certificate signed by unknown authority")
	})

	t.Run("plain TCP is refused", func(t *testing.T) {
		before := rej.count()
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer c.Close()
		_, err = c.Write([]byte("this is not a TLS client hello at all\r\n"))
		require.NoError(t, err)
		require.Eventually(t, func() bool { return rej.count() > before }, 5*time.Second, 10*time.Millisecond)
	})

	t.Run("no client certificate is refused", func(t *testing.T) {
		before := rej.count()
		client := NewCredentials(mustCert(t, ca, "r3"), poolOf(ca.Cert), "")
		cfg := client.ClientConfig("127.0.0.1")
		cfg.Certificates = nil
		c, err := tlsDial(addr, cfg)
		if err == nil {
			defer c.Close()
			require.NoError(t, c.SetDeadline(time.Now().Add(2*time.Second)))
			_, err = c.Read(make([]byte, 1))
		}
		require.Error(t, err)
		require.Eventually(t, func() bool { return rej.count() > before }, 5*time.Second, 10*time.Millisecond)
	})

	t.Run("unspecified advertise address is refused", func(t *testing.T) {
		_, err := Listen("127.0.0.1:0", "0.0.0.0:7000", credsFrom(t, ca, "r1"), Options{AnyPeer: true})
		require.ErrorContains(t, err, "unspecified host")
	})
}
