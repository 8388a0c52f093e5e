//go:build !fenced_broken_delete_before_fence

package stonith

import (
	"context"

	"github.com/fenced-project/fenced/cluster/ledger"
)

// brokenBeforeFencing does nothing in every real build. The build tag
// fenced_broken_delete_before_fence replaces it (broken_on.go) to make a
// deliberately unsafe fenced, which the end-to-end suite runs to prove its
// invariant checker catches it; release binaries hold none of that code.
func (c *Controller) brokenBeforeFencing(context.Context, *clusterRuntime, *ledger.Fence) {}
