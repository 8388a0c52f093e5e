package kube

import (
	"context"
	"fmt"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Access is one thing fenced asks a cluster's API server to do: a verb on
// a resource, cluster-wide or in one namespace.
type Access struct {
	// Group is the API group ("" for the core group).
	Group string `json:"group,omitempty"`
	// Resource is the resource's plural name.
	Resource string `json:"resource"`
	// Verb is get, list, watch, patch, delete or create.
	Verb string `json:"verb"`
	// Namespace is where fenced needs it; empty means every namespace
	// (cluster-wide).
	Namespace string `json:"namespace,omitempty"`
	// Why says what fenced needs it for.
	Why string `json:"why"`
}

// String names the access the way kubectl auth can-i takes it: "patch
// nodes", "get leases.coordination.k8s.io in kube-node-lease".
func (a Access) String() string {
	r := a.Resource
	if a.Group != "" {
		r += "." + a.Group
	}
	s := a.Verb + " " + r
	if a.Namespace != "" {
		s += " in " + a.Namespace
	}
	return s
}

// RequiredAccess lists every verb on every resource fenced uses in a
// protected cluster: what deploy/kubernetes/rbac.yaml grants, no more.
func RequiredAccess() []Access {
	var out []Access
	add := func(group, resource, ns, why string, verbs ...string) {
		for _, v := range verbs {
			out = append(out, Access{Group: group, Resource: resource, Verb: v, Namespace: ns, Why: why})
		}
	}
	add("", "nodes", "", "health verdicts (Ready condition, boot ID)", "get", "list", "watch")
	add("", "nodes", "", "the fenced-node and out-of-service taints", "patch")
	add("coordination.k8s.io", "leases", LeaseNamespace, "kubelet heartbeats", "get", "list", "watch")
	add("storage.k8s.io", "csinodes", "", "the node's CSI node IDs (its array identities)", "get", "list", "watch")
	add("", "pods", "", "the pods of a fenced node", "get", "list", "watch")
	add("", "pods", "", "force-delete a fenced node's StatefulSet pods", "delete")
	add("", "persistentvolumes", "", "the storage footprint: which volumes a node uses", "get", "list", "watch")
	add("", "persistentvolumeclaims", "", "the storage footprint: which volumes a node uses", "get", "list", "watch")
	add("storage.k8s.io", "volumeattachments", "", "the storage footprint: which volumes a node uses", "get", "list", "watch")
	add("", "events", "", "Events on the fenced node and its pods", "create", "patch")
	add("events.k8s.io", "events", "", "Events on the fenced node and its pods", "create", "patch")
	return out
}

// MissingAccess asks the API server, with SelfSubjectAccessReviews as the
// client's own user, for every access in want and returns those it does
// not allow. It reads nothing else and writes nothing.
func MissingAccess(ctx context.Context, cs kubernetes.Interface, want []Access) ([]Access, error) {
	var missing []Access
	for _, a := range want {
		rev, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Group: a.Group, Resource: a.Resource, Verb: a.Verb, Namespace: a.Namespace,
			}},
		}, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("ask the API server whether fenced may %s: %w", a, err)
		}
		if !rev.Status.Allowed {
			missing = append(missing, a)
		}
	}
	return missing, nil
}
