package kube

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
)

// EventNamespace is where Events about cluster-scoped objects (Nodes) go,
// as the kubelet and the node controllers do.
const EventNamespace = metav1.NamespaceDefault

// Writer makes the API server writes of the fencing pipeline: node taints,
// forced pod deletion and Events. Every method is safe to repeat: a taint
// already present is not added twice, a pod already gone is done, an Event
// already recorded is not recorded again.
type Writer struct {
	cs        kubernetes.Interface
	clk       clock.PassiveClock
	component string
	instance  string
}

// NewWriter returns a Writer using cs (a client with a request timeout, such
// as Clients.Requests). component names the Events' source ("fenced") and
// instance the replica that writes them.
func NewWriter(cs kubernetes.Interface, component, instance string, clk clock.PassiveClock) *Writer {
	if clk == nil {
		clk = clock.RealClock{}
	}
	if component == "" {
		component = "fenced"
	}
	return &Writer{cs: cs, clk: clk, component: component, instance: instance}
}

// CheckAPIServer checks the API server's /readyz.
func (w *Writer) CheckAPIServer(ctx context.Context) error {
	return CheckReadyz(ctx, w.cs)
}

// GetNode reads a Node from the API server (not a cache).
func (w *Writer) GetNode(ctx context.Context, name string) (*corev1.Node, error) {
	n, err := w.cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get node %s: %w", name, err)
	}
	return n, nil
}

// sameTaint reports whether two taints have the same key and effect (the
// identity of a taint on a node).
func sameTaint(a, b corev1.Taint) bool { return a.Key == b.Key && a.Effect == b.Effect }

// AddTaints puts the taints on the node. A taint with the same key and
// effect is replaced when its value differs and left alone otherwise. It
// reports whether the node changed.
func (w *Writer) AddTaints(ctx context.Context, node string, taints ...corev1.Taint) (bool, error) {
	now := metav1.NewTime(w.clk.Now())
	return w.updateTaints(ctx, node, "add taints", func(cur []corev1.Taint) ([]corev1.Taint, bool) {
		out := append([]corev1.Taint(nil), cur...)
		changed := false
		for _, t := range taints {
			if t.Effect == corev1.TaintEffectNoExecute && t.TimeAdded == nil {
				t.TimeAdded = &now
			}
			found := false
			for i := range out {
				if !sameTaint(out[i], t) {
					continue
				}
				found = true
				if out[i].Value != t.Value {
					out[i] = t
					changed = true
				}
			}
			if !found {
				out = append(out, t)
				changed = true
			}
		}
		return out, changed
	})
}

// RemoveTaints removes every taint with the key and effect of one of taints
// (whatever its value). It reports whether the node changed.
func (w *Writer) RemoveTaints(ctx context.Context, node string, taints ...corev1.Taint) (bool, error) {
	return w.updateTaints(ctx, node, "remove taints", func(cur []corev1.Taint) ([]corev1.Taint, bool) {
		out := make([]corev1.Taint, 0, len(cur))
		for _, c := range cur {
			drop := false
			for _, t := range taints {
				if sameTaint(c, t) {
					drop = true
				}
			}
			if !drop {
				out = append(out, c)
			}
		}
		return out, len(out) != len(cur)
	})
}

// updateTaints reads the node, computes its new taints and writes them with
// a merge patch that carries the resourceVersion read, so the API server
// refuses it (Conflict) if the node changed in between; it then reads again.
func (w *Writer) updateTaints(ctx context.Context, node, what string,
	fn func([]corev1.Taint) ([]corev1.Taint, bool)) (bool, error) {
	changed := false
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		changed = false
		n, err := w.cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		taints, ch := fn(n.Spec.Taints)
		if !ch {
			return nil
		}
		patch, err := json.Marshal(map[string]any{
			"metadata": map[string]any{"resourceVersion": n.ResourceVersion},
			"spec":     map[string]any{"taints": taints},
		})
		if err != nil {
			return err
		}
		if _, err := w.cs.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return err
		}
		changed = true
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("%s on node %s: %w", what, node, err)
	}
	return changed, nil
}

// PodsOnNode lists every pod bound to the node, in all namespaces, read from
// the API server.
func (w *Writer) PodsOnNode(ctx context.Context, node string) ([]corev1.Pod, error) {
	list, err := w.cs.CoreV1().Pods(metav1.NamespaceAll).List(ctx,
		metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return nil, fmt.Errorf("list pods on node %s: %w", node, err)
	}
	return list.Items, nil
}

// ForceDeletePod deletes the pod at once (grace period 0) if it still has
// the given UID. It reports whether this call deleted it: a pod that is
// already gone, or whose name now belongs to a new pod (another UID), is
// done and reports false.
func (w *Writer) ForceDeletePod(ctx context.Context, namespace, name string, uid types.UID) (bool, error) {
	if uid == "" {
		return false, fmt.Errorf("force-delete pod %s/%s: uid is empty; refusing a delete without a UID precondition",
			namespace, name)
	}
	grace := int64(0)
	err := w.cs.CoreV1().Pods(namespace).Delete(ctx, name, metav1.DeleteOptions{
		GracePeriodSeconds: &grace,
		Preconditions:      &metav1.Preconditions{UID: &uid},
	})
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err):
		return false, nil
	case apierrors.IsConflict(err):
		// The UID precondition failed: the pod we meant is gone and a new
		// one took its name.
		return false, nil
	}
	return false, fmt.Errorf("force-delete pod %s/%s (uid %s): %w", namespace, name, uid, err)
}

// EventTarget is the object an Event is about.
type EventTarget struct {
	// Kind is "Node" or "Pod".
	Kind      string
	Namespace string
	Name      string
	UID       types.UID
}

// NodeTarget returns the EventTarget of a node.
func NodeTarget(name string, uid types.UID) EventTarget {
	return EventTarget{Kind: "Node", Name: name, UID: uid}
}

// PodTarget returns the EventTarget of a pod.
func PodTarget(p *corev1.Pod) EventTarget {
	return EventTarget{Kind: "Pod", Namespace: p.Namespace, Name: p.Name, UID: p.UID}
}

// Event records a Kubernetes Event about the target. key makes it unique:
// the same target, reason and key always yield the same Event name, so a
// repeated call records nothing new. eventType is corev1.EventTypeNormal or
// corev1.EventTypeWarning.
func (w *Writer) Event(ctx context.Context, target EventTarget, eventType, reason, key, message string) error {
	if target.Name == "" || target.Kind == "" {
		return errors.New("record event: target kind and name are required")
	}
	ns := target.Namespace
	if ns == "" {
		ns = EventNamespace
	}
	sum := sha256.Sum256([]byte(target.Kind + "\x00" + string(target.UID) + "\x00" + reason + "\x00" + key))
	name := fmt.Sprintf("%s.%s", truncateName(target.Name, 200), hex.EncodeToString(sum[:8]))
	now := metav1.NewTime(w.clk.Now())
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		InvolvedObject: corev1.ObjectReference{
			Kind: target.Kind, APIVersion: "v1", Namespace: target.Namespace, Name: target.Name, UID: target.UID,
		},
		Reason:         reason,
		Message:        truncate(message, 1000),
		Type:           eventType,
		Source:         corev1.EventSource{Component: w.component, Host: w.instance},
		FirstTimestamp: now,
		LastTimestamp:  now,
		Count:          1,
	}
	_, err := w.cs.CoreV1().Events(ns).Create(ctx, ev, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("record event %s on %s %s: %w", reason, target.Kind, target.Name, err)
	}
	return nil
}

func truncateName(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
