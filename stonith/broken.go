package stonith

import (
	"context"

	"github.com/fenced-project/fenced/cluster/ledger"
)

// deletePodsUnfenced force-deletes the node's evictable pods with no fence
// in place: the unsafe step of the deliberately broken build only.
func (c *Controller) deletePodsUnfenced(ctx context.Context, cl *clusterRuntime, f *ledger.Fence) {
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
