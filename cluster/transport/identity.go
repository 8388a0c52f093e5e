package transport

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
)

// Peer is a configured replica as the transport checks it: the replica ID
// and the host:port its peers dial.
type Peer struct {
	ID   string
	Addr string
}

// PeerSet returns the replicas of the current configuration. It is called
// on every handshake and every Raft message, so a changed peer list takes
// effect at once; it must be cheap and safe for concurrent use.
type PeerSet func() []Peer

// ErrNotAPeer is returned (wrapped) when a certificate chains to the CA but
// names no configured replica, or not the replica it has to.
var ErrNotAPeer = errors.New("certificate names no configured raft peer")

// ReplicaURIScheme and ReplicaURIHost make the URI subject alternative
// name that names a replica: fenced://replica/<id>.
const (
	ReplicaURIScheme = "fenced"
	ReplicaURIHost   = "replica"
)

// ReplicaURI is the URI subject alternative name naming replica id:
// fenced://replica/<id>. It is the only name a Raft or replica-HTTP
// certificate is recognised by.
func ReplicaURI(id string) *url.URL {
	return &url.URL{Scheme: ReplicaURIScheme, Host: ReplicaURIHost, Path: "/" + id}
}

// NamedIDs returns the replica IDs cert names by URI subject alternative
// names fenced://replica/<id>, configured or not. A URI with anything more
// (user, port, query, fragment, a deeper path) names nothing.
func NamedIDs(cert *x509.Certificate) []string {
	var ids []string
	for _, u := range cert.URIs {
		if u == nil || !strings.EqualFold(u.Scheme, ReplicaURIScheme) || !strings.EqualFold(u.Host, ReplicaURIHost) ||
			u.User != nil || u.Opaque != "" || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
			continue
		}
		id, ok := strings.CutPrefix(u.Path, "/")
		if !ok || id == "" || strings.Contains(id, "/") {
			continue
		}
		ids = append(ids, id)
	}
	return ids
}

// NamedPeers returns the IDs of the configured peers that cert names. A
// certificate names a replica only by the URI subject alternative name
// fenced://replica/<id> (see ReplicaURI). Its common name, DNS names and
// IP addresses are never an identity: any certificate for a replica's host
// (a monitoring agent's on the same machine) would otherwise be that
// replica, and replica IDs are often the hosts' names.
func NamedPeers(cert *x509.Certificate, peers []Peer) []string {
	named := NamedIDs(cert)
	var ids []string
	for _, p := range peers {
		if p.ID != "" && slices.Contains(named, p.ID) && !slices.Contains(ids, p.ID) {
			ids = append(ids, p.ID)
		}
	}
	return ids
}

// legacyNames returns the configured peers cert names the way certificates
// made before replicas were named by URI did (subject common name or DNS
// name equal to the ID): what a refusal points out, never an identity.
func legacyNames(cert *x509.Certificate, peers []Peer) []string {
	var ids []string
	for _, p := range peers {
		if p.ID == "" {
			continue
		}
		if cert.Subject.CommonName == p.ID || slices.ContainsFunc(cert.DNSNames, func(d string) bool { return strings.EqualFold(d, p.ID) }) {
			ids = append(ids, p.ID)
		}
	}
	return ids
}

// RefusalHint is what a refusal of cert adds for an operator: when cert
// names a configured replica only by common name or DNS name (a
// certificate issued before replicas were named by URI), how to reissue
// it. Empty otherwise.
func RefusalHint(cert *x509.Certificate, peers []Peer) string {
	legacy := legacyNames(cert, peers)
	if len(legacy) == 0 || len(NamedPeers(cert, peers)) > 0 {
		return ""
	}
	return fmt.Sprintf(" (it names replica %s by common name or DNS name only: a replica is named only by the URI SAN %s; reissue it with `fenced pki replica --from-cert`)",
		legacy[0], ReplicaURI(legacy[0]))
}

// addrHost is the lower-cased host of a host:port (the whole string when it
// has no port).
func addrHost(addr string) string {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		h = addr
	}
	return strings.ToLower(strings.Trim(h, "[]"))
}

// describe names a certificate in refusals: its subject and its names.
func describe(cert *x509.Certificate) string {
	names := append([]string(nil), cert.DNSNames...)
	for _, ip := range cert.IPAddresses {
		names = append(names, ip.String())
	}
	for _, u := range cert.URIs {
		names = append(names, u.String())
	}
	return fmt.Sprintf("subject %q, names [%s]", cert.Subject.String(), strings.Join(names, " "))
}

// verifyAnyPeer is the accepting side's check: the client certificate must
// name at least one configured replica.
func verifyAnyPeer(peers PeerSet) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return fmt.Errorf("no client certificate: %w", ErrNotAPeer)
		}
		cert := cs.PeerCertificates[0]
		ps := peers()
		if len(NamedPeers(cert, ps)) == 0 {
			return fmt.Errorf("%s: %w%s", describe(cert), ErrNotAPeer, RefusalHint(cert, ps))
		}
		return nil
	}
}

// verifyPeerAt is the dialing side's check: the server certificate must
// name the configured replica whose Raft address was dialed.
func verifyPeerAt(peers PeerSet, address string) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return fmt.Errorf("raft peer %s sent no certificate: %w", address, ErrNotAPeer)
		}
		cert := cs.PeerCertificates[0]
		ps := peers()
		var want []string
		for _, p := range ps {
			if p.Addr == address {
				want = append(want, p.ID)
			}
		}
		if len(want) == 0 {
			return fmt.Errorf("raft address %s is no configured peer's: %w", address, ErrNotAPeer)
		}
		for _, id := range NamedPeers(cert, ps) {
			for _, w := range want {
				if id == w {
					return nil
				}
			}
		}
		return fmt.Errorf("certificate of %s (%s) does not name replica %s: %w%s",
			address, describe(cert), strings.Join(want, " or "), ErrNotAPeer, RefusalHint(cert, ps))
	}
}

// CheckNames returns an error when c's own certificate does not name
// replica id by the URI subject alternative name fenced://replica/<id>:
// every peer would refuse it, so a replica must not start with it. The
// error says how to reissue it.
func (c *Credentials) CheckNames(id string) error {
	if len(c.cert.Certificate) == 0 {
		return errors.New("no certificate")
	}
	cert := c.cert.Leaf
	if cert == nil {
		parsed, err := x509.ParseCertificate(c.cert.Certificate[0])
		if err != nil {
			return fmt.Errorf("parse certificate: %w", err)
		}
		cert = parsed
	}
	if slices.Contains(NamedIDs(cert), id) {
		return nil
	}
	how := "issue one with `fenced pki replica --config <this configuration>`"
	if legacyNames(cert, []Peer{{ID: id}}) != nil {
		how = "it names the replica by common name or DNS name only, as certificates made by earlier releases do: reissue it with `fenced pki replica --from-cert <this certificate>` before this release runs (docs/operations.md, \"Replica certificates\")"
	}
	return fmt.Errorf("the certificate (%s) does not name replica %q by the URI SAN %s, the only name peers recognise a replica by: every peer would refuse it; %s: %w",
		describe(cert), id, ReplicaURI(id), how, ErrNotAPeer)
}
