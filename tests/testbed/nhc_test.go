package testbed_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/fenced-project/fenced/tests/testbed"
)

// NHC's own resource (node-healthcheck-operator api/v1alpha1).
var nhcResource = schema.GroupVersionResource{Group: "remediation.medik8s.io", Version: "v1alpha1", Resource: "nodehealthchecks"}

// TestNHCOperatorCreatesRemediation runs the real NodeHealthCheck operator
// against the test bed and checks the contract fenced relies on: for a
// node whose Ready condition went Unknown it takes the node's Lease in
// medik8s-leases and creates a CR of the template's kind minus "Template",
// named after the node, with the node-name and template-name annotations,
// the part-of label and an owner reference to the NodeHealthCheck; and
// deletes it when the node is healthy again.
func TestNHCOperatorCreatesRemediation(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the NodeHealthCheck operator: skipped under -short")
	}
	cp := testbed.Start(t, testbed.Options{NodeLeaseDurationSeconds: leaseDuration,
		ControllerManagerArgs: []string{"--node-monitor-grace-period=12s"}})
	ctx := ctxFor(t, 8*time.Minute)
	require.NoError(t, cp.StartNHC(ctx, testbed.NHCOptions{BuildLog: tlogWriter{t}}))

	root, err := testbed.RepoRoot()
	require.NoError(t, err)
	require.NoError(t, cp.ApplyManifests(ctx, filepath.Join(root, "deploy", "kubernetes", "nhc", "remediator.yaml")))
	require.NoError(t, cp.WaitCRDs(ctx, "fencedremediationtemplates.fenced.io", "fencedremediations.fenced.io"))
	require.NoError(t, cp.ApplyManifests(ctx, filepath.Join(root, "deploy", "kubernetes", "nhc", "example-template.yaml")))

	nodes, err := cp.AddNodes(ctx, testbed.NodeSpecs("nhc", 3)...)
	require.NoError(t, err)
	require.NoError(t, cp.WaitNodesReady(ctx, "nhc-1", "nhc-2", "nhc-3"))

	dyn, err := dynamic.NewForConfig(cp.RESTConfig)
	require.NoError(t, err)
	nhc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "remediation.medik8s.io/v1alpha1", "kind": "NodeHealthCheck",
		"metadata": map[string]any{"name": "workers"},
		"spec": map[string]any{
			"selector": map[string]any{"matchExpressions": []any{map[string]any{
				"key": "node-role.kubernetes.io/control-plane", "operator": "DoesNotExist"}}},
			"minHealthy":   "51%",
			"healthyDelay": "2s",
			"unhealthyConditions": []any{
				map[string]any{"type": "Ready", "status": "Unknown", "duration": "2s"},
				map[string]any{"type": "Ready", "status": "False", "duration": "2s"},
			},
			"remediationTemplate": map[string]any{"apiVersion": "fenced.io/v1alpha1", "kind": "FencedRemediationTemplate",
				"name": "fenced-storage-fence", "namespace": "medik8s"},
		},
	}}
	_, err = dyn.Resource(nhcResource).Create(ctx, nhc, metav1.CreateOptions{})
	require.NoError(t, err)

	require.NoError(t, nodes[0].Kill(ctx))
	rems := dyn.Resource(schema.GroupVersionResource{Group: "fenced.io", Version: "v1alpha1", Resource: "fencedremediations"}).Namespace("medik8s")
	var cr *unstructured.Unstructured
	require.Eventually(t, func() bool {
		cr, err = rems.Get(ctx, "nhc-1", metav1.GetOptions{})
		return err == nil
	}, 3*time.Minute, 250*time.Millisecond, "NHC created no FencedRemediation for the dead node; its log:\n%s", nhcLog(cp))
	assert.Equal(t, "nhc-1", cr.GetAnnotations()["remediation.medik8s.io/node-name"])
	assert.Equal(t, "fenced-storage-fence", cr.GetAnnotations()["remediation.medik8s.io/template-name"])
	assert.Equal(t, "node-healthcheck-controller", cr.GetLabels()["app.kubernetes.io/part-of"])
	require.Len(t, cr.GetOwnerReferences(), 1)
	assert.Equal(t, "NodeHealthCheck", cr.GetOwnerReferences()[0].Kind)
	reason, _, _ := unstructured.NestedString(cr.Object, "spec", "reason")
	assert.Equal(t, "NodeHealthCheck found the node unhealthy", reason, "spec copied from the template")

	lease, err := cp.Client.CoordinationV1().Leases("medik8s-leases").Get(ctx, "node-nhc-1", metav1.GetOptions{})
	require.NoError(t, err, "NHC took no Lease for the node")
	require.NotNil(t, lease.Spec.HolderIdentity)
	assert.Equal(t, "NodeHealthCheck-workers", *lease.Spec.HolderIdentity)

	_, err = nodes[0].Reboot(ctx)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := rems.Get(ctx, "nhc-1", metav1.GetOptions{})
		return err != nil
	}, 3*time.Minute, 250*time.Millisecond, "NHC did not delete the FencedRemediation of the healthy node")
}

func nhcLog(cp *testbed.ControlPlane) string {
	if cp.NHC == nil {
		return ""
	}
	return testbed.LogTail(cp.NHC.LogPath, 4000)
}

// tlogWriter writes to the test log.
type tlogWriter struct{ t *testing.T }

func (w tlogWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}
