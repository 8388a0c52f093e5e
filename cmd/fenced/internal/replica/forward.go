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
// to the leader with. It trusts the system roots plus the group's CA
// (replica.tls.caFile) and http.tls.clientCAFile, so a peer's HTTPS
// endpoint with a certificate from the group's CA verifies.
//
// A forwarded call was already authorized on the follower (see
// authorizedForward). A call that carries the API token is forwarded with
// it and nothing else, so the leader records the operator the token names.
// A call authorized by a client certificate cannot pass that certificate
// on: it is forwarded with this replica's certificate (replica.tls, which
// has the client usage Raft needs) and names the caller this replica
// authenticated in stonith.CallerHeader. The leader must trust the group's
// CA in http.tls.clientCAFile; it believes the header because the
// certificate names a configured replica, so the ledger and the logs name
// the person, not the forwarding replica.
func forwardClient(cfg *configs.Config, credDir string) (*http.Client, error) {
	pool, err := GroupCAPool(cfg, credDir)
	if err != nil {
		return nil, err
	}
	plain := &http.Transport{TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool},
		ForceAttemptHTTP2: true, IdleConnTimeout: 90 * time.Second}
	rt := &certForwarding{token: plain, cert: plain}
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
		withCert := plain.Clone()
		withCert.TLSClientConfig.Certificates = []tls.Certificate{pair}
		rt.cert = withCert
	}
	return &http.Client{Transport: rt, Timeout: 30 * time.Second}, nil
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

// certForwarding sends a request that carries a bearer token without a
// client certificate, and any other with this replica's certificate.
type certForwarding struct {
	token, cert http.RoundTripper
}

func (c *certForwarding) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Header.Get("Authorization") != "" {
		return c.token.RoundTrip(r)
	}
	return c.cert.RoundTrip(r)
}
