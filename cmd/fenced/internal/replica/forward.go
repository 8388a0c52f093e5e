package replica

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"time"

	"github.com/fenced-project/fenced/configs"
)

// forwardClient builds the client a follower forwards mutating API calls
// to the leader with, and sends its vantage reports with. It trusts the
// system roots plus the group's CA (replica.tls.caFile) and
// http.tls.clientCAFile, so a peer's HTTPS endpoint with a certificate from
// the group's CA verifies, and presents this replica's certificate
// (replica.tls) when the leader asks for one from a CA it is issued by.
//
// A forwarded call was already authorized on the follower. Only a call
// proven by the API token is forwarded, with the token: the leader
// verifies the token itself and, when it trusts the group's CA in
// http.tls.clientCAFile, learns from this replica's certificate which
// replica carried the call. A call proven by a client certificate is
// redirected to the leader instead (see routes), since no replica can
// present another's certificate.
func forwardClient(cfg *configs.Config, credDir string) (*http.Client, error) {
	pool, err := GroupCAPool(cfg, credDir)
	if err != nil {
		return nil, err
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}
	if cfg.Replica.TLS.CertFile != "" && cfg.Replica.TLS.KeyFile != "" {
		cert, err := configs.ResolveFile(cfg.Replica.TLS.CertFile, credDir)
		if err != nil {
			return nil, fmt.Errorf("replica.tls.certFile: %w", err)
		}
		key, err := configs.ResolveFile(cfg.Replica.TLS.KeyFile, credDir)
		if err != nil {
			return nil, fmt.Errorf("replica.tls.keyFile: %w", err)
		}
		pair, err := configs.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("load replica.tls certificate and key: %w", err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	rt := &http.Transport{TLSClientConfig: tc, ForceAttemptHTTP2: true, IdleConnTimeout: 90 * time.Second}
	return &http.Client{Transport: rt, Timeout: 30 * time.Second,
		// A forwarded call is answered by the leader; a redirect is
		// relayed to the caller, not followed with its credential.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}, nil
}

// GroupCAPool is the system roots plus the group's CA (replica.tls.caFile)
// and http.tls.clientCAFile: what a replica's HTTPS endpoint verifies with.
func GroupCAPool(cfg *configs.Config, credDir string) (*x509.CertPool, error) {
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	for _, f := range []struct{ field, ref string }{
		{"replica.tls.caFile", cfg.Replica.TLS.CAFile},
		{"http.tls.clientCAFile", cfg.HTTP.TLS.ClientCAFile},
	} {
		if f.ref == "" {
			continue
		}
		p, err := configs.ResolveFile(f.ref, credDir)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.field, err)
		}
		pem, err := configs.ReadFileLimited(p, configs.MaxPEMBytes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.field, err)
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s %s holds no PEM certificate", f.field, p)
		}
	}
	return pool, nil
}
