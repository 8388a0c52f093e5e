package kube

import (
	"context"
	"fmt"
	"net"
	"strconv"

	corev1 "k8s.io/api/core/v1"
)

// DefaultKubeletPort is the kubelet's port when the Node does not report one.
const DefaultKubeletPort = 10250

// KubeletAddress returns host:port of the node's kubelet: its first
// InternalIP and the port from status.daemonEndpoints.kubeletEndpoint, or
// DefaultKubeletPort when that is unset.
func KubeletAddress(node *corev1.Node) (string, error) {
	if node == nil {
		return "", fmt.Errorf("kubelet address: %w", ErrNoKubeletAddress)
	}
	port := int(node.Status.DaemonEndpoints.KubeletEndpoint.Port)
	if port <= 0 || port > 65535 {
		port = DefaultKubeletPort
	}
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP && a.Address != "" {
			return net.JoinHostPort(a.Address, strconv.Itoa(port)), nil
		}
	}
	return "", fmt.Errorf("kubelet address of node %s: %w", node.Name, ErrNoKubeletAddress)
}

// ProbeTCP dials addr and closes the connection: nil means something
// accepted the connection. The context bounds the dial.
func ProbeTCP(ctx context.Context, addr string) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("dial kubelet %s: %w", addr, err)
	}
	return conn.Close()
}

// ReadyStatus returns the status of the Node's Ready condition ("True",
// "False", "Unknown"), or "" when the condition is absent.
func ReadyStatus(node *corev1.Node) string {
	if node == nil {
		return ""
	}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return string(c.Status)
		}
	}
	return ""
}
