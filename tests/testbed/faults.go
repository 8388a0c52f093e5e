package testbed

import (
	"context"
	"fmt"
)

// Kill makes the node look dead: its Lease is no longer renewed, kwok
// stops writing its status (the type=kwok label is removed) and its kubelet
// port refuses connections. The Node's pods stay as they are, as with a
// powered-off machine.
func (n *Node) Kill(ctx context.Context) error {
	n.mu.Lock()
	n.listener.close()
	n.listener = nil
	n.state = NodeKilled
	n.mu.Unlock()
	n.stopHeartbeat()
	if err := n.cp.setKwokLabel(ctx, n.Spec.Name, false); err != nil {
		return fmt.Errorf("kill node %s: %w", n.Spec.Name, err)
	}
	return nil
}

// Hang cuts the node off the control plane while its kubelet stays alive:
// the heartbeat stops but the kubelet port keeps accepting connections.
func (n *Node) Hang(ctx context.Context) error {
	if err := n.ensureListener(); err != nil {
		return fmt.Errorf("hang node %s: %w", n.Spec.Name, err)
	}
	n.setState(NodeHung)
	n.stopHeartbeat()
	if err := n.cp.setKwokLabel(ctx, n.Spec.Name, false); err != nil {
		return fmt.Errorf("hang node %s: %w", n.Spec.Name, err)
	}
	return nil
}

// Return brings a killed or hung node back without a reboot: the kubelet
// port accepts again and the heartbeat resumes with the same boot ID.
func (n *Node) Return(ctx context.Context) error {
	if err := n.ensureListener(); err != nil {
		return fmt.Errorf("return node %s: %w", n.Spec.Name, err)
	}
	if err := n.cp.setKwokLabel(ctx, n.Spec.Name, true); err != nil {
		return fmt.Errorf("return node %s: %w", n.Spec.Name, err)
	}
	n.startHeartbeat()
	n.setState(NodeUp)
	return nil
}

// Reboot reboots the node: if it is up its heartbeat stops and its port
// closes first; then it reports a new boot ID in status.nodeInfo.bootID, and
// its kubelet port and heartbeat come back. It returns the new boot ID.
func (n *Node) Reboot(ctx context.Context) (string, error) {
	if n.State() == NodeUp {
		if err := n.Kill(ctx); err != nil {
			return "", fmt.Errorf("reboot: %w", err)
		}
	}
	bootID := newUUID()
	status := map[string]any{"nodeInfo": map[string]any{"bootID": bootID}}
	if err := n.cp.patchNodeStatus(ctx, n.Spec.Name, status); err != nil {
		return "", fmt.Errorf("reboot node %s: %w", n.Spec.Name, err)
	}
	n.mu.Lock()
	n.bootID = bootID
	n.mu.Unlock()
	if err := n.Return(ctx); err != nil {
		return "", fmt.Errorf("reboot: %w", err)
	}
	return bootID, nil
}

func (n *Node) setState(s NodeState) {
	n.mu.Lock()
	n.state = s
	n.mu.Unlock()
}

// ensureListener reopens the kubelet listener if it is closed.
func (n *Node) ensureListener() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.listener != nil {
		return nil
	}
	if n.lock == nil {
		return fmt.Errorf("node %s was removed", n.Spec.Name)
	}
	kl, err := listenKubelet(n.Spec.IP, n.cp.pki.kubelet)
	if err != nil {
		return err
	}
	n.listener = kl
	return nil
}
