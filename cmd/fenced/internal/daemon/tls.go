package daemon

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"

	"github.com/fenced-project/fenced/configs"
)

// serverTLS builds the HTTP endpoint's TLS configuration, or nil for plain
// HTTP.
func serverTLS(t configs.ServerTLS, credDir string) (*tls.Config, error) {
	if !t.Enabled() {
		return nil, nil
	}
	cert, err := configs.ResolveFile(t.CertFile, credDir)
	if err != nil {
		return nil, fmt.Errorf("http.tls.certFile: %w", err)
	}
	key, err := configs.ResolveFile(t.KeyFile, credDir)
	if err != nil {
		return nil, fmt.Errorf("http.tls.keyFile: %w", err)
	}
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		return nil, fmt.Errorf("load http.tls certificate and key: %w", err)
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair}}
	if t.ClientCAFile != "" {
		p, err := configs.ResolveFile(t.ClientCAFile, credDir)
		if err != nil {
			return nil, fmt.Errorf("http.tls.clientCAFile: %w", err)
		}
		pem, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("read http.tls.clientCAFile: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("http.tls.clientCAFile %s holds no PEM certificate", p)
		}
		tc.ClientCAs = pool
		tc.ClientAuth = tls.VerifyClientCertIfGiven
	}
	return tc, nil
}

// readToken reads the API token file.
func readToken(ref, credDir string) (string, error) {
	p, err := configs.ResolveFile(ref, credDir)
	if err != nil {
		return "", fmt.Errorf("http.tokenFile: %w", err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return "", fmt.Errorf("read http.tokenFile: %w", err)
	}
	t := strings.TrimSpace(string(b))
	if t == "" {
		return "", fmt.Errorf("http.tokenFile %s is empty", p)
	}
	return t, nil
}
