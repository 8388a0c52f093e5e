package kube

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// StatusObjectResource is fenced's in-cluster status object
// (deploy/kubernetes/status.yaml): one cluster-scoped FencedStatus named
// StatusObjectName that `kubectl get fencedstatus` shows.
var StatusObjectResource = schema.GroupVersionResource{Group: RemediationGroup, Version: RemediationVersion, Resource: "fencedstatuses"}

// StatusObjectName is the name of the one FencedStatus of a cluster.
const StatusObjectName = "fenced"

// StatusObject writes fenced's FencedStatus in one cluster.
type StatusObject struct {
	client dynamic.Interface
}

// NewStatusObject returns the writer of a cluster's FencedStatus.
func NewStatusObject(client dynamic.Interface) *StatusObject {
	return &StatusObject{client: client}
}

// Write creates the FencedStatus or replaces its status.
func (s *StatusObject) Write(ctx context.Context, st map[string]any) error {
	ri := s.client.Resource(StatusObjectResource)
	cur, err := ri.Get(ctx, StatusObjectName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": RemediationGroup + "/" + RemediationVersion, "kind": "FencedStatus",
			"metadata": map[string]any{"name": StatusObjectName, "labels": map[string]any{"app.kubernetes.io/name": "fenced"}},
			"status":   st,
		}}
		if _, err := ri.Create(ctx, u, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create FencedStatus %s: %w", StatusObjectName, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("get FencedStatus %s: %w", StatusObjectName, err)
	}
	cur.Object["status"] = st
	if _, err := ri.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update FencedStatus %s: %w", StatusObjectName, err)
	}
	return nil
}
