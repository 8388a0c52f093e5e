//go:build fenced_broken_delete_before_fence

package stonith

// brokenDeleteBeforeFence: see broken_off.go. NEVER ship a build with this
// tag: it force-deletes a failed node's pods before fencing it.
const brokenDeleteBeforeFence = true
