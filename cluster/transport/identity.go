package transport

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
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

// NamedPeers returns the IDs of the configured peers that cert names. A
// certificate names a replica when its subject common name or one of its DNS
// names is the replica ID, or when one of its names (DNS, IP or common name)
// is the host of the replica's Raft address and no other configured replica
// has that host: replicas that share a host (one machine, tests) can only be
// named by ID.
func NamedPeers(cert *x509.Certificate, peers []Peer) []string {
	hosts := map[string]int{}
	for _, p := range peers {
		if h := addrHost(p.Addr); h != "" {
			hosts[h]++
		}
	}
	var ids []string
	for _, p := range peers {
		if p.ID == "" {
			continue
		}
		if namesID(cert, p.ID) {
			ids = append(ids, p.ID)
			continue
		}
		if h := addrHost(p.Addr); h != "" && hosts[h] == 1 && namesHost(cert, h) {
			ids = append(ids, p.ID)
		}
	}
	return ids
}

func namesID(cert *x509.Certificate, id string) bool {
	if cert.Subject.CommonName == id {
		return true
	}
	for _, d := range cert.DNSNames {
		if strings.EqualFold(d, id) {
			return true
		}
	}
	return false
}

func namesHost(cert *x509.Certificate, host string) bool {
	if ip := net.ParseIP(host); ip != nil {
		for _, c := range cert.IPAddresses {
			if c.Equal(ip) {
				return true
			}
		}
		return false
	}
	if strings.EqualFold(cert.Subject.CommonName, host) {
		return true
	}
	for _, d := range cert.DNSNames {
		if strings.EqualFold(d, host) {
			return true
		}
	}
	return false
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
		if len(NamedPeers(cert, peers())) == 0 {
			return fmt.Errorf("%s: %w", describe(cert), ErrNotAPeer)
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
		return fmt.Errorf("certificate of %s (%s) does not name replica %s: %w",
			address, describe(cert), strings.Join(want, " or "), ErrNotAPeer)
	}
}
