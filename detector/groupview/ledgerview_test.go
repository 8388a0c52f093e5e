package groupview

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/cluster"
	"github.com/fenced-project/fenced/cluster/ledger"
	"github.com/fenced-project/fenced/configs"
)

// shortLeadership is a Node whose leadership ends after a few writes.
type shortLeadership struct {
	leaderA
	writes int // leadership ends when this many writes were made
	end    context.CancelFunc

	mu      sync.Mutex
	learned []string
}

func (s *shortLeadership) Apply(ctx context.Context, c ledger.Command) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.learned) >= s.writes {
		s.end()
		return 0, fmt.Errorf("apply: %w", cluster.ErrLeadershipLost)
	}
	s.learned = append(s.learned, c.(*ledger.SetIdentities).Node)
	return uint64(len(s.learned)), nil
}

// A leadership that ends while it learns the nodes handed over during the
// previous one leaves every node it did not learn pending for the next
// leadership: none is dropped (a dropped node would have no identities,
// and so no protection, until its inputs change).
func TestDrainKeepsWhatALostLeadershipDidNotLearn(t *testing.T) {
	lctx, end := context.WithCancel(context.Background())
	defer end()
	node := &shortLeadership{leaderA: leaderA{ledger.New()}, writes: 5, end: end}
	v := NewView(configs.Cluster{Name: "c1"}, nil, node, nil, func(string) string { return "boot" }, "test", slog.New(slog.DiscardHandler))
	const n = 200
	for i := range n {
		name := fmt.Sprintf("n-%03d", i)
		v.pending[name] = arrayclients.Node{Cluster: "c1", Name: name}
	}
	l, _ := node.Leadership()
	l.Ctx = lctx
	done := make(chan struct{})
	go func() { v.Drain(l, time.Hour); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("drain did not return when its leadership ended")
	}
	require.Len(t, node.learned, 5)
	v.mu.Lock()
	defer v.mu.Unlock()
	assert.Len(t, v.pending, n-5, "every node not learned is still pending")
	for _, name := range node.learned {
		assert.NotContains(t, v.pending, name)
	}
}
