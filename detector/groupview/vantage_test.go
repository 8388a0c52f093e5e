package groupview

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/cluster"
	"github.com/fenced-project/fenced/cluster/ledger"
	"github.com/fenced-project/fenced/detector"
)

// leaderA is the read side of a Node that leads as replica "a" in
// term 2 over an empty ledger; the test's type adds Apply.
type leaderA struct{ fsm *ledger.FSM }

func (leaderA) ID() string { return "a" }
func (leaderA) Leadership() (cluster.Leadership, <-chan struct{}) {
	return cluster.Leadership{Leader: true, Replica: "a", Term: 2}, nil
}
func (leaderA) Leader() (cluster.LeaderInfo, bool) { return cluster.LeaderInfo{ID: "a"}, true }
func (l leaderA) Ledger() *ledger.FSM              { return l.fsm }

// slowLedger is a Node whose writes take a while and can fail for one
// node: it shows how many writes were in flight together.
type slowLedger struct {
	leaderA
	fail string // node whose write fails

	mu       sync.Mutex
	inFlight int
	maxIn    int
	applied  []string
}

func (s *slowLedger) Apply(ctx context.Context, c ledger.Command) (uint64, error) {
	o := c.(*ledger.Observe)
	s.mu.Lock()
	s.inFlight++
	s.maxIn = max(s.maxIn, s.inFlight)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inFlight--
		s.mu.Unlock()
	}()
	select {
	case <-time.After(20 * time.Millisecond):
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	if o.Node == s.fail {
		return 0, errors.New("injected")
	}
	s.mu.Lock()
	s.applied = append(s.applied, o.Node)
	s.mu.Unlock()
	return 1, nil
}

// A report of many changes is written concurrently (so Raft can append them
// in batches), never more than vantageCommitters at once, and one failed
// write does not stop the others.
func TestVantageReportCommitsChangesConcurrently(t *testing.T) {
	node := &slowLedger{leaderA: leaderA{ledger.New()}, fail: "n-007"}
	v := NewSharing(SharingConfig{Self: "a", Node: node, Logger: slog.New(slog.DiscardHandler)})
	rep := detector.VantageReport{Replica: "b", SentAt: time.Now()}
	for i := range 100 {
		rep.Observations = append(rep.Observations, detector.VantageObservation{Cluster: "c1", Node: fmt.Sprintf("n-%03d", i),
			Reachable: false, At: time.Now(), Error: "connection refused"})
	}
	l, _ := node.Leadership()
	got := v.commitAll(context.Background(), l, rep)
	assert.Equal(t, 99, got)
	assert.Len(t, node.applied, 99)
	assert.NotContains(t, node.applied, "n-007")
	assert.Greater(t, node.maxIn, 1, "writes of one report are in flight together")
	assert.LessOrEqual(t, node.maxIn, vantageCommitters)
}

// A report whose sender gave up stops writing at once.
func TestVantageReportStopsWithItsRequest(t *testing.T) {
	node := &slowLedger{leaderA: leaderA{ledger.New()}}
	v := NewSharing(SharingConfig{Self: "a", Node: node, Logger: slog.New(slog.DiscardHandler)})
	rep := detector.VantageReport{Replica: "b", SentAt: time.Now()}
	for i := range 100 {
		rep.Observations = append(rep.Observations, detector.VantageObservation{Cluster: "c1", Node: fmt.Sprintf("n-%03d", i), At: time.Now()})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	l, _ := node.Leadership()
	require.Zero(t, v.commitAll(ctx, l, rep))
	assert.Empty(t, node.applied)
}

// followerOf is a follower whose leader "b" serves plain HTTP at addr.
type followerOf struct {
	leaderA
	addr string
}

func (followerOf) Leadership() (cluster.Leadership, <-chan struct{}) {
	return cluster.Leadership{Replica: "b", Term: 2}, nil
}
func (f followerOf) Leader() (cluster.LeaderInfo, bool) {
	return cluster.LeaderInfo{ID: "b", HTTPAddr: f.addr}, true
}
func (followerOf) Apply(context.Context, ledger.Command) (uint64, error) { return 0, nil }

// countingTransport counts the requests that went out and answers 200.
type countingTransport struct{ sent []*http.Request }

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.sent = append(c.sent, r)
	return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("{}")), Request: r}, nil
}

// The API token is never sent to a leader on another host over plain
// HTTP: the report is not sent and the error says why. Over loopback it
// is.
func TestVantageReportNeverSendsTokenOverPlainHTTP(t *testing.T) {
	obs := map[vantageKey]detector.VantageObservation{{"c1", "n1"}: {Cluster: "c1", Node: "n1"}}
	for _, tc := range []struct {
		addr string
		sent bool
	}{
		{"http://10.20.30.40:9443", false},
		{"http://mgmt2.example:9443", false},
		{"http://127.0.0.1:9443", true},
		{"http://localhost:9443", true},
	} {
		rt := &countingTransport{}
		v := NewSharing(SharingConfig{Self: "a", Node: followerOf{addr: tc.addr}, Client: &http.Client{Transport: rt},
			Token: "the-api-token", Logger: slog.New(slog.DiscardHandler)})
		err := v.send(context.Background(), obs)
		if tc.sent {
			require.NoError(t, err, tc.addr)
			require.Len(t, rt.sent, 1)
			assert.Equal(t, "Bearer the-api-token", rt.sent[0].Header.Get("Authorization"))
			continue
		}
		require.ErrorIs(t, err, cluster.ErrPlainHTTPCredential, tc.addr)
		assert.Contains(t, err.Error(), "https://", "the error says what to do")
		assert.Empty(t, rt.sent, "nothing went over the wire to %s", tc.addr)
	}
}
