package kube

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestParseRemediation reads a FencedRemediation as NodeHealthCheck v0.12.0
// creates it (internal/controller/resources/manager.go
// generateRemediationCR) and as fenced left it.
func TestParseRemediation(t *testing.T) {
	created := metav1.NewTime(time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC))
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "fenced.io/v1alpha1", "kind": "FencedRemediation",
		"metadata": map[string]any{
			"name": "worker-3-x7k2p", "namespace": "medik8s", "uid": "u-1",
			"creationTimestamp": created.UTC().Format(time.RFC3339),
			"annotations": map[string]any{AnnotationNodeName: "worker-3", AnnotationTemplateName: "fenced-storage-fence",
				AnnotationNHCTimedOut: "2026-11-28T12:05:00Z"},
			"labels":          map[string]any{"app.kubernetes.io/part-of": "node-healthcheck-controller"},
			"ownerReferences": []any{map[string]any{"apiVersion": "remediation.medik8s.io/v1alpha1", "kind": "NodeHealthCheck", "name": "workers", "uid": "n-1"}},
			"finalizers":      []any{RemediationFinalizer},
		},
		"spec": map[string]any{"reason": "unhealthy"},
		"status": map[string]any{"fenceID": "fence-12", "phase": "evicted",
			"conditions": []any{map[string]any{"type": "Succeeded", "status": "True", "reason": "Fenced", "message": "",
				"lastTransitionTime": "2026-11-28T12:01:00Z"}}},
	}}
	r := parseRemediation(u)
	assert.Equal(t, "worker-3", r.Node, "the node comes from the annotation when NHC generated the name")
	assert.Equal(t, "medik8s/worker-3-x7k2p", r.Key())
	assert.Equal(t, "fenced-storage-fence", r.Template)
	assert.Equal(t, "2026-11-28T12:05:00Z", r.TimedOut)
	assert.Equal(t, []string{"NodeHealthCheck/workers"}, r.Owners)
	assert.Equal(t, "unhealthy", r.Reason)
	assert.True(t, r.Finalized)
	assert.False(t, r.Deleting)
	assert.Equal(t, "fence-12", r.Status.FenceID)
	assert.Len(t, r.Status.Conditions, 1)

	u.SetAnnotations(nil)
	u.SetName("worker-4")
	assert.Equal(t, "worker-4", parseRemediation(u).Node, "without the annotation the CR is named after the node")
}
