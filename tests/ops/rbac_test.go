package ops

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/fenced-project/fenced/kube"
	"github.com/fenced-project/fenced/tests/testbed"
)

// fencedSubject is the user the RBAC manifest's ServiceAccount authenticates as.
const fencedSubject = "system:serviceaccount:fenced:fenced"

// applyManifest creates every object of a multi-document YAML manifest as
// the admin and returns them.
func applyManifest(ctx context.Context, t *testing.T, cs kubernetes.Interface, path string) []runtime.Object {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var objs []runtime.Object
	for i, doc := range strings.Split(string(b), "\n---\n") {
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(doc), nil, nil)
		require.NoError(t, err, "%s: document %d", path, i)
		objs = append(objs, obj)
		require.Eventually(t, func() bool {
			err = createObject(ctx, cs, obj)
			return err == nil || apierrors.IsAlreadyExists(err)
		}, 30*time.Second, 200*time.Millisecond, "create document %d: %v", i, err)
	}
	return objs
}

// createObject creates one object of the kinds the manifest may hold.
func createObject(ctx context.Context, cs kubernetes.Interface, obj runtime.Object) error {
	c := metav1.CreateOptions{}
	var err error
	switch o := obj.(type) {
	case *corev1.Namespace:
		_, err = cs.CoreV1().Namespaces().Create(ctx, o, c)
	case *corev1.ServiceAccount:
		_, err = cs.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, c)
	case *corev1.Secret:
		_, err = cs.CoreV1().Secrets(o.Namespace).Create(ctx, o, c)
	case *rbacv1.ClusterRole:
		_, err = cs.RbacV1().ClusterRoles().Create(ctx, o, c)
	case *rbacv1.ClusterRoleBinding:
		_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, o, c)
	case *rbacv1.Role:
		_, err = cs.RbacV1().Roles(o.Namespace).Create(ctx, o, c)
	case *rbacv1.RoleBinding:
		_, err = cs.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, c)
	default:
		return fmt.Errorf("unexpected kind %T in the manifest", obj)
	}
	return err
}

// access is one (resource, verb, namespace) question for the authorizer.
type access struct {
	group, resource, verb, namespace string
}

func (a access) String() string {
	r := a.resource
	if a.group != "" {
		r += "." + a.group
	}
	if a.namespace != "" {
		return fmt.Sprintf("%s %s in %s", a.verb, r, a.namespace)
	}
	return a.verb + " " + r
}

