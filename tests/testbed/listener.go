package testbed

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// ipLock reserves a node IP across processes for as long as it is held, so
// that test binaries running in parallel never hand out the same address,
// even while a killed node's kubelet port is closed.
type ipLock struct{ f *os.File }

// lockIP takes the machine-wide reservation of ip without waiting.
func lockIP(ip string) (*ipLock, error) {
	dir := filepath.Join(os.TempDir(), "testbed-node-ips")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, fmt.Errorf("create node IP lock directory: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, ip+".lock"), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, fmt.Errorf("open lock of node IP %s: %w", ip, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("reserve node IP %s: in use by another test bed: %w", ip, err)
	}
	return &ipLock{f: f}, nil
}

func (l *ipLock) release() {
	if l != nil && l.f != nil {
		_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
		_ = l.f.Close()
		l.f = nil
	}
}

// reserveIP reserves ip (or, when ip is empty, the first free address from
// from, or 127.0.10.1 when from is the zero Addr, upwards that is not in
// skip) and opens its kubelet listener.
func (cp *ControlPlane) reserveIP(ip string, from netip.Addr, skip func(string) bool) (*ipLock, *kubeletListener, string, error) {
	if ip != "" {
		lock, err := lockIP(ip)
		if err != nil {
			return nil, nil, "", err
		}
		kl, err := listenKubelet(ip, cp.pki.kubelet)
		if err != nil {
			lock.release()
			return nil, nil, "", err
		}
		return lock, kl, ip, nil
	}
	addr := netip.AddrFrom4([4]byte{127, 0, 10, 1})
	if from.Is4() && from.Compare(addr) > 0 {
		addr = from
	}
	for addr.As4()[1] == 0 {
		cand := addr.String()
		addr = addr.Next()
		if last := cand[len(cand)-4:]; last == ".255" || cand[len(cand)-2:] == ".0" || skip(cand) {
			continue
		}
		lock, err := lockIP(cand)
		if err != nil {
			continue
		}
		kl, err := listenKubelet(cand, cp.pki.kubelet)
		if err != nil {
			lock.release()
			continue
		}
		return lock, kl, cand, nil
	}
	return nil, nil, "", errors.New("allocate node IP: no free address in 127.0.10.0-127.0.255.255")
}

// kubeletListener is a TLS server on <node IP>:10250 standing in for the
// kubelet: /healthz answers "ok", everything else 401 like an
// unauthenticated request to a real kubelet.
type kubeletListener struct {
	addr string
	srv  *http.Server
}

func listenKubelet(ip string, cert tls.Certificate) (*kubeletListener, error) {
	addr := net.JoinHostPort(ip, strconv.Itoa(KubeletPort))
	l, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("open kubelet listener %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "Unauthorized", http.StatusUnauthorized) })
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ErrorLog:          log.New(io.Discard, "", 0), // probes that only connect cause handshake errors
	}
	go func() { _ = srv.ServeTLS(l, "", "") }()
	return &kubeletListener{addr: addr, srv: srv}, nil
}

// close closes the listener and every open connection: the port refuses
// connections from now on.
func (k *kubeletListener) close() {
	if k != nil {
		_ = k.srv.Close()
	}
}

// ProbeKubelet opens a TCP connection to addr (host:port) and closes it: nil
// means the port accepts connections.
func ProbeKubelet(ctx context.Context, addr string) error {
	d := net.Dialer{Timeout: 2 * time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("probe kubelet %s: %w", addr, err)
	}
	return c.Close()
}
