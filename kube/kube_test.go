package kube

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/fenced-project/fenced/arrayclients"
)

func node(name string, port int32, addrs ...corev1.NodeAddress) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	n.Status.Addresses = addrs
	n.Status.DaemonEndpoints.KubeletEndpoint.Port = port
	return n
}

// labelled returns n with labels.
func labelled(n *corev1.Node, labels map[string]string) *corev1.Node {
	n.Labels = labels
	return n
}

func TestKubeletAddress(t *testing.T) {
	tcs := []struct {
		name    string
		node    *corev1.Node
		want    string
		wantErr bool
	}{
		{"default port", node("a", 0, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.5"}), "10.0.0.5:10250", false},
		{"reported port", node("a", 10251, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.5"}), "10.0.0.5:10251", false},
		{"first InternalIP after others", node("a", 0,
			corev1.NodeAddress{Type: corev1.NodeHostName, Address: "a"},
			corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.6"},
			corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.7"}), "10.0.0.6:10250", false},
		{"IPv6", node("a", 0, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "fd00::1"}), "[fd00::1]:10250", false},
		{"bad port falls back", node("a", -4, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.5"}), "10.0.0.5:10250", false},
		{"no InternalIP", node("a", 0, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "1.2.3.4"}), "", true},
		{"nil node", nil, "", true},
	}
	for _, tc := range tcs {
		t.Run(tc.name, func(t *testing.T) {
			got, err := KubeletAddress(tc.node)
			if tc.wantErr {
				require.ErrorIs(t, err, ErrNoKubeletAddress)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestProbeTCP(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	require.NoError(t, ProbeTCP(ctx, addr))
	require.NoError(t, l.Close())
	err = ProbeTCP(ctx, addr)
	require.Error(t, err)
	assert.Contains(t, err.Error(), addr)
}

func TestReadyStatus(t *testing.T) {
	n := node("a", 0)
	assert.Empty(t, ReadyStatus(nil))
	assert.Empty(t, ReadyStatus(n))
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse}, {Type: corev1.NodeReady, Status: corev1.ConditionUnknown}}
	assert.Equal(t, "Unknown", ReadyStatus(n))
}

func TestNodeInputs(t *testing.T) {
	csi := &storagev1.CSINode{Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{
		{Name: arrayclients.DriverPowerStore, NodeID: "csi-node-1-10.0.0.5"},
		{Name: arrayclients.DriverPowerFlex, NodeID: "0A1B2C3D-0000-0000-0000-000000000001"},
		{Name: "", NodeID: "x"},
		{Name: "other", NodeID: ""},
	}}}
	tcs := []struct {
		name string
		node *corev1.Node
		csi  *storagev1.CSINode
		want arrayclients.Node
	}{
		{"nil node", nil, nil, arrayclients.Node{Cluster: "c"}},
		{"addresses, hostname, FQDN from DNS, CSI IDs", node("w1", 0,
			corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.5"},
			corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "192.0.2.5"},
			corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.5"},
			corev1.NodeAddress{Type: corev1.NodeHostName, Address: "w1"},
			corev1.NodeAddress{Type: corev1.NodeInternalDNS, Address: "w1.cluster.example"}), csi,
			arrayclients.Node{Cluster: "c", Name: "w1", Addresses: []string{"10.0.0.5", "192.0.2.5"}, Hostname: "w1", FQDN: "w1.cluster.example",
				CSINodeIDs: map[string]string{arrayclients.DriverPowerStore: "csi-node-1-10.0.0.5", arrayclients.DriverPowerFlex: "0A1B2C3D-0000-0000-0000-000000000001"}}},
		{"FQDN from node name, no CSINode", node("w2.example.net", 0, corev1.NodeAddress{Type: corev1.NodeHostName, Address: "w2"}), nil,
			arrayclients.Node{Cluster: "c", Name: "w2.example.net", Hostname: "w2", FQDN: "w2.example.net"}},
		{"csi-isilon AzNetwork label IPs", labelled(node("w3", 0, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.7"}), map[string]string{
			"csi-isilon.dellemc.com/az-192.168.1.0-24-192.168.1.7": "true",
			"csi-isilon.dellemc.com/az-10.0.0.0-8-10.0.0.7":        "true",
			"csi-isilon.dellemc.com/az-172.16.0.0-16-not-an-ip":    "true",
			"example.com/az-192.168.2.0-24-192.168.2.7":            "true",
			"kubernetes.io/hostname":                               "w3",
		}), nil,
			arrayclients.Node{Cluster: "c", Name: "w3", Addresses: []string{"10.0.0.7"}, LabelIPs: []string{"10.0.0.7", "192.168.1.7"}}},
	}
	for _, tc := range tcs {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, NodeInputs("c", tc.node, tc.csi))
		})
	}
}

func TestNewClientsNamesTheBadKubeconfig(t *testing.T) {
	_, err := NewClients(Config{})
	require.ErrorContains(t, err, "kubeconfig")
	_, err = NewClients(Config{Kubeconfig: t.TempDir() + "/missing"})
	require.ErrorContains(t, err, "missing")
}

// The fencing pipeline's client has its own, larger request budget: a
// storm of fences does not wait behind the detector's reads.
func TestFenceClientHasItsOwnRateLimit(t *testing.T) {
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600))
	cs, err := NewClients(Config{Kubeconfig: kc})
	require.NoError(t, err)
	limiter := func(i kubernetes.Interface) flowcontrol.RateLimiter {
		return i.CoreV1().RESTClient().GetRateLimiter()
	}
	def := DefaultConfig()
	assert.InDelta(t, def.QPS, limiter(cs.Requests).QPS(), 0.001)
	assert.InDelta(t, def.FenceQPS, limiter(cs.Fence).QPS(), 0.001)
	assert.NotSame(t, limiter(cs.Requests), limiter(cs.Fence))

	cs, err = NewClients(Config{Kubeconfig: kc, FenceQPS: 7, FenceBurst: 9})
	require.NoError(t, err)
	assert.InDelta(t, 7, limiter(cs.Fence).QPS(), 0.001)
}
