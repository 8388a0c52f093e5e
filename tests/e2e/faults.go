package e2e

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/cmd/fenced/status"
	"github.com/fenced-project/fenced/tests/arraysim/fixture"
	"github.com/fenced-project/fenced/tests/arraysim/simcore"
	"github.com/fenced-project/fenced/tests/invariants"
	"github.com/fenced-project/fenced/tests/testbed"
)

// Timeline kinds of the faults that only reports read.
const (
	ReplicaKill    = "replica-kill"
	ReplicaStart   = "replica-start"
	ReplicaCut     = "replica-partition"
	ReplicaHeal    = "replica-heal"
	ArrayCutStart  = "array-cut-start"
	ArrayCutEnd    = "array-cut-end"
	APIServerStart = "apiserver-restart"
	ArrayDownStart = "array-down-start"
	ArrayDownEnd   = "array-down-end"
	KubeletStop    = "kubelet-stop"
	KubeletStart   = "kubelet-start"
)

// Leader returns the replica that says it leads, if exactly one running
// replica does and every other running replica names it.
func (h *Harness) Leader(ctx context.Context) (string, error) {
	var leaders []string
	named := map[string]bool{}
	for _, id := range h.IDs {
		r := h.Replicas[id]
		if !r.Running() {
			continue
		}
		st, err := r.Status(ctx)
		if err != nil {
			return "", err
		}
		if st.Raft == nil {
			return "", fmt.Errorf("replica %s: /status has no raft section (is the Raft group wired into fenced run?)", id)
		}
		if st.Raft.State == "Leader" {
			leaders = append(leaders, id)
		}
		named[st.Raft.LeaderID] = true
	}
	if len(leaders) != 1 {
		return "", fmt.Errorf("%d replicas say they lead: %v", len(leaders), leaders)
	}
	if len(named) != 1 || !named[leaders[0]] {
		return "", fmt.Errorf("replicas disagree on the leader: %v", named)
	}
	return leaders[0], nil
}

// WaitLeader waits up to timeout for one leader and returns it.
func (h *Harness) WaitLeader(timeout time.Duration) string {
	h.t.Helper()
	var leader string
	h.wait(timeout, "a leader", func() (bool, string) {
		l, err := h.Leader(h.ctx)
		if err != nil {
			return false, err.Error()
		}
		leader = l
		return true, ""
	})
	return leader
}

// KillReplica kills a replica with SIGKILL.
func (h *Harness) KillReplica(id string) {
	h.t.Helper()
	h.Timeline.Record(ReplicaKill, id)
	require.NoError(h.t, h.Replicas[id].Kill())
}

// StartReplica starts a stopped replica again.
func (h *Harness) StartReplica(id string) {
	h.t.Helper()
	h.Timeline.Record(ReplicaStart, id)
	require.NoError(h.t, h.Replicas[id].Start())
}

// PartitionReplica cuts a replica from every peer (both directions).
func (h *Harness) PartitionReplica(id string) {
	h.t.Helper()
	h.Timeline.Record(ReplicaCut, id)
	require.NoError(h.t, h.Net.Cut(h.Net.Names(func(n string) bool {
		return strings.HasPrefix(n, "raft:") && (strings.Contains(n, ":"+id+">") || strings.HasSuffix(n, ">"+id))
	})...))
}

// HealReplica ends a replica's partition from its peers.
func (h *Harness) HealReplica(id string) {
	h.Net.Heal(h.Net.Names(func(n string) bool {
		return strings.HasPrefix(n, "raft:") && (strings.Contains(n, ":"+id+">") || strings.HasSuffix(n, ">"+id))
	})...)
	h.Timeline.Record(ReplicaHeal, id)
}

// CutAPIServer cuts a replica from the apiserver.
func (h *Harness) CutAPIServer(id string) {
	h.t.Helper()
	h.Timeline.Record(invariants.APICutStart, id+"/"+ClusterName)
	require.NoError(h.t, h.Net.Cut(apiProxy(id)))
}

// HealAPIServer ends a replica's cut from the apiserver.
func (h *Harness) HealAPIServer(id string) {
	h.Net.Heal(apiProxy(id))
	h.Timeline.Record(invariants.APICutEnd, id+"/"+ClusterName)
}

// CutArray cuts a replica from one array.
func (h *Harness) CutArray(id, array string) {
	h.t.Helper()
	h.Timeline.Record(ArrayCutStart, id+"/"+array)
	require.NoError(h.t, h.Net.Cut(arrayProxy(id, array)))
}

// HealArray ends a replica's cut from one array.
func (h *Harness) HealArray(id, array string) {
	h.Net.Heal(arrayProxy(id, array))
	h.Timeline.Record(ArrayCutEnd, id+"/"+array)
}