// TestRBACLeastPrivilege applies deploy/kubernetes/rbac.yaml to a real API
// server, authenticates as its ServiceAccount with the token Kubernetes
// issues for it, and then:
//   - asks the authorizer about every verb on the resources fenced touches
//     and a few it must not: allowed exactly where the manifest says;
//   - runs every read and write of the fencing sequence through the kube
//     package: watch Nodes, node Leases and CSINodes, read a Lease, list
//     the pods of a node, taint the node, force-delete a pod with a UID
//     precondition, record Events (core and events.k8s.io);
//   - shows forbidden calls fail with a clear Forbidden error.
func TestRBACLeastPrivilege(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane: skipped under -short")
	}
	cp := testbed.Start(t, testbed.Options{NodeLeaseDurationSeconds: 8})
	// No array takes part: the StatefulSet's volumes are attached without
	// a driver (made-up handles).
	cp.AttachWithoutController(true)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	root := repoRoot(t)
	objs := applyManifest(ctx, t, cp.Client, filepath.Join(root, "deploy", "kubernetes", "rbac.yaml"))
	require.Len(t, objs, 7)

	// The token the tokens controller puts in the manifest's Secret.
	var token string
	require.Eventually(t, func() bool {
		s, err := cp.Client.CoreV1().Secrets("fenced").Get(ctx, "fenced-token", metav1.GetOptions{})
		if err != nil {
			return false
		}
		token = string(s.Data["token"])
		return token != ""
	}, time.Minute, 200*time.Millisecond, "the fenced-token Secret never got a token")
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, cp.WriteKubeconfig(kc, token))

	// Objects for fenced to act on, made by the admin.
	nodes, err := cp.AddNodes(ctx, testbed.NodeSpecs("rbac", 2)...)
	require.NoError(t, err)
	require.NoError(t, cp.WaitNodesReady(ctx, nodes[0].Name(), nodes[1].Name()))
	_, err = cp.CreateStatefulSet(ctx, testbed.StatefulSetSpec{Namespace: "db", Name: "pg", Replicas: 2, AntiAffinity: true})
	require.NoError(t, err)
	var victim corev1.Pod
	require.Eventually(t, func() bool {
		pods, err := cp.PodsOnNode(ctx, "db", nodes[0].Name())
		if err != nil || len(pods) == 0 {
			return false
		}
		victim = pods[0]
		return true
	}, 2*time.Minute, 200*time.Millisecond, "no StatefulSet pod on %s", nodes[0].Name())

	cl, err := kube.NewCluster("bed", kube.Config{Kubeconfig: kc}, nil)
	require.NoError(t, err)
	fenced := cl.Clients().Requests

	t.Run("authorizer", func(t *testing.T) {
		allowed := map[string]bool{}
		for _, a := range []access{
			{"", "nodes", "get", ""}, {"", "nodes", "list", ""}, {"", "nodes", "watch", ""}, {"", "nodes", "patch", ""},
			{"", "pods", "get", "db"}, {"", "pods", "list", ""}, {"", "pods", "watch", ""}, {"", "pods", "delete", "db"},
			{"", "persistentvolumes", "get", ""}, {"", "persistentvolumes", "list", ""}, {"", "persistentvolumes", "watch", ""},
			{"", "persistentvolumeclaims", "get", "db"}, {"", "persistentvolumeclaims", "list", ""}, {"", "persistentvolumeclaims", "watch", ""},
			{"storage.k8s.io", "csinodes", "get", ""}, {"storage.k8s.io", "csinodes", "list", ""}, {"storage.k8s.io", "csinodes", "watch", ""},
			{"storage.k8s.io", "volumeattachments", "get", ""}, {"storage.k8s.io", "volumeattachments", "list", ""}, {"storage.k8s.io", "volumeattachments", "watch", ""},
			{"coordination.k8s.io", "leases", "get", "kube-node-lease"}, {"coordination.k8s.io", "leases", "list", "kube-node-lease"}, {"coordination.k8s.io", "leases", "watch", "kube-node-lease"},
			{"", "events", "create", "db"}, {"", "events", "patch", "db"},
			{"events.k8s.io", "events", "create", "db"}, {"events.k8s.io", "events", "patch", "db"},
		} {
			allowed[a.String()] = true
		}
		resources := []access{
			{"", "nodes", "", ""}, {"", "pods", "", "db"}, {"", "persistentvolumes", "", ""}, {"", "persistentvolumeclaims", "", "db"},
			{"storage.k8s.io", "csinodes", "", ""}, {"storage.k8s.io", "volumeattachments", "", ""},
			{"coordination.k8s.io", "leases", "", "kube-node-lease"}, {"coordination.k8s.io", "leases", "", "kube-system"},
			{"", "events", "", "db"}, {"events.k8s.io", "events", "", "db"},
			{"", "secrets", "", "db"}, {"", "secrets", "", "fenced"}, {"", "configmaps", "", "db"}, {"", "serviceaccounts", "", "fenced"},
			{"", "namespaces", "", ""}, {"apps", "statefulsets", "", "db"}, {"rbac.authorization.k8s.io", "clusterroles", "", ""},
			{"", "pods/eviction", "", "db"}, {"", "nodes/status", "", ""}, {"", "pods/exec", "", "db"},
		}
		verbs := []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}
		checked := 0
		for _, r := range resources {
			for _, v := range verbs {
				a := r
				a.verb = v
				if a.namespace != "" && (v == "list" || v == "watch") && (a.resource == "pods" || a.resource == "persistentvolumeclaims") {
					a.namespace = "" // asked cluster-wide, as fenced lists them
				}
				res, sub := a.resource, ""
				if i := strings.Index(res, "/"); i > 0 {
					res, sub = res[:i], res[i+1:]
				}
				rev, err := fenced.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
					Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
						Group: a.group, Resource: res, Subresource: sub, Verb: v, Namespace: a.namespace,
					}},
				}, metav1.CreateOptions{})
				require.NoError(t, err)
				assert.Equal(t, allowed[a.String()], rev.Status.Allowed, "%s: allowed=%v (%s)", a, rev.Status.Allowed, rev.Status.Reason)
				checked++
			}
		}
		t.Logf("%d (resource, verb) pairs checked; %d allowed", checked, len(allowed))
	})

	t.Run("fencing sequence", func(t *testing.T) {
		// Watches and direct reads of the detector.
		var seen = make(chan kube.Event, 1024)
		require.NoError(t, cl.StartWatches(ctx, func(ev kube.Event) {
			select {
			case seen <- ev:
			default:
			}
		}))
		require.Eventually(t, func() bool { return cl.WatchState().Synced }, time.Minute, 100*time.Millisecond)
		assert.Empty(t, cl.WatchState().Error)
		node := nodes[0].Name()
		n, ok := cl.Node(node)
		require.True(t, ok)
		assert.Equal(t, "True", kube.ReadyStatus(n))
		_, ok = cl.CSINode(node)
		require.True(t, ok, "the CSINode is watched")
		kinds := map[kube.Kind]bool{}
		require.Eventually(t, func() bool {
			for {
				select {
				case ev := <-seen:
					kinds[ev.Kind] = true
				default:
					return kinds[kube.KindNode] && kinds[kube.KindLease] && kinds[kube.KindCSINode]
				}
			}
		}, time.Minute, 100*time.Millisecond, "events of every kind: %v", kinds)
		l, err := cl.ReadLease(ctx, node)
		require.NoError(t, err)
		require.NotNil(t, l.Spec.RenewTime)
		require.NoError(t, cl.CheckAPIServer(ctx))

		// The volumes of the node.
		_, err = fenced.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		_, err = fenced.CoreV1().PersistentVolumeClaims(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		_, err = fenced.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
		require.NoError(t, err)

		// The writes: list the node's pods (their UIDs go in the ledger
		// before anything changes), taint the node, force-delete the pods,
		// record Events. The out-of-service taint (NoExecute) goes on after
		// the delete here: its taint manager would otherwise evict the pods
		// itself before this test could force-delete one.
		w := kube.NewWriter(fenced, "fenced", "ops-test", nil)
		pods, err := w.PodsOnNode(ctx, node)
		require.NoError(t, err)
		require.NotEmpty(t, pods)
		oos := corev1.Taint{Key: "node.kubernetes.io/out-of-service", Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute}
		mark := corev1.Taint{Key: "fenced.io/fenced", Value: "fence-1", Effect: corev1.TaintEffectNoSchedule}
		changed, err := w.AddTaints(ctx, node, mark)
		require.NoError(t, err)
		assert.True(t, changed)

		deleted, err := w.ForceDeletePod(ctx, victim.Namespace, victim.Name, "not-"+victim.UID)
		require.NoError(t, err)
		assert.False(t, deleted, "the UID precondition protects another pod of that name")
		deleted, err = w.ForceDeletePod(ctx, victim.Namespace, victim.Name, victim.UID)
		require.NoError(t, err)
		assert.True(t, deleted)

		require.NoError(t, w.Event(ctx, kube.PodTarget(&victim), corev1.EventTypeWarning, "FencedPodDeleted", "ops-pod", "deleted after fence-1"))
		require.NoError(t, w.Event(ctx, kube.NodeTarget(node, n.UID), corev1.EventTypeWarning, "NodeFenced", "ops-node", "fenced at every array"))
		evs, err := cp.Client.CoreV1().Events(kube.EventNamespace).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		var reasons []string
		for _, e := range evs.Items {
			if e.InvolvedObject.Kind == "Node" && e.InvolvedObject.Name == node {
				reasons = append(reasons, e.Reason)
			}
		}
		assert.Contains(t, reasons, "NodeFenced", "the node Event was recorded (%d Events in %s)", len(evs.Items), kube.EventNamespace)
		now := metav1.NowMicro()
		_, err = fenced.EventsV1().Events("db").Create(ctx, &eventsv1.Event{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "fenced-"}, EventTime: now, ReportingController: "fenced.io/fenced",
			ReportingInstance: "ops-test", Action: "Fence", Reason: "NodeFenced", Type: corev1.EventTypeNormal, Note: "events.k8s.io works too",
			Regarding: corev1.ObjectReference{Kind: "Pod", Namespace: "db", Name: victim.Name, UID: victim.UID},
		}, metav1.CreateOptions{})
		require.NoError(t, err)

		changed, err = w.AddTaints(ctx, node, oos)
		require.NoError(t, err)
		assert.True(t, changed)
		got, err := w.GetNode(ctx, node)
		require.NoError(t, err)
		assert.Len(t, got.Spec.Taints, 2)

		// The StatefulSet controller recreates the pod; the scheduler keeps
		// it off the tainted node.
		require.Eventually(t, func() bool {
			p, err := cp.Client.CoreV1().Pods("db").Get(ctx, victim.Name, metav1.GetOptions{})
			return err == nil && p.UID != victim.UID
		}, time.Minute, 200*time.Millisecond)

		changed, err = w.RemoveTaints(ctx, node, mark, oos)
		require.NoError(t, err)
		assert.True(t, changed)
	})

	t.Run("forbidden", func(t *testing.T) {
		node := nodes[1].Name()
		for _, tc := range []struct {
			name string
			call func() error
			want string
		}{
			{"delete a node", func() error {
				return fenced.CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{})
			}, `cannot delete resource "nodes" in API group "" at the cluster scope`},
			{"read secrets", func() error {
				_, err := fenced.CoreV1().Secrets("fenced").Get(ctx, "fenced-token", metav1.GetOptions{})
				return err
			}, `cannot get resource "secrets" in API group "" in the namespace "fenced"`},
			{"list secrets", func() error {
				_, err := fenced.CoreV1().Secrets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
				return err
			}, `cannot list resource "secrets" in API group "" at the cluster scope`},
			{"delete a volume attachment", func() error {
				return fenced.StorageV1().VolumeAttachments().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
			}, `cannot deletecollection resource "volumeattachments" in API group "storage.k8s.io" at the cluster scope`},
			{"read a lease outside kube-node-lease", func() error {
				_, err := fenced.CoordinationV1().Leases("kube-system").List(ctx, metav1.ListOptions{})
				return err
			}, `cannot list resource "leases" in API group "coordination.k8s.io" in the namespace "kube-system"`},
			{"update a node's status", func() error {
				n, err := cp.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
				if err != nil {
					return err
				}
				_, err = fenced.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
				return err
			}, `cannot update resource "nodes/status"`},
		} {
			t.Run(tc.name, func(t *testing.T) {
				err := tc.call()
				require.Error(t, err)
				assert.True(t, apierrors.IsForbidden(err), "want Forbidden, got %v", err)
				assert.Contains(t, err.Error(), `User "`+fencedSubject+`"`)
				assert.Contains(t, err.Error(), tc.want)
				t.Logf("%s: %v", tc.name, err)
			})
		}
		// The node is still there.
		_, err := cp.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		require.NoError(t, err)
	})
}
