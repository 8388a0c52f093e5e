package daemon

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"

	"github.com/fenced-project/fenced/cluster/transport"
	"github.com/fenced-project/fenced/configs"
	"github.com/fenced-project/fenced/stonith"
)

// serverTLS builds the HTTP endpoint's TLS configuration, or nil for plain
// HTTP. Client certificates are verified against http.tls.clientCAFile and
// http.tls.operatorCAFile; what a verified certificate may do is decided
// by the API's authenticator (see newAuthenticator).
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
	pair, err := configs.LoadX509KeyPair(cert, key)
	if err != nil {
		return nil, fmt.Errorf("load http.tls certificate and key: %w", err)
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair}}
	pool := x509.NewCertPool()
	any := false
	for _, f := range []struct{ field, ref string }{
		{"http.tls.clientCAFile", t.ClientCAFile},
		{"http.tls.operatorCAFile", t.OperatorCAFile},
	} {
		if f.ref == "" {
			continue
		}
		if err := appendPEM(pool, f.field, f.ref, credDir); err != nil {
			return nil, err
		}
		any = true
	}
	if any {
		tc.ClientCAs = pool
		tc.ClientAuth = tls.VerifyClientCertIfGiven
	}
	return tc, nil
}

// appendPEM adds the certificates of the PEM file ref to pool.
func appendPEM(pool *x509.CertPool, field, ref, credDir string) error {
	p, err := configs.ResolveFile(ref, credDir)
	if err != nil {
		return fmt.Errorf("%s: %w", field, err)
	}
	pem, err := configs.ReadFileLimited(p, configs.MaxPEMBytes)
	if err != nil {
		return fmt.Errorf("%s: %w", field, err)
	}
	if !pool.AppendCertsFromPEM(pem) {
		return fmt.Errorf("%s %s holds no PEM certificate", field, p)
	}
	return nil
}

// newAuthenticator builds the API's authenticator: the token of
// http.tokenFile, operators by http.tls.operators and operatorCAFile, and
// replicas by replica.tls.caFile and the configured peers.
func newAuthenticator(cfg *configs.Config, credDir string) (*stonith.Authenticator, error) {
	tokenPath := ""
	if cfg.HTTP.TokenFile != "" {
		p, err := configs.ResolveFile(cfg.HTTP.TokenFile, credDir)
		if err != nil {
			return nil, fmt.Errorf("http.tokenFile: %w", err)
		}
		tokenPath = p
	}
	auth, err := stonith.NewAuthenticator(tokenPath)
	if err != nil {
		return nil, fmt.Errorf("http.tokenFile: %w", err)
	}
	ids := stonith.Identities{Operators: cfg.HTTP.TLS.Operators}
	if ref := cfg.HTTP.TLS.OperatorCAFile; ref != "" {
		ids.OperatorCAs = x509.NewCertPool()
		if err := appendPEM(ids.OperatorCAs, "http.tls.operatorCAFile", ref, credDir); err != nil {
			return nil, err
		}
	}
	if ref := cfg.Replica.TLS.CAFile; ref != "" {
		ids.ReplicaCAs = x509.NewCertPool()
		if err := appendPEM(ids.ReplicaCAs, "replica.tls.caFile", ref, credDir); err != nil {
			return nil, err
		}
	}
	self := cfg.Replica.RaftAdvertiseAddress
	if self == "" {
		self = cfg.Replica.RaftBindAddress
	}
	peers := []transport.Peer{{ID: cfg.Replica.ID, Addr: self}}
	for _, p := range cfg.Peers {
		if p.ID != cfg.Replica.ID {
			peers = append(peers, transport.Peer{ID: p.ID, Addr: p.RaftAddress})
		}
	}
	ids.Peers = func() []transport.Peer { return peers }
	return auth.WithIdentities(ids), nil
}
