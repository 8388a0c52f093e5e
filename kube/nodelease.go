package kube

import (
	"context"
	"fmt"
	"strings"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
)

// DefaultRemediationLeaseNamespace is where medik8s remediators coordinate
// (medik8s/common pkg/lease defaultLeaseNs).
const DefaultRemediationLeaseNamespace = "medik8s-leases"

// RemediationLeaseHolder is fenced's holder identity on them.
const RemediationLeaseHolder = "fenced"

// NodeLeases takes and gives back the per-node Leases medik8s remediators
// coordinate with: NodeHealthCheck takes the Lease node-<node> in
// medik8s-leases before it creates a remediation CR and skips a node whose
// Lease another holder holds (node-healthcheck-operator
// internal/controller/resources/lease.go ObtainNodeLease, medik8s/common
// pkg/lease RequestLease). fenced does the same before fencing on its own
// verdict, with the same rules: a Lease is held while its renewTime plus
// its duration is not past and its renewTime is not in the future.
type NodeLeases struct {
	client    kubernetes.Interface
	namespace string
	holder    string
	clk       clock.PassiveClock
}

// NewNodeLeases returns the node Leases of one cluster in namespace
// (DefaultRemediationLeaseNamespace when empty).
func NewNodeLeases(client kubernetes.Interface, namespace string, clk clock.PassiveClock) *NodeLeases {
	if namespace == "" {
		namespace = DefaultRemediationLeaseNamespace
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &NodeLeases{client: client, namespace: namespace, holder: RemediationLeaseHolder, clk: clk}
}

// LeaseName is the Lease of a node (medik8s/common generateLeaseName:
// the lower-cased kind and the name).
func LeaseName(node string) string { return strings.ToLower("node-" + node) }

// Namespace is where the Leases are.
func (l *NodeLeases) Namespace() string { return l.namespace }

// Acquire takes or renews the node's Lease for duration. It returns the
// holder that keeps it when another holder's Lease is valid (held false),
// taking over a lapsed one as the medik8s remediators do. A renewal is
// written only when less than half the duration is left.
func (l *NodeLeases) Acquire(ctx context.Context, node string, duration time.Duration) (held bool, holder string, err error) {
	leases := l.client.CoordinationV1().Leases(l.namespace)
	now := metav1.NewMicroTime(l.clk.Now())
	secs := int32(duration / time.Second)
	lease, err := leases.Get(ctx, LeaseName(node), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		// The Lease is owned by its Node, as medik8s/common makes it.
		n, err := l.client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, "", fmt.Errorf("take Lease %s/%s: get node: %w", l.namespace, LeaseName(node), err)
		}
		lease = &coordv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: LeaseName(node), Namespace: l.namespace,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node, UID: n.UID}}},
			Spec: coordv1.LeaseSpec{HolderIdentity: &l.holder, LeaseDurationSeconds: &secs, AcquireTime: &now, RenewTime: &now,
				LeaseTransitions: new(int32)},
		}
		if _, err := leases.Create(ctx, lease, metav1.CreateOptions{}); err != nil {
			if apierrors.IsAlreadyExists(err) {
				return false, "", fmt.Errorf("take Lease %s/%s: created meanwhile by another holder: %w", l.namespace, LeaseName(node), err)
			}
			return false, "", fmt.Errorf("create Lease %s/%s: %w", l.namespace, LeaseName(node), err)
		}
		return true, l.holder, nil
	}
	if err != nil {
		return false, "", fmt.Errorf("get Lease %s/%s: %w", l.namespace, LeaseName(node), err)
	}
	cur := ""
	if lease.Spec.HolderIdentity != nil {
		cur = *lease.Spec.HolderIdentity
	}
	if cur == l.holder {
		if due, ok := leaseDue(lease); ok && due.Sub(now.Time) > duration/2 {
			return true, l.holder, nil
		}
	} else if leaseValid(lease, now.Time) {
		return false, cur, nil
	} else {
		lease.Spec.AcquireTime = &now
		n := int32(1)
		if lease.Spec.LeaseTransitions != nil {
			n = *lease.Spec.LeaseTransitions + 1
		}
		lease.Spec.LeaseTransitions = &n
	}
	lease.Spec.HolderIdentity = &l.holder
	lease.Spec.LeaseDurationSeconds = &secs
	lease.Spec.RenewTime = &now
	if _, err := leases.Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
		return false, "", fmt.Errorf("renew Lease %s/%s: %w", l.namespace, LeaseName(node), err)
	}
	return true, l.holder, nil
}

// Release deletes the node's Lease if fenced holds it (medik8s/common
// InvalidateLease deletes it the same way).
func (l *NodeLeases) Release(ctx context.Context, node string) error {
	leases := l.client.CoordinationV1().Leases(l.namespace)
	lease, err := leases.Get(ctx, LeaseName(node), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get Lease %s/%s: %w", l.namespace, LeaseName(node), err)
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != l.holder {
		return nil
	}
	err = leases.Delete(ctx, lease.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &lease.UID, ResourceVersion: &lease.ResourceVersion}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("release Lease %s/%s: %w", l.namespace, LeaseName(node), err)
	}
	return nil
}

func leaseDue(l *coordv1.Lease) (time.Time, bool) {
	if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return time.Time{}, false
	}
	return l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second), true
}

// leaseValid is medik8s/common's isValidLease.
func leaseValid(l *coordv1.Lease, now time.Time) bool {
	due, ok := leaseDue(l)
	return ok && !due.Before(now) && !l.Spec.RenewTime.After(now)
}
