package transport

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
)

// Raft's wire types (hashicorp/raft net_transport.go): one byte, then the
// msgpack-encoded request; an InstallSnapshot request is followed by Size
// bytes of snapshot.
const (
	rpcAppendEntries uint8 = iota
	rpcRequestVote
	rpcInstallSnapshot
	rpcTimeoutNow
	rpcRequestPreVote
)

// guardedConn is an accepted Raft connection whose every request is checked
// before Raft reads it: the replica ID the request claims to come from must
// be one that the peer's certificate names. Raft reads the checked requests
// from a pipe; its responses go straight to the TLS connection.
type guardedConn struct {
	*tls.Conn
	pr        *io.PipeReader
	closeOnce sync.Once
}

func (c *guardedConn) Read(p []byte) (int, error) { return c.pr.Read(p) }

func (c *guardedConn) Close() error {
	var err error
	c.closeOnce.Do(func() {
		c.pr.Close()
		err = c.Conn.Close()
	})
	return err
}

// guard wraps an accepted connection; refuse is called (once) with the
// reason when a request claims a replica the certificate does not name.
func guard(conn *tls.Conn, peers PeerSet, gate VoteGate, refuse func(error)) net.Conn {
	pr, pw := io.Pipe()
	gc := &guardedConn{Conn: conn, pr: pr}
	go func() {
		err := relay(conn, pw, peers, gate) // it returns only when conn ends or a request is refused
		if !errors.Is(err, io.EOF) {
			var ce claimError
			if errors.As(err, &ce) || errors.Is(err, errVoteWithheld) {
				refuse(err)
			}
			_ = gc.Close()
		}
		pw.CloseWithError(err)
	}()
	return gc
}

// errVoteWithheld ends a connection whose vote request the VoteGate
// withheld.
var errVoteWithheld = errors.New("vote withheld")

type claimError struct{ msg string }

func (e claimError) Error() string { return e.msg }

// relay decodes each request from conn, checks its claimed sender and
// re-encodes it into pw, until conn ends or a request is refused.
func relay(conn *tls.Conn, pw *io.PipeWriter, peers PeerSet, gate VoteGate) error {
	cert := conn.ConnectionState().PeerCertificates[0]
	r := bufio.NewReader(conn)
	dec := codec.NewDecoder(r, &codec.MsgpackHandle{})
	w := bufio.NewWriter(pw)
	// The old time format is the one every Raft version decodes.
	h := &codec.MsgpackHandle{}
	h.TimeNotBuiltin = true
	enc := codec.NewEncoder(w, h)
	for {
		typ, err := r.ReadByte()
		if err != nil {
			return err
		}
		var req raft.WithRPCHeader
		switch typ {
		case rpcAppendEntries:
			req = &raft.AppendEntriesRequest{}
		case rpcRequestVote:
			req = &raft.RequestVoteRequest{}
		case rpcInstallSnapshot:
			req = &raft.InstallSnapshotRequest{}
		case rpcTimeoutNow:
			req = &raft.TimeoutNowRequest{}
		case rpcRequestPreVote:
			req = &raft.RequestPreVoteRequest{}
		default:
			return claimError{fmt.Sprintf("raft message of unknown type %d from %s", typ, describe(cert))}
		}
		if err := dec.Decode(req); err != nil {
			return fmt.Errorf("decode raft message: %w", err)
		}
		claimed := string(req.GetRPCHeader().ID)
		if !named(cert, peers(), claimed) {
			return claimError{fmt.Sprintf("raft message claims to come from replica %q, but the peer's certificate (%s) does not name it: %v",
				claimed, describe(cert), ErrNotAPeer)}
		}
		if gate != nil {
			switch r := req.(type) {
			case *raft.AppendEntriesRequest:
				gate.LeaderCommit(r.LeaderCommitIndex)
			case *raft.RequestVoteRequest, *raft.RequestPreVoteRequest:
				if !gate.MayVote() {
					return errVoteWithheld
				}
			}
		}
		if err := w.WriteByte(typ); err != nil {
			return err
		}
		if err := enc.Encode(req); err != nil {
			return fmt.Errorf("pass on raft message: %w", err)
		}
		if snap, ok := req.(*raft.InstallSnapshotRequest); ok {
			if _, err := io.CopyN(w, r, snap.Size); err != nil {
				return fmt.Errorf("pass on snapshot: %w", err)
			}
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
}

// named reports whether cert names the replica id.
func named(cert *x509.Certificate, peers []Peer, id string) bool {
	if id == "" {
		return false
	}
	for _, n := range NamedPeers(cert, peers) {
		if n == id {
			return true
		}
	}
	return false
}
