package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/cluster/clustertest"
	"github.com/fenced-project/fenced/cmd/fenced/status"
	"github.com/fenced-project/fenced/tests/testbed"
)

// groupProductConfigs writes one configuration per replica of a group of
// n for the test bed and the simulators: the product test's cluster and
// arrays (corroboration kubelet), Raft over mutual TLS from a CA made
// here, plain HTTP on loopback with the shared API token (which is how a
// follower authenticates its vantage reports there).
func groupProductConfigs(t *testing.T, n int, kubeconfig string, sims map[string]*productSim) []*e2eReplica {
	t.Helper()
	ca, err := clustertest.NewCA("fenced vantage CA")
	require.NoError(t, err)
	reps := make([]*e2eReplica, n)
	for i := range reps {
		reps[i] = &e2eReplica{id: fmt.Sprintf("mgmt%d", i+1), raftAddr: freeAddr(t), httpAddr: freeAddr(t)}
	}
	replicaBlock := regexp.MustCompile(`(?s)^replica:\n.*?\nhttp:\n`)
	for _, r := range reps {
		dir := t.TempDir()
		files, err := ca.WriteFiles(dir, r.id)
		require.NoError(t, err)
		b, err := os.ReadFile(productConfig(t, dir, r.httpAddr, kubeconfig, sims))
		require.NoError(t, err)
		block := fmt.Sprintf("replica:\n  id: %s\n  dataDir: %s\n  raftBindAddress: %s\n  tls:\n    certFile: %s\n    keyFile: %s\n    caFile: %s\npeers:\n",
			r.id, filepath.Join(dir, "data"), r.raftAddr, files.CertFile, files.KeyFile, files.CAFile)
		for _, p := range reps {
			if p != r {
				block += fmt.Sprintf("  - id: %s\n    raftAddress: %s\n    httpAddress: http://%s\n", p.id, p.raftAddr, p.httpAddr)
			}
		}
		doc := replicaBlock.ReplaceAllLiteralString(string(b), block+"http:\n")
		require.Contains(t, doc, "peers:\n", doc)
		r.config = filepath.Join(dir, "group.yaml")
		require.NoError(t, os.WriteFile(r.config, []byte(doc), 0o600))
	}
	return reps
}

func unhealthyOf(st status.Status, node string) *status.Node {
	if len(st.Clusters) == 0 {
		return nil
	}
	for i, n := range st.Clusters[0].Unhealthy {
		if n.Name == node {
			return &st.Clusters[0].Unhealthy[i]
		}
	}
	return nil
}

// TestProductVantageSharing runs three real `fenced run` processes (Raft
// over mutual TLS) against the test bed and the array simulators under
// corroboration "kubelet": a KILLED node (no heartbeat, kubelet port
// closed) is unreachable from every replica; the leader can only count a
// majority with a follower's fresh report, so its fence shows the
// followers' probes reach the leader. A HUNG node (no heartbeat, kubelet
// port open) is Suspect "partitioned" on the leader and never fenced.
func TestProductVantageSharing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane, three array simulators and three fenced processes")
	}
	bin := buildFenced(t)
	cp := testbed.Start(t, testbed.Options{NodeLeaseDurationSeconds: 8,
		Tokens: []testbed.Token{{Token: productKubeToken, User: "fenced-product", UID: "fenced-product", Groups: []string{"system:masters"}}}})
	ctx := t.Context()
	nodes, err := cp.AddNodes(ctx, testbed.NodeSpecs("vant", 5)...)
	require.NoError(t, err)
	byName := map[string]*testbed.Node{}
	var names []string
	for _, n := range nodes {
		byName[n.Name()] = n
		names = append(names, n.Name())
	}
	require.NoError(t, cp.WaitNodesReady(ctx, names...))
	sims := startProductSims(t, nodes)
	registerDrivers(t, cp, sims)
	_, err = cp.CreateStatefulSet(ctx, testbed.StatefulSetSpec{Namespace: "app", Name: "db", Replicas: 3,
		Driver: testbed.DriverPowerFlex, AntiAffinity: true})
	require.NoError(t, err)
	pods := runningPods(t, cp, 3)

	kc := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, cp.WriteKubeconfig(kc, productKubeToken))
	reps := groupProductConfigs(t, 3, kc, sims)
	for _, r := range reps {
		r.proc = start(t, bin, "run", "--config", r.config)
	}
	for _, r := range reps {
		waitHealthy(t, r.proc, "http://"+r.httpAddr)
	}
	leader := agreedLeader(t, reps, 30*time.Second)
	lbase := "http://" + leader.httpAddr
	require.Eventually(t, func() bool {
		st, ok := getStatus(t, lbase)
		return ok && len(st.Clusters) == 1 && st.Clusters[0].Nodes != nil && st.Clusters[0].Nodes.Healthy == 5
	}, 2*time.Minute, 250*time.Millisecond, "leader never saw five healthy nodes; log:\n%s", leader.proc.stderr)
	for _, n := range names {
		require.Eventually(t, func() bool {
			return strings.Contains(leader.proc.stderr.String(), "learned node identities") &&
				regexp.MustCompile(`learned node identities.* node=`+n+` `).MatchString(leader.proc.stderr.String())
		}, time.Minute, 200*time.Millisecond, "identities of %s never learned; log:\n%s", n, leader.proc.stderr)
	}

	victim := pods["db-0"].Spec.NodeName
	hung := ""
	for _, n := range names {
		if n != victim {
			hung = n
			break
		}
	}
	require.NoError(t, byName[hung].Hang(ctx))
	require.NoError(t, byName[victim].Kill(ctx))
	hungAt := time.Now()

	// The killed node is fenced to the end.
	require.Eventually(t, func() bool {
		st, ok := getStatus(t, lbase)
		f := fenceOf(st, victim)
		return ok && f != nil && f.Phase == "evicted"
	}, 2*time.Minute, 250*time.Millisecond, "fence of killed %s never reached evicted; leader log:\n%s", victim, leader.proc.stderr)
	assert.Regexp(t, `node verdict.* node=`+victim+` state=failed`, leader.proc.stderr.String())

	// The hung node: past its grace (10 s) plus many polls, the leader holds
	// it Suspect "partitioned" and has opened no fence for it.
	require.Eventually(t, func() bool {
		st, ok := getStatus(t, lbase)
		n := unhealthyOf(st, hung)
		return ok && n != nil && n.Verdict == "suspect" && n.Reason == "partitioned"
	}, time.Minute, 250*time.Millisecond, "hung %s never Suspect partitioned on the leader", hung)
	if d := 25*time.Second - time.Since(hungAt); d > 0 {
		require.Never(t, func() bool {
			st, ok := getStatus(t, lbase)
			return ok && fenceOf(st, hung) != nil
		}, d, 500*time.Millisecond, "hung %s was fenced", hung)
	}
	st, ok := getStatus(t, lbase)
	require.True(t, ok)
	assert.Nil(t, fenceOf(st, hung), "hung %s was fenced", hung)
	n := unhealthyOf(st, hung)
	require.NotNil(t, n)
	assert.Equal(t, "partitioned", n.Reason)
	assert.NotRegexp(t, `node verdict.* node=`+hung+` state=failed`, leader.proc.stderr.String())

	// The followers reported to the leader and nothing refused them.
	for _, r := range reps {
		assert.NotContains(t, r.proc.stderr.String(), "cannot report kubelet probes", "%s log", r.id)
	}
	for _, r := range reps {
		code, _ := r.proc.stop(t)
		assert.Equal(t, 0, code, "%s exit status:\n%s", r.id, r.proc.stderr)
	}
}
