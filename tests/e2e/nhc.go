package e2e

import (
	"fmt"
	"path/filepath"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/fenced-project/fenced/tests/testbed"
)

// NHCResource is the NodeHealthCheck resource
// (node-healthcheck-operator api/v1alpha1).
var NHCResource = schema.GroupVersionResource{Group: "remediation.medik8s.io", Version: "v1alpha1", Resource: "nodehealthchecks"}

// RemediationResource is fenced's FencedRemediation resource.
var RemediationResource = schema.GroupVersionResource{Group: "fenced.io", Version: "v1alpha1", Resource: "fencedremediations"}

// NHCTemplate is the FencedRemediationTemplate of
// deploy/kubernetes/nhc/example-template.yaml.
const NHCTemplate = "fenced-storage-fence"

// StartNHC runs the real NodeHealthCheck operator against ClusterName's
// control plane and applies fenced's remediator manifests and example
// template (deploy/kubernetes/nhc). It returns a dynamic client for the
// custom resources.
func (h *Harness) StartNHC() (dynamic.Interface, error) {
	if err := h.CP.StartNHC(h.ctx, testbed.NHCOptions{}); err != nil {
		return nil, err
	}
	root, err := testbed.RepoRoot()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(root, "deploy", "kubernetes", "nhc")
	if err := h.CP.ApplyManifests(h.ctx, filepath.Join(dir, "remediator.yaml")); err != nil {
		return nil, err
	}
	if err := h.CP.WaitCRDs(h.ctx, "fencedremediationtemplates.fenced.io", "fencedremediations.fenced.io"); err != nil {
		return nil, err
	}
	if err := h.CP.ApplyManifests(h.ctx, filepath.Join(dir, "example-template.yaml")); err != nil {
		return nil, err
	}
	return dynamic.NewForConfig(h.CP.RESTConfig)
}

// NodeHealthCheck returns a NodeHealthCheck over every worker that asks
// the templates in order (apiVersion, kind, name in namespace medik8s),
// each step timing out after stepTimeout, for a node whose Ready
// condition has been Unknown or False for unhealthyFor.
func NodeHealthCheck(name string, unhealthyFor, healthyDelay, stepTimeout time.Duration, templates ...[3]string) *unstructured.Unstructured {
	var steps []any
	for i, tpl := range templates {
		steps = append(steps, map[string]any{
			"remediationTemplate": map[string]any{"apiVersion": tpl[0], "kind": tpl[1], "name": tpl[2], "namespace": testbed.NHCNamespace},
			"order":               int64(i),
			"timeout":             stepTimeout.String(),
		})
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "remediation.medik8s.io/v1alpha1", "kind": "NodeHealthCheck",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"selector": map[string]any{"matchExpressions": []any{map[string]any{
				"key": "node-role.kubernetes.io/control-plane", "operator": "DoesNotExist"}}},
			"minHealthy":   "51%",
			"healthyDelay": healthyDelay.String(),
			"unhealthyConditions": []any{
				map[string]any{"type": "Ready", "status": "Unknown", "duration": unhealthyFor.String()},
				map[string]any{"type": "Ready", "status": "False", "duration": unhealthyFor.String()},
			},
			"escalatingRemediations": steps,
		},
	}}
}

// Condition returns a condition of a custom resource's
// status.conditions: status, reason and message ("" when absent).
func Condition(u *unstructured.Unstructured, typ string) (status, reason, message string) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ {
			return fmt.Sprint(m["status"]), fmt.Sprint(m["reason"]), fmt.Sprint(m["message"])
		}
	}
	return "", "", ""
}

// CreateNHC creates a NodeHealthCheck.
func (h *Harness) CreateNHC(dyn dynamic.Interface, nhc *unstructured.Unstructured) error {
	_, err := dyn.Resource(NHCResource).Create(h.ctx, nhc, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create NodeHealthCheck %s: %w", nhc.GetName(), err)
	}
	return nil
}
