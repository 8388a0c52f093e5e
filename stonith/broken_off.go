//go:build !fenced_broken_delete_before_fence

package stonith

// brokenDeleteBeforeFence is false in every real build. The build tag
// fenced_broken_delete_before_fence turns it on to make a deliberately
// unsafe fenced (pods deleted before any array is fenced) that the
// end-to-end suite runs to prove its invariant checker catches it.
const brokenDeleteBeforeFence = false
