package kube

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/cache"
)

// trimCached drops, from every object the informers keep, what fenced
// never reads: the managed fields (server-side apply bookkeeping, kept by
// the API server for every writer of the object: the kubelet, the
// controllers, kwok, ...) and a Node's container image list (up to 50
// entries a node on a real kubelet). The informers hold every Node,
// Lease, CSINode, PersistentVolume and VolumeAttachment of a cluster, so
// at rest these are most of fenced's memory per node. fenced never writes
// a cached object back (its writes are patches, or objects it reads
// afresh), so nothing dropped here can be lost on the API server.
func trimCached(obj any) (any, error) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		trimmed, err := trimCached(d.Obj)
		if err != nil {
			return nil, err
		}
		d.Obj = trimmed
		return d, nil
	}
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	if n, ok := obj.(*corev1.Node); ok {
		n.Status.Images = nil
	}
	return obj, nil
}

var _ cache.TransformFunc = trimCached
