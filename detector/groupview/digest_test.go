package groupview

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/cluster/ledger"
	"github.com/fenced-project/fenced/configs"
)

// fsmLeader is a leader whose writes are applied to a real ledger.
type fsmLeader struct {
	leaderA
	mu    sync.Mutex
	index uint64
}

func (f *fsmLeader) Apply(_ context.Context, c ledger.Command) (uint64, error) {
	buf, err := ledger.Encode(c)
	if err != nil {
		return 0, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.index++
	if e, ok := f.fsm.Apply(&raft.Log{Index: f.index, Term: 2, Type: raft.LogCommand, Data: buf}).(error); ok {
		return 0, e
	}
	return f.index, nil
}

// countingArray resolves every node to a host named after it (or not at
// all for the names in missing) and counts the calls.
type countingArray struct {
	arrayclients.Adapter // only Name, Family and Resolve are called
	name                 string
	missing              map[string]bool

	mu    sync.Mutex
	calls map[string]int
}

func (a *countingArray) Name() string                { return a.name }
func (a *countingArray) Family() arrayclients.Family { return arrayclients.PowerStore }
func (a *countingArray) Resolve(_ context.Context, n arrayclients.Node) (arrayclients.Identity, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls[n.Name]++
	if a.missing[n.Name] {
		return arrayclients.Identity{}, arrayclients.ErrNoIdentity
	}
	return arrayclients.Identity{Array: a.name, Family: arrayclients.PowerStore, Node: n.Name, ObjectID: "host-" + n.Name,
		ResolvedAt: time.Now().UTC()}, nil
}

func (a *countingArray) count(node string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.calls[node]
}

// A new leader handed the inputs of nodes whose identities the ledger
// already holds, found on every array from the same inputs at the same
// boot by the same build, does not ask the arrays again. A node whose
// inputs, boot ID or array overrides changed, or that was not found on an
// array, is resolved again; so is every node under another build.
func TestLearnSkipsNodesResolvedFromTheSameInputs(t *testing.T) {
	node := &fsmLeader{leaderA: leaderA{ledger.New()}}
	arr := &countingArray{name: "ps-1", missing: map[string]bool{"lost": true}, calls: map[string]int{}}
	boots := map[string]string{"a": "boot-1", "b": "boot-1", "lost": "boot-1"}
	var bmu sync.Mutex
	bootID := func(n string) string {
		bmu.Lock()
		defer bmu.Unlock()
		return boots[n]
	}
	cfg := configs.Cluster{Name: "c1"}
	view := func(build string) *View {
		return NewView(cfg, nil, node, []arrayclients.Adapter{arr}, bootID, build, slog.New(slog.DiscardHandler))
	}
	in := func(name, ip string) arrayclients.Node {
		return arrayclients.Node{Cluster: "c1", Name: name, Addresses: []string{ip},
			CSINodeIDs: map[string]string{arrayclients.DriverPowerStore: "csi-node-x-" + ip}}
	}
	l, _ := node.Leadership()
	l.Ctx = t.Context()
	ctx := t.Context()

	v := view("v1")
	for _, n := range []arrayclients.Node{in("a", "10.0.0.1"), in("b", "10.0.0.2"), in("lost", "10.0.0.3")} {
		require.NoError(t, v.learn(ctx, l, n))
	}
	var digest string
	node.fsm.Read(func(s *ledger.State) { digest = s.Node("c1", "a").InputsDigest })
	assert.Len(t, digest, 64, "the digest of the inputs is recorded with the identities")

	// The next leader (same build) is handed the same inputs again.
	v2 := view("v1")
	require.NoError(t, v2.learn(ctx, l, in("a", "10.0.0.1")))
	require.NoError(t, v2.learn(ctx, l, in("lost", "10.0.0.3")))
	assert.Equal(t, 1, arr.count("a"), "a was resolved again from the same inputs")
	assert.Equal(t, 2, arr.count("lost"), "a node not found on an array is always asked again")

	require.NoError(t, v2.learn(ctx, l, in("b", "10.0.0.9")))
	assert.Equal(t, 2, arr.count("b"), "new inputs are resolved")
	bmu.Lock()
	boots["a"] = "boot-2"
	bmu.Unlock()
	require.NoError(t, v2.learn(ctx, l, in("a", "10.0.0.1")))
	assert.Equal(t, 2, arr.count("a"), "a new boot is resolved")
	node.fsm.Read(func(s *ledger.State) { assert.Equal(t, "boot-2", s.Node("c1", "a").BootID) })

	cfg.Nodes = []configs.NodeOverride{{Name: "a", Arrays: map[string]string{"ps-1": "host-a-override"}}}
	require.NoError(t, view("v1").learn(ctx, l, in("a", "10.0.0.1")))
	assert.Equal(t, 3, arr.count("a"), "a changed override is resolved")

	cfg.Nodes = nil
	v3 := view("v2")
	require.NoError(t, v3.learn(ctx, l, in("b", "10.0.0.9")))
	assert.Equal(t, 3, arr.count("b"), "another build resolves every node again")
	require.NoError(t, v3.learn(ctx, l, in("b", "10.0.0.9")))
	assert.Equal(t, 3, arr.count("b"))
}
