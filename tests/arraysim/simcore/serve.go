package simcore

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"time"
)

// Listener is a handler served on a loopback port.
type Listener struct {
	// URL is the base URL, e.g. "https://127.0.0.1:40123".
	URL string
	// CAFile is the PEM file of the generated certificate, "" for http.
	CAFile string
	// Close stops the server and closes open connections.
	Close func() error
}

// Serve serves h on addr ("127.0.0.1:0" for a free port), over plain HTTP
// or, with useTLS, HTTPS with a freshly generated self-signed certificate
// for 127.0.0.1, ::1 and localhost whose PEM is written into certDir
// (a new temporary directory when certDir is ""). Only loopback addresses
// are accepted. HTTP/2 is disabled so connection faults behave like the
// HTTP/1.1 arrays.
func Serve(h http.Handler, addr string, useTLS bool, certDir string) (*Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("serve on %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("serve on %q: not a loopback address", addr)
	}
	// Serve has no caller context: binding a loopback port does not block.
	var lc net.ListenConfig
	ln, err := lc.Listen(context.Background(), "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("serve on %q: %w", addr, err)
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		TLSNextProto:      map[string]func(*http.Server, *tls.Conn, http.Handler){},
	}
	l := &Listener{URL: "http://" + ln.Addr().String()}
	var removeDir string
	if useTLS {
		if certDir == "" {
			if certDir, err = os.MkdirTemp("", "arraysim-cert-"); err != nil {
				_ = ln.Close()
				return nil, fmt.Errorf("create certificate directory: %w", err)
			}
			removeDir = certDir
		}
		cert, caFile, err := selfSignedCert(certDir)
		if err != nil {
			_ = ln.Close()
			return nil, err
		}
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		ln = tls.NewListener(ln, srv.TLSConfig)
		l.URL = "https://" + ln.Addr().String()
		l.CAFile = caFile
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	l.Close = func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		err := srv.Shutdown(ctx)
		if err != nil {
			err = srv.Close()
		}
		<-done
		if removeDir != "" {
			_ = os.RemoveAll(removeDir)
		}
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		return err
	}
	return l, nil
}

// selfSignedCert makes a self-signed certificate (its own CA) for loopback
// names and writes its PEM into dir.
func selfSignedCert(dir string) (tls.Certificate, string, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, "", fmt.Errorf("generate key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return tls.Certificate{}, "", fmt.Errorf("generate serial: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "arraysim", Organization: []string{"fenced test arrays"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1"), net.IPv6loopback},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, "", fmt.Errorf("create certificate: %w", err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	f, err := os.CreateTemp(dir, "arraysim-ca-*.pem")
	if err != nil {
		return tls.Certificate{}, "", fmt.Errorf("write certificate: %w", err)
	}
	if _, err := f.Write(certPEM); err != nil {
		_ = f.Close()
		return tls.Certificate{}, "", fmt.Errorf("write certificate %s: %w", f.Name(), err)
	}
	if err := f.Close(); err != nil {
		return tls.Certificate{}, "", fmt.Errorf("write certificate %s: %w", f.Name(), err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: mustParse(der)}, f.Name(), nil
}

func mustParse(der []byte) *x509.Certificate {
	c, err := x509.ParseCertificate(der)
	if err != nil {
		return nil
	}
	return c
}
