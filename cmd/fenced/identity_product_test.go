package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/cmd/fenced/status"
	"github.com/fenced-project/fenced/tests/testbed"
)

// TestProductCertificateOperatorThroughFollower runs three fenced
// processes serving HTTPS against the test bed (kube-apiserver, kwok nodes)
// and PowerFlex, Unity and PowerMax simulators. Alice, an operator named by
// her client certificate, fences a node and then forces its unfence with
// the CLI through a follower: every replica's ledger names her as the one
// who fenced and who forced the unfence, never the follower that forwarded
// the calls.
func TestProductCertificateOperatorThroughFollower(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane, three array simulators and three fenced processes")
	}
	bin := buildFenced(t)
	cp := testbed.Start(t, testbed.Options{NodeLeaseDurationSeconds: 8,
		Tokens: []testbed.Token{{Token: productKubeToken, User: "fenced-product", UID: "fenced-product", Groups: []string{"system:masters"}}}})
	ctx := t.Context()
	nodes, err := cp.AddNodes(ctx, testbed.NodeSpecs("cert", 2)...)
	require.NoError(t, err)
	var names []string
	for _, n := range nodes {
		names = append(names, n.Name())
	}
	require.NoError(t, cp.WaitNodesReady(ctx, names...))
	sims := startProductSims(t, nodes)
	registerDrivers(t, cp, sims)

	g := writeHTTPSGroupConfigs(t, 3, func(dir string) string {
		kc := filepath.Join(dir, "kubeconfig")
		require.NoError(t, cp.WriteKubeconfig(kc, productKubeToken))
		return productClusters(t, dir, kc, sims)
	})
	for _, r := range g.reps {
		r.proc = start(t, bin, "run", "--config", r.config)
	}
	leader := g.leader(t)
	var follower *e2eReplica
	for _, r := range g.reps {
		if r != leader {
			follower = r
			break
		}
	}
	victim := names[0]
	require.Eventually(t, func() bool {
		return strings.Contains(leader.proc.stderr.String(), "learned node identities") &&
			strings.Contains(leader.proc.stderr.String(), "node="+victim+" ")
	}, 2*time.Minute, 200*time.Millisecond, "identities of %s never learned; log:\n%s", victim, leader.proc.stderr)

	cli := func(args ...string) string {
		t.Helper()
		f := g.files["alice"]
		args = append(args, "--addr", "https://"+follower.httpAddr, "--ca-file", g.files[follower.id].CAFile,
			"--cert-file", f.CertFile, "--key-file", f.KeyFile, "--cluster", productCluster)
		out, err := exec.Command(bin, args...).CombinedOutput()
		require.NoError(t, err, "%v: %s", args, out)
		return string(out)
	}
	fenceOn := func(r *e2eReplica) *status.Fence {
		var st status.Status
		if !g.get(t, r, "/status", &st) {
			return nil
		}
		return fenceOf(st, victim)
	}

	out := cli("fence", victim, "--reason", "certificate operator test")
	assert.Contains(t, out, "fence opened")
	require.Eventually(t, func() bool {
		f := fenceOn(leader)
		return f != nil && f.Phase == "evicted"
	}, 2*time.Minute, 250*time.Millisecond, "operator fence of %s never reached evicted; log:\n%s", victim, leader.proc.stderr)
	assert.Equal(t, "cert:alice", fenceOn(leader).Operator, "the fence names alice")

	cli("unfence", victim, "--force", "--yes", "--reason", "certificate operator test done")
	for _, r := range g.reps {
		require.Eventually(t, func() bool {
			f := fenceOn(r)
			return f != nil && f.Phase == "closed"
		}, 2*time.Minute, 250*time.Millisecond, "fence of %s never closed on %s; log:\n%s", victim, r.id, leader.proc.stderr)
		f := fenceOn(r)
		assert.Equal(t, "cert:alice", f.Operator, "replica %s: who fenced", r.id)
		assert.Equal(t, "cert:alice", f.UnfenceOperator, "replica %s: who forced the unfence", r.id)
		assert.True(t, f.ForcedUnfence, "replica %s: the unfence is recorded as forced", r.id)
	}
	log := leader.proc.stderr.String()
	assert.Contains(t, log, "cert:alice", "the leader's log names the person")
	assert.NotContains(t, log, "operator=replica:", "no replica acted as operator")
}
