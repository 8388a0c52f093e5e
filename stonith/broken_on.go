//go:build fenced_broken_delete_before_fence

package stonith

import (
	"context"

	"github.com/fenced-project/fenced/cluster/ledger"
)

// brokenBeforeFencing force-deletes the node's evictable pods before any
// array is fenced: see broken_off.go. NEVER ship a build with this tag.
func (c *Controller) brokenBeforeFencing(ctx context.Context, cl *clusterRuntime, f *ledger.Fence) {
	kctx, cancel := context.WithTimeout(ctx, c.cfg.KubeTimeout)
	defer cancel()
	pods, err := cl.Kube.PodsOnNode(kctx, f.Node)
	if err != nil {
		return
	}
	for i := range pods {
		if p := &pods[i]; cl.evictable(p) {
			_, _ = cl.Kube.ForceDeletePod(kctx, p.Namespace, p.Name, p.UID)
		}
	}
}