// ArrayDown takes an array's API down for every replica (its proxies
// black-hole traffic); the array keeps serving the nodes' I/O.
func (h *Harness) ArrayDown(array string) {
	h.t.Helper()
	h.Timeline.Record(ArrayDownStart, array)
	require.NoError(h.t, h.Net.Cut(h.arrayProxies(array)...))
}

// ArrayUp brings an array's API back.
func (h *Harness) ArrayUp(array string) {
	h.Net.Heal(h.arrayProxies(array)...)
	h.Timeline.Record(ArrayDownEnd, array)
}

func (h *Harness) arrayProxies(array string) []string {
	var out []string
	for _, id := range h.IDs {
		out = append(out, arrayProxy(id, array))
	}
	return out
}

// RestartAPIServer stops and starts the apiserver (every replica loses it
// meanwhile) and waits until it is ready again. The timeline marks the
// outage from the moment the old process has exited to the moment the new
// one accepts connections (it may answer requests from then on).
func (h *Harness) RestartAPIServer() error {
	ctx, cancel := context.WithTimeout(h.ctx, 2*time.Minute)
	defer cancel()
	u, err := url.Parse(h.CP.APIServerURL)
	if err != nil {
		return fmt.Errorf("apiserver URL: %w", err)
	}
	h.Timeline.Record(APIServerStart, ClusterName)
	if err := h.CP.StopAPIServer(); err != nil {
		return fmt.Errorf("stop the apiserver: %w", err)
	}
	h.Timeline.Record(invariants.APIDownStart, ClusterName)
	up := make(chan struct{})
	go func() {
		defer close(up)
		for ctx.Err() == nil {
			d := net.Dialer{Timeout: 100 * time.Millisecond}
			if c, err := d.DialContext(ctx, "tcp", u.Host); err == nil {
				_ = c.Close()
				h.Timeline.Record(invariants.APIDownEnd, ClusterName)
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
		h.Timeline.Record(invariants.APIDownEnd, ClusterName)
	}()
	err = h.CP.StartAPIServer(ctx)
	<-up
	if err != nil {
		return fmt.Errorf("start the apiserver: %w", err)
	}
	return nil
}

// setSignals sets a node's array-side health signals on every array that
// knows it (by name, FQDN, IP, SDC GUID or the host name the CSI driver
// gives it on that family, whichever the family uses). An array that has an
// identity of the node but matches none of them fails the test: a scenario
// that relies on the arrays' view must really change it.
func (h *Harness) setSignals(node string, connected, io bool) {
	h.t.Helper()
	for _, a := range sortedArrays(h.Arrays) {
		var matched bool
		var last error
		for _, host := range h.signalHosts(node, a) {
			if last = a.Server.Family().SetSignals(host, simcore.Signals{Connected: &connected, IOActive: &io}); last == nil {
				matched = true
				break
			}
		}
		require.True(h.t, matched, "set the signals of %s on array %s: %v", node, a.Name, last)
	}
}

// signalHosts returns the names an array may know a node by.
func (h *Harness) signalHosts(node string, a *Array) []string {
	var fn fixture.Node
	for _, n := range h.Fixture.Nodes {
		if n.Name == node {
			fn = n
		}
	}
	hosts := []string{fn.Name, fn.FQDN, fn.IP, fn.SDCGUID, fn.NVMeHost}
	switch a.Family {
	case fixture.PowerStore:
		hosts = append(hosts, "csi-node-"+fn.MachineID+"-"+fn.IP)
	case fixture.PowerMax:
		if g, ok := a.Spec["generate"].(map[string]any); ok {
			if prefix, ok := g["clusterPrefix"].(string); ok {
				hosts = append(hosts, fn.PowerMaxHostID(prefix))
			}
		}
	}
	out := hosts[:0]
	for _, s := range hosts {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// KillNode powers a node off: its heartbeat and kubelet stop, and the
// arrays see no connection and no I/O from it.
func (h *Harness) KillNode(name string) {
	h.t.Helper()
	h.Timeline.Record(invariants.NodeKill, h.ClusterOf(name)+"/"+name)
	require.NoError(h.t, h.Nodes[name].Kill(h.ctx))
	h.setSignals(name, false, false)
}

// HangNode stops a node's heartbeat while its kubelet port stays open and
// the arrays still see it.
func (h *Harness) HangNode(name string) {
	h.t.Helper()
	h.Timeline.Record(invariants.NodeHang, h.ClusterOf(name)+"/"+name)
	require.NoError(h.t, h.Nodes[name].Hang(h.ctx))
}

// StopKubelet stops a node's kubelet, as a kubelet restart or a cut of the
// node's management network does: its port closes and its Lease is no
// longer renewed, while its storage paths stay up (the arrays still see it
// connected, doing I/O). StartKubelet ends it.
func (h *Harness) StopKubelet(name string) {
	h.t.Helper()
	h.Timeline.Record(KubeletStop, h.ClusterOf(name)+"/"+name)
	require.NoError(h.t, h.Nodes[name].Kill(h.ctx))
}

// StartKubelet starts a node's kubelet stopped by StopKubelet: the same
// boot, its port and heartbeat back.
func (h *Harness) StartKubelet(name string) {
	h.t.Helper()
	h.Timeline.Record(KubeletStart, h.ClusterOf(name)+"/"+name)
	require.NoError(h.t, h.Nodes[name].Return(h.ctx))
}

// APIServerOutage stops the apiserver for d (every replica and every
// kubelet loses it: no Lease is renewed meanwhile) and starts it again,
// waiting until it is ready.
func (h *Harness) APIServerOutage(d time.Duration) error {
	ctx, cancel := context.WithTimeout(h.ctx, 2*time.Minute+d)
	defer cancel()
	if err := h.CP.StopAPIServer(); err != nil {
		return fmt.Errorf("stop the apiserver: %w", err)
	}
	h.Timeline.Record(invariants.APIDownStart, ClusterName)
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
	err := h.CP.StartAPIServer(ctx)
	h.Timeline.Record(invariants.APIDownEnd, ClusterName)
	if err != nil {
		return fmt.Errorf("start the apiserver: %w", err)
	}
	return nil
}

// ReturnNode brings a node back without a reboot.
func (h *Harness) ReturnNode(name string) {
	h.t.Helper()
	h.Timeline.Record(invariants.NodeReturn, h.ClusterOf(name)+"/"+name)
	require.NoError(h.t, h.Nodes[name].Return(h.ctx))
	h.setSignals(name, true, true)
}

// RebootNode reboots a node: it comes back with a new boot ID.
func (h *Harness) RebootNode(name string) {
	h.t.Helper()
	h.Timeline.Record(invariants.NodeReboot, h.ClusterOf(name)+"/"+name)
	_, err := h.Nodes[name].Reboot(h.ctx)
	require.NoError(h.t, err)
	h.setSignals(name, true, true)
}

// Fences returns the fences the leader reports.
func (h *Harness) Fences(ctx context.Context) ([]status.Fence, error) {
	leader, err := h.Leader(ctx)
	if err != nil {
		return nil, err
	}
	st, err := h.Replicas[leader].Status(ctx)
	if err != nil {
		return nil, err
	}
	return st.Fences, nil
}

// WaitFence waits up to timeout until the leader reports a fence of node
// in one of the phases.
func (h *Harness) WaitFence(node string, timeout time.Duration, phases ...string) status.Fence {
	h.t.Helper()
	var got status.Fence
	h.wait(timeout, fmt.Sprintf("a fence of %s in %v", node, phases), func() (bool, string) {
		fences, err := h.Fences(h.ctx)
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, f := range fences {
			if f.Node != node || f.Cluster != h.ClusterOf(node) {
				continue
			}
			seen = append(seen, f.ID+":"+f.Phase)
			for _, p := range phases {
				if f.Phase == p {
					got = f
					return true, ""
				}
			}
		}
		return false, fmt.Sprintf("fences of the node: %v", seen)
	})
	return got
}

// CLI runs the fenced binary's command line against a replica (args from
// the command name on; --addr is added, and --token-file to every command
// but status) and returns its combined output and error.
func (h *Harness) CLI(replica string, args ...string) (string, error) {
	bin := h.Replicas[replica].binary
	full := append(append([]string{}, args...), "--addr", h.Replicas[replica].HTTPURL)
	if len(args) > 0 && args[0] != "status" {
		full = append(full, "--token-file", h.TokenFile)
	}
	ctx, cancel := context.WithTimeout(h.ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, full...)
	cmd.Env = append(os.Environ(), "FENCED_ADDR=", "FENCED_TOKEN_FILE=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("fenced %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// Follower returns a running replica that is not the leader.
func (h *Harness) Follower(leader string) string {
	for _, id := range h.IDs {
		if id != leader && h.Replicas[id].Running() {
			return id
		}
	}
	return ""
}

// WaitHealthy waits until the leader reports n healthy nodes.
func (h *Harness) WaitHealthy(n int, timeout time.Duration) {
	h.t.Helper()
	h.wait(timeout, fmt.Sprintf("%d healthy nodes", n), func() (bool, string) {
		leader, err := h.Leader(h.ctx)
		if err != nil {
			return false, err.Error()
		}
		st, err := h.Replicas[leader].Status(h.ctx)
		if err != nil {
			return false, err.Error()
		}
		for _, c := range st.Clusters {
			if c.Name == ClusterName && c.Nodes != nil {
				return c.Nodes.Healthy == n, fmt.Sprintf("%+v", *c.Nodes)
			}
		}
		return false, "no cluster status"
	})
}

// Dead reports whether a node of the test bed is killed or hung.
func (h *Harness) Dead(node string) bool {
	n, ok := h.Nodes[node]
	return ok && n.State() != testbed.NodeUp
}
