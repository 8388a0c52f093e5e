package cluster

import (
	"context"
	"time"
)

// SetArrayTimeout sets the longest array request timeout of this
// replica's configuration, which it advertises to the other replicas with
// its ledger versions: a leader elected after this replica led waits out
// requests this replica may still have had in flight for that long.
func (n *Node) SetArrayTimeout(d time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.arrayTimeout = d
}

// notePeerAdvert keeps the array timeout a peer advertised, and says so
// when it differs from this replica's: the configurations should agree,
// and until they do a new leader waits out the longest.
func (n *Node) notePeerAdvert(v LedgerVersions) {
	if v.ArrayTimeoutMillis <= 0 {
		return
	}
	d := time.Duration(v.ArrayTimeoutMillis) * time.Millisecond
	n.mu.Lock()
	if n.peerTimeouts == nil {
		n.peerTimeouts = map[string]time.Duration{}
	}
	prev, own := n.peerTimeouts[v.Replica], n.arrayTimeout
	n.peerTimeouts[v.Replica] = d
	n.mu.Unlock()
	if d != prev && own > 0 && d != own {
		n.log.Warn("a replica's array request timeout differs from this one's: a new leader waits out the longest; "+
			"set the same arrays[].requestTimeout on every replica", "peer", v.Replica, "peerArrayTimeout", d,
			"arrayTimeout", own)
	}
}

// peerArrayTimeout is the longest array request timeout another replica
// advertised since this one started (0 when none answered).
func (n *Node) peerArrayTimeout() time.Duration {
	n.mu.Lock()
	defer n.mu.Unlock()
	var d time.Duration
	for _, t := range n.peerTimeouts {
		d = max(d, t)
	}
	return d
}

// advertLoop asks every configured peer, on every replica and every
// ReconcileInterval (the first time soon after start), what it
// advertises, so that a replica elected after a leader that is dead by
// then still knows how long that leader's array requests could run. The
// leader's version negotiation asks the voters too.
func (n *Node) advertLoop() {
	defer n.wg.Done()
	timer := time.NewTimer(min(time.Second, n.cfg.Timings.ReconcileInterval))
	defer timer.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-timer.C:
		}
		n.askPeers(n.ctx)
		timer.Reset(n.cfg.Timings.ReconcileInterval)
	}
}

// askPeers asks each configured peer once; a peer that does not answer
// keeps what it said before.
func (n *Node) askPeers(ctx context.Context) {
	n.mu.Lock()
	probe := n.versionProbe
	peers := append([]Peer(nil), n.peers...)
	n.mu.Unlock()
	if probe == nil {
		return
	}
	for _, p := range peers {
		if p.ID == n.cfg.ID || p.HTTPAddr == "" {
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, n.cfg.Timings.ApplyTimeout)
		v, err := probe(pctx, p)
		cancel()
		if err == nil {
			n.notePeerAdvert(v)
		}
	}
}
